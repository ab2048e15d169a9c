// Resource amounts as integers (milli-units, MiB) so that allocations add and subtract
// exactly: a ledger that allocates and releases the same demand returns to where it was.
#pragma once

#include <cstdint>

namespace tessera {

inline constexpr int32_t kMilliPerGpu = 1000;

// What one member (task) of a gang asks for. `gpus` devices, each with `gpu_milli` of its
// capacity: whole GPUs have gpu_milli == 1000; a fractional share (Alibaba's gpu_milli < 1000)
// has gpus == 1 and gpu_milli < 1000. All GPUs of one member sit on the same node.
struct MemberDemand {
  int32_t gpus = 1;
  int32_t gpu_milli = kMilliPerGpu;
  int64_t cpu_milli = 0;
  int64_t mem_mib = 0;

  int64_t total_gpu_milli() const { return int64_t{gpus} * gpu_milli; }
  bool whole_gpus() const { return gpu_milli == kMilliPerGpu; }
  bool operator==(const MemberDemand&) const = default;
};

}  // namespace tessera
