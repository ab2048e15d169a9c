// The queue tree an operator writes (--queues): loaded and validated, or an InputError.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "model/input_error.h"
#include "model/queue_tree.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const tessera::QueueTree t = tessera::parse_queue_tree_yaml(
        std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.yaml");
    (void)t.size();
  } catch (const tessera::InputError&) {
  }
  return 0;
}
