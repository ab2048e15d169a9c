// Queue limits, shared by the quota and lending gates and by the cycle's own checks.
#include "engine/gates/admission_gate.h"

namespace tessera {

QueueId first_over_limit(const QueueTree& tree, const std::vector<Amounts>& live, QueueId leaf,
                         const Amounts& need) {
  for (QueueId q = leaf; q != kNoId; q = tree.queue(q).parent) {
    if (!all_le(live[q] + need, tree.queue(q).limit)) return q;
  }
  return kNoId;
}

// A queue may reclaim only while it stays within its entitlement. Reclaim from a sibling subtree
// changes usage only below the common ancestor, so that is `top` there; kRootQueue checks the
// whole path.
QueueId first_over_share(const QueueTree& tree, const QueueShares& shares,
                         const std::vector<Amounts>& live, QueueId leaf, QueueId top,
                         const Amounts& need) {
  for (QueueId q = leaf; q != top && q != kNoId; q = tree.queue(q).parent) {
    if (!all_le(live[q] + need, shares.entitled[q])) return q;
  }
  return kNoId;
}

void set_quota_reason(const QueueTree& tree, const std::vector<Amounts>& live, QueueId q,
                      PendingReason& reason) {
  reason.code = PendingCode::kQuotaExceeded;
  reason.queue = q;
  reason.queue_holds_milli = live[q][kGpuDim];
  reason.queue_bound_milli = tree.queue(q).limit[kGpuDim];
}

void set_fair_share_reason(const QueueShares& shares, const std::vector<Amounts>& live, QueueId q,
                           PendingReason& reason) {
  reason.code = PendingCode::kOverFairShare;
  reason.queue = q;
  reason.queue_holds_milli = live[q][kGpuDim];
  reason.queue_bound_milli = shares.entitled[q][kGpuDim];
}

}  // namespace tessera
