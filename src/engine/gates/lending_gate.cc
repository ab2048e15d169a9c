#include "engine/gates/lending_gate.h"

namespace tessera {

bool LendingGate::admit(const GateInput& in, const JobSpec& job, QueueId leaf,
                        PendingReason& reason) const {
  const double bound = in.tree.settings().borrow_max_runtime_seconds;
  if (job.priority == PriorityClass::kInferenceCritical ||
      job.priority == PriorityClass::kBestEffort ||
      (job.duration_estimate > 0 && job.duration_estimate <= bound)) {
    return true;
  }
  const QueueId q = first_over_share(in.tree, in.shares, in.live, leaf, kRootQueue,
                                     amounts_of(job, job.min_members));
  if (q == kNoId) return true;
  set_fair_share_reason(in.shares, in.live, q, reason);
  reason.borrow_max_runtime = bound;
  return false;
}

}  // namespace tessera
