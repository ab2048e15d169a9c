// Job specs as tenants send them (YAML, or JSON): a spec either is refused with a FieldError or
// reads back to itself through its JSON form.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include <nlohmann/json.hpp>

#include "store/job_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  tessera::JobRequest r;
  try {
    r = tessera::parse_job_request(text);
  } catch (const tessera::FieldError&) {
    return 0;
  }
  // What was accepted is stored as JSON and read back at every restart: it must be the same.
  const tessera::JobRequest again = tessera::job_request_from_json(tessera::to_json(r));
  if (!(again == r)) std::abort();
  return 0;
}
