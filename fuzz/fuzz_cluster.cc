// Cluster descriptions (YAML, and the two CSV node lists): built, or an InputError.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "model/cluster_spec.h"
#include "model/input_error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // The first byte picks the reader, so one corpus covers all three.
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    switch (data[0] % 3) {
      case 0:
        (void)tessera::parse_cluster_yaml(text, "fuzz.yaml").num_gpus();
        break;
      case 1:
        (void)tessera::parse_alibaba_nodes_csv(text, "fuzz.csv").num_gpus();
        break;
      default:
        (void)tessera::parse_tiresias_cluster_csv(text, "fuzz.csv").num_gpus();
        break;
    }
  } catch (const tessera::InputError&) {
  }
  return 0;
}
