// Fair shares over the queue tree: what each queue is entitled to right now, given what every
// queue holds and wants. Pure functions of a snapshot; the fair queue order, reclaim and the
// simulator's fairness metrics all use these, so "entitled" means one thing everywhere.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "engine/snapshot.h"
#include "model/queue_tree.h"

namespace tessera {

// Hierarchical weighted max-min (water-filling), one dimension at a time: each queue first
// gets its guarantee (up to its demand), then what its parent has left is split among the
// children that want more in proportion to their weights, each capped at min(demand, limit),
// repeating until the parent's amount or the demand runs out. Guarantees exceeding what a
// parent has (the cluster shrank) are scaled down proportionally. With no guarantees and every
// queue demanding more than its share this is R_q = W_q / sum(W) * R_total.
//   demand: by QueueId; an inner queue's entry is ignored (its children's sum is used).
// Long-term fairness: with decayed usage (by QueueId, leaves) and long_term_weight L > 0, the
// split beyond guarantees uses adjusted weights W'_q = W_q / max(0.1, (1 - L) + L * h_q), where
// h_q is how many times its weighted share of its siblings' recent GPU usage the queue used
// (1 = exactly its share): a team that used a lot yesterday yields today, one that used
// little is favoured, and guarantees are never touched.
// Returns entitlements by QueueId; the root's is min(capacity, total demand).
std::vector<Amounts> water_fill(const QueueTree& tree, const Amounts& capacity,
                                std::span<const Amounts> demand,
                                std::span<const Amounts> decayed = {}, double long_term_weight = 0);

// Usage relative to entitlement on the dimension where it is largest (the dominant share of
// DRF, measured against the queue's own entitlement rather than the cluster). Dimensions
// where both are zero are ignored; usage without entitlement is +infinity.
double dominant_ratio(const Amounts& usage, const Amounts& entitled);

Amounts amounts_of(const Allocation& a);
Amounts cluster_capacity(const Cluster& c);

// Effective throughput (fairness.count: throughput). Each GPU share counts milli x the job's
// type_speed on that GPU's type (V100 = 1); a type the job has no speed for counts at the type
// table's relative_speed, and a job without type_speed counts raw (a.gpu_milli()).
int64_t effective_gpu_milli(const Cluster& c, const JobSpec& job, const Allocation& a);
// What `a` counts for fair shares: amounts_of(a), with the GPU dimension effective_gpu_milli
// when the tree counts throughput. Every fair-share usage (compute_queue_shares, the cycle's
// live usage, the simulator's tracker) goes through this.
Amounts fair_amounts_of(const FairnessSettings& fs, const Cluster& c, const JobSpec& job,
                        const Allocation& a);
// The capacity entitlements are filled over, in the same unit: cluster_capacity(c), with the
// GPU dimension the sum over GPUs of their type's relative_speed (V100-equivalent milli-GPUs)
// when the tree counts throughput.
Amounts fair_capacity(const FairnessSettings& fs, const Cluster& c);

// Per-queue view of a snapshot. Best-effort work counts in usage but not in demand: it runs on
// idle capacity only, so it earns no entitlement.
struct QueueShares {
  const QueueTree* tree = nullptr;  // the snapshot's, or `owned` (one queue per tenant)
  std::unique_ptr<QueueTree> owned;
  std::vector<Amounts> usage;     // held by running jobs, by QueueId (inner queues: subtree sum)
  std::vector<Amounts> demand;    // usage + pending at minimum gang size, best-effort excluded
                                  // (inner queues: subtree sum)
  std::vector<Amounts> entitled;  // water_fill(demand, decayed usage, long-term weight)

  QueueId leaf_of(TenantId t) const;
};

// `what`: kFull computes everything; kTreeOnly only picks the tree (usage, demand and
// entitlement stay zero), for cycles whose policy and tree need neither (no limits, no
// reclaim, an order that does not read them): the common single-tenant or FIFO case.
enum class SharesNeeded : uint8_t { kFull, kTreeOnly };
QueueShares compute_queue_shares(const Snapshot& snap, SharesNeeded what = SharesNeeded::kFull);
// Whether any queue of `tree` has a limit or a per-GPU-type quota (quota admission applies).
bool has_limits(const QueueTree& tree);

}  // namespace tessera
