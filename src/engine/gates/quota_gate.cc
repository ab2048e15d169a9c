#include "engine/gates/quota_gate.h"

namespace tessera {

// Quota before capacity: a job its queue may not run now waits without holding a reservation
// (it is not short of GPUs, its queue is short of quota).
bool QuotaGate::admit(const GateInput& in, const JobSpec& job, QueueId leaf,
                      PendingReason& reason) const {
  const QueueId q = first_over_limit(in.tree, in.live, leaf, amounts_of(job, job.min_members));
  if (q == kNoId) return true;
  set_quota_reason(in.tree, in.live, q, reason);
  return false;
}

}  // namespace tessera
