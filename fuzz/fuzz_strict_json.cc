// JSON bodies of every API call: parsed or refused with a FieldError, never anything else.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "store/job_request.h"
#include "store/strict_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const nlohmann::json j =
        tessera::parse_json_strict(std::string_view(reinterpret_cast<const char*>(data), size));
    (void)j.dump();
  } catch (const tessera::FieldError&) {
  }
  return 0;
}
