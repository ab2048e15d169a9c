#include "engine/gates/inference_reserve_gate.h"

namespace tessera {

bool InferenceReserveGate::admit(const GateInput& in, const JobSpec& job, QueueId /*leaf*/,
                                 PendingReason& reason) const {
  if (job.priority == PriorityClass::kInferenceCritical ||
      in.scratch.free_milli_matching(kAnyGpuType) - reason.need_gpu_milli >=
          in.snap.inference_reserve_milli) {
    return true;
  }
  reason.code = PendingCode::kReservedForInference;
  reason.queue_bound_milli = in.snap.inference_reserve_milli;
  return false;
}

}  // namespace tessera
