// The pending jobs as a caller keeps them between cycles, ordered for one QueueOrder, so that a
// cycle costs what can start rather than the length of the queue (issue 15): the order is
// walked lazily (QueueOrder::walk), and the aggregates a cycle needs (demand per tenant, the
// gang sizes and ranks waiting, the shortest estimates per gang size) are kept as jobs come and
// go instead of summed per cycle, so that the cycle can stop once nothing it has not yet looked
// at could start (cycle.cc).
//
// Invariants: jobs() holds every pending job once, densely, in no particular order (removal
// moves the last job into the hole); every entry's `index` is its job's position in jobs();
// streams() hold every job once, each sorted by pending_key(); every aggregate equals what a
// pass over jobs() would compute.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <span>
#include <unordered_map>
#include <vector>

#include <ext/pb_ds/assoc_container.hpp>
#include <ext/pb_ds/tree_policy.hpp>

#include "engine/snapshot.h"
#include "model/queue_tree.h"

namespace tessera {

class QueueOrder;

// Where a pending job stands in a queue order: priority class first (higher first), then the
// order's key (smaller first: a deadline, an estimate, a LAS level), then arrival (submit time,
// then id). Total and deterministic.
struct PendingKey {
  int neg_priority = 0;
  double key = 0;
  double submit_time = 0;
  JobId id = 0;
  auto operator<=>(const PendingKey&) const = default;
};

// A tenant's pending gangs that place alike (the cycle's cache of shapes that found no room):
// the demand per member, the sizes, GPU types, span and node restriction (by identity).
// Ordered by tenant, then need (milli-GPU at minimum size).
struct GangShape {
  TenantId tenant = 0;
  int64_t need = 0;
  int32_t gpus = 0, gpu_milli = 0;
  int64_t cpu_milli = 0, mem_mib = 0;
  int32_t min_members = 0, max_members = 0;
  uint64_t types = 0;
  uint8_t span = 0;
  uintptr_t nodes = 0;  // JobSpec::eligible_nodes.get()
  auto operator<=>(const GangShape&) const = default;
  static GangShape of(const JobSpec& s);
};

// A job in a stream: its key, its position in PendingQueue::jobs() (kept as jobs move), and
// what it adds to its queue's usage when the fair order assumes it starts.
struct StreamEntry {
  PendingKey key;
  mutable uint32_t index = 0;
  Amounts amounts = kZeroAmounts;  // at minimum gang size
  bool operator<(const StreamEntry& o) const { return key < o.key; }
};

// Keeps, at every node of a stream's tree, the sum of its subtree's amounts, so that the
// amounts of all jobs ahead of a key are summed in O(log n) (amounts_before).
template <class NodeCItr, class NodeItr, class Cmp, class Alloc>
struct AmountsSumUpdate {
  using metadata_type = Amounts;
  void operator()(NodeItr it, NodeCItr end) {
    Amounts sum = (*it)->amounts;
    if (it.get_l_child() != end) sum = sum + it.get_l_child().get_metadata();
    if (it.get_r_child() != end) sum = sum + it.get_r_child().get_metadata();
    const_cast<Amounts&>(it.get_metadata()) = sum;
  }
  // The summed amounts of the entries whose key is below `key`.
  Amounts amounts_before(const PendingKey& key) const {
    Amounts sum = kZeroAmounts;
    for (NodeCItr it = node_begin(); it != node_end();) {
      if ((*it)->key < key) {
        if (it.get_l_child() != node_end()) sum = sum + it.get_l_child().get_metadata();
        sum = sum + (*it)->amounts;
        it = it.get_r_child();
      } else {
        it = it.get_l_child();
      }
    }
    return sum;
  }
  virtual NodeCItr node_begin() const = 0;
  virtual NodeCItr node_end() const = 0;
  virtual ~AmountsSumUpdate() = default;
};

class PendingQueue {
 public:
  // libstdc++'s policy-based tree: a red-black tree whose nodes also sum their subtree.
  using Stream = __gnu_pbds::tree<StreamEntry, __gnu_pbds::null_type, std::less<StreamEntry>,
                                  __gnu_pbds::rb_tree_tag, AmountsSumUpdate>;
  // A job among those of its gang shape: by duration estimate (unknown: +inf), then id, with
  // its position in jobs() (kept as jobs move).
  struct EstimateEntry {
    std::pair<double, JobId> key;
    mutable uint32_t index = 0;
    bool operator<(const EstimateEntry& o) const { return key < o.key; }
  };
  using ByEstimate = std::set<EstimateEntry>;

  // `order` must outlive the queue; a job's key and rank are taken when it is added (a pending
  // job's spec and attained service do not change while it waits).
  explicit PendingQueue(const QueueOrder& order);

  // Adds a job (its spec must outlive its stay); throws std::invalid_argument if present.
  void add(const PendingJob& job);
  // Removes a job; throws std::invalid_argument if absent.
  void remove(JobId id);
  bool contains(JobId id) const { return index_.contains(id); }
  // Whether the caller wants the job's PendingReason from the next cycles.
  void set_wants_reason(JobId id, bool wants);
  const QueueOrder& order() const { return order_; }

  size_t size() const { return jobs_.size(); }
  bool empty() const { return jobs_.empty(); }
  std::span<const PendingJob> jobs() const { return jobs_; }

  // The jobs in pending_key order: one stream per tenant (by TenantId) for orders that
  // interleave tenants (drf, fair), else a single stream.
  std::span<const Stream> streams() const { return streams_; }
  bool per_tenant() const { return per_tenant_; }

  // By TenantId: how many jobs wait, and their demand at minimum gang size, best-effort
  // excluded (QueueShares::demand). tenants() bounds the ids with jobs.
  TenantId tenants() const { return static_cast<TenantId>(count_.size()); }
  uint32_t count(TenantId t) const { return t < count_.size() ? count_[t] : 0; }
  Amounts demand(TenantId t) const { return t < demand_.size() ? demand_[t] : kZeroAmounts; }
  // Every tenant's gang shapes waiting (by tenant, then need), with their jobs.
  const std::map<GangShape, ByEstimate>& by_shape() const { return by_shape_; }
  // Every preemption rank waiting (QueueOrder::rank), with how many jobs hold it.
  const std::map<int64_t, uint32_t>& ranks() const { return rank_; }
  size_t count(PriorityClass c) const { return by_class_[static_cast<size_t>(c)]; }
  // The jobs whose reason the caller wants (PendingJob::wants_reason).
  const std::set<JobId>& wanting_reasons() const { return wanting_; }
  uint32_t index_of(JobId id) const { return index_.at(id); }

 private:
  void account(const PendingJob& job, uint32_t index, int sign);
  void set_wanting(JobId id, bool wants);
  // The entries of the job at jobs_[pos] now say `pos`.
  void reindex(uint32_t pos);

  const QueueOrder& order_;
  bool per_tenant_;
  std::vector<PendingJob> jobs_;
  std::unordered_map<JobId, uint32_t> index_;  // job -> position in jobs_
  std::vector<Stream> streams_;
  std::vector<uint32_t> count_;  // by TenantId
  std::vector<Amounts> demand_;  // by TenantId
  std::map<GangShape, ByEstimate> by_shape_;
  std::map<int64_t, uint32_t> rank_;
  std::array<size_t, 4> by_class_{};  // by PriorityClass
  std::set<JobId> wanting_;
};

}  // namespace tessera
