// Queue order: which pending gang the engine considers next, and which running gangs a
// pending one outranks (may preempt). Implementations share one behaviour test suite
// (tests/queue_order_test.cc).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/fair_share.h"
#include "engine/pending_queue.h"
#include "engine/snapshot.h"

namespace tessera {

// The pending jobs one at a time, in a queue order: lazily, so that a cycle that stops early
// (nothing more can start) pays only for the jobs it looked at.
class PendingWalk {
 public:
  virtual ~PendingWalk() = default;
  // The next index into Snapshot::pending, or -1 when every job was walked.
  virtual int64_t next() = 0;
  // The caller will consider no more of this tenant's jobs: the walk leaves them out when that
  // keeps the order of the others as it was (it returns whether it did), saving their steps.
  virtual bool drop_tenant(TenantId) { return false; }
  // Puts these jobs, none walked yet, in the order the walk would give them, without walking
  // the others, where it can (returns whether it did): the fair walk over a PendingQueue in a
  // flat tree. (A key order is the jobs' pending_key order; the caller sorts those itself.)
  virtual bool order_subset(std::vector<uint32_t>&) const { return false; }
  // From now on the walk may leave out the jobs of each tenant t that rule[t] does not keep,
  // where that keeps the order of the others as it was; it returns whether it does (the fair
  // walk over a PendingQueue in a flat tree whose leaves hold one tenant each: a job's place
  // there is fixed by its leaf's usage and what is ahead of it in the leaf, passed over or
  // not). Rules may come in any order: where one keeps a job an earlier one left out, the walk
  // goes back for the tenant's jobs after the last one it gave. The jobs it leaves out are not
  // given to the caller, who must not consider any job out of the walk's order (some not
  // given lie behind it). `rule` covers every tenant with jobs.
  virtual bool pass_over(std::span<const PassOver> /*rule*/) { return false; }
};

class QueueOrder {
 public:
  virtual ~QueueOrder() = default;
  virtual std::string_view name() const = 0;
  // Indices into snap.pending, in the order the engine should try them. Every order puts a
  // higher priority class first; within a class the policy decides. `shares` is
  // compute_queue_shares(snap) (the cycle computes it once for every consumer).
  // Every order walks sequences sorted by pending_key() (walk() below): one for the key orders,
  // one per tenant for drf and fair; this drains the walk.
  std::vector<uint32_t> order(const Snapshot& snap, const QueueShares& shares) const;
  std::vector<uint32_t> order(const Snapshot& snap) const {
    return order(snap, compute_queue_shares(snap));
  }
  // The same order, lazily. With Snapshot::pending_queue (kept by the caller in this order's
  // pending_key) a step is a tree iterator's for the key orders and O(tenants + queues) for
  // fair and drf; without it the walk first sorts snap.pending (O(n) when already sorted).
  std::unique_ptr<PendingWalk> walk(const Snapshot& snap, const QueueShares& shares) const;
  // Where a pending job stands within its tenant: priority class, then order_key(), then
  // arrival. Fixed while the job waits.
  PendingKey pending_key(const PendingJob& job) const;
  // The order's own key within a priority class (smaller first): 0 for arrival order.
  virtual double order_key(const PendingJob&) const { return 0; }
  // Preemption rank: a pending job may preempt running jobs of strictly lower rank. By
  // default the priority class; LAS also demotes by attained service.
  virtual int64_t rank(const JobSpec& job, double attained_gpu_seconds) const;
  // Whether order() reads usage, demand or entitlement from QueueShares (else only the tree).
  virtual bool reads_shares() const { return false; }
  // Whether the order changes as running jobs accumulate service (so callers must re-run the
  // cycle periodically, not only when jobs arrive or finish).
  virtual bool time_dependent() const { return false; }

  // How tenants' sequences interleave: by key (one order across tenants), by weighted dominant
  // share (drf) or by progressive filling of the queue tree (fair).
  enum class Interleave : uint8_t { kByKey, kDominantShare, kQueueTree };
  virtual Interleave interleave() const { return Interleave::kByKey; }
};

// First come, first served (by priority class, then submit time, then id).
std::unique_ptr<QueueOrder> make_fifo_order();
// Weighted dominant-resource fairness across tenants: progressive filling, the tenant with the
// lowest weighted dominant share next; FIFO within a tenant.
std::unique_ptr<QueueOrder> make_drf_order();
// Tiresias' discretised two-dimensional least-attained-service: attained GPU-seconds put a job
// in one of several queues (thresholds ascending); lower queues first, FIFO within a queue; a
// job in a lower queue outranks (may preempt) jobs in higher queues.
std::unique_ptr<QueueOrder> make_las_order(std::vector<double> thresholds_gpu_seconds = {57600});
// Hierarchical fair share: progressive filling down the queue tree, at each level the child
// whose usage is the smallest fraction of its entitlement (fair_share.h: guarantees, weights,
// limits and long-term usage) next; within a queue, earliest SLA deadline first (submit + max
// queueing delay; jobs without one after), then arrival.
std::unique_ptr<QueueOrder> make_fair_order();
// Shortest job first by the duration estimate (unknown estimates last, by arrival).
std::unique_ptr<QueueOrder> make_sjf_order();
// Helios' quasi-shortest-service-first: smallest GPUs x duration estimate first (unknown
// estimates last, by arrival). With a RuntimePredictor in the simulator the estimate is the
// predicted duration (docs/prediction.md).
std::unique_ptr<QueueOrder> make_qssf_order();

std::unique_ptr<QueueOrder> make_queue_order(std::string_view name);  // nullptr if unknown
std::vector<std::string> queue_order_names();

}  // namespace tessera
