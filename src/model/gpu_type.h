// GPU types and their relative speeds.
//
// The relative-speed table is documented in docs/execution-model.md: K80, P100 and V100
// come from Gavel's measured throughputs (geometric mean over its models, V100 = 1.0);
// newer types (T4, A10, A100, H100; L40S, B200, GB200, MI300X through the H100's) and
// Alibaba's anonymised G2/G3 are scaled from vendor FP32/TF32 dense figures relative to V100.
// Models with measured per-type throughput use those measurements instead (sim/execution_model).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/ids.h"

namespace tessera {

struct GpuType {
  std::string name;
  int64_t memory_mib = 0;
  double relative_speed = 1.0;  // throughput relative to V100 (1.0)
};

// A bitmask over GpuTypeId: bit t set means type t is acceptable. Zero means "any type".
using GpuTypeMask = uint64_t;
inline constexpr GpuTypeMask kAnyGpuType = 0;
inline bool type_allowed(GpuTypeMask mask, GpuTypeId t) {
  return mask == kAnyGpuType || (mask >> t) & 1u;
}

class GpuTypeTable {
 public:
  // The built-in table (see file comment); unknown names are added with speed 1.0.
  static GpuTypeTable builtin();

  // Finds a type by name or unambiguous alias (case-insensitive), or adds it with speed 1.0.
  // Only for names that come from hardware (nvidia-smi, a Kubernetes node's product label),
  // which must be scheduled even when unknown; files and requests use known().
  GpuTypeId intern(std::string_view name);
  // A type by its name or an unambiguous alias (A100-80GB -> A100-80G), case-insensitive.
  std::optional<GpuTypeId> find(std::string_view name) const;
  // As find(), but a name it does not know throws std::invalid_argument saying which names it
  // knows, or, for an ambiguous alias (A100), which types it could mean.
  GpuTypeId known(std::string_view name) const;
  std::string names() const;  // "V100, K80, ...": the types in this table, for messages
  const GpuType& at(GpuTypeId id) const { return types_.at(id); }
  size_t size() const { return types_.size(); }

 private:
  std::vector<GpuType> types_;
};

}  // namespace tessera
