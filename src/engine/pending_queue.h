// The pending jobs as a caller keeps them between cycles, ordered for one QueueOrder, so that a
// cycle costs what can start rather than the length of the queue: the order is
// walked lazily (QueueOrder::walk), and the aggregates a cycle needs (demand per tenant, the
// gang sizes and ranks waiting, the shortest estimates per gang size) are kept as jobs come and
// go instead of summed per cycle, so that the cycle can stop once nothing it has not yet looked
// at could start (cycle.cc).
//
// Invariants: jobs() holds every pending job once, densely, in no particular order (removal
// moves the last job into the hole); every entry's `index` is its job's position in jobs();
// streams() hold every job once, each sorted by pending_key(), each entry with its job's
// amounts, estimate and wants_reason, each node's StreamSums those of its subtree; every
// aggregate equals what a pass over jobs() would compute.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <span>
#include <unordered_map>
#include <vector>

#include <ext/pb_ds/assoc_container.hpp>
#include <ext/pb_ds/tree_policy.hpp>

#include "engine/decisions.h"
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

// A job in a stream: its key, its position in PendingQueue::jobs() (kept as jobs move), what
// it adds to its queue's usage when the fair order assumes it starts, and what says whether a
// walk may pass over it (PassOver): its duration estimate and whether its reason is wanted.
struct StreamEntry {
  PendingKey key;
  mutable uint32_t index = 0;
  Amounts amounts = kZeroAmounts;  // at minimum gang size
  double estimate = kUnknown;      // JobSpec::duration_estimate
  bool wants_reason = true;        // PendingJob::wants_reason
  bool operator<(const StreamEntry& o) const { return key < o.key; }
};

// A bit per GPU count (milli-GPU / 1000, the last bit for 63 and more): which needs a subtree
// of a stream holds (StreamSums::needs), or which a rule keeps for preemption (PassOver).
inline uint64_t need_bit(int64_t need_milli) {
  return uint64_t{1} << std::clamp<int64_t>(need_milli / kMilliPerGpu, 0, 63);
}

// Which of a tenant's jobs a walk may leave out (PendingWalk::pass_over) while EASY's
// reservation holds every GPU: those whose reason is not wanted that the cycle, as things
// stand, would only leave waiting (Cycle::pass_over). Such a job either needs more than the
// capacity the reservation spares and is not known to end by its shadow time (Cycle::backfit),
// or needs more than `room_milli` (what is free) and none of `preempt_needs` (those of the
// tenant's gang shapes that may preempt).
struct PassOver {
  double now = 0;
  double shadow_time = std::numeric_limits<double>::infinity();
  int64_t extra_milli = 0;
  int64_t room_milli = std::numeric_limits<int64_t>::max();
  std::vector<int64_t> preempt_needs;  // sorted, distinct
  uint64_t preempt_bits = 0;           // need_bit of each

  // Whether the walk must yield the job.
  bool keeps(const StreamEntry& e) const {
    const int64_t need = e.amounts[kGpuDim];
    return e.wants_reason ||
           ((need <= extra_milli || (e.estimate >= 0 && now + e.estimate <= shadow_time)) &&
            (need <= room_milli || may_preempt(need)));
  }
  bool may_preempt(int64_t need) const {
    return (preempt_bits & need_bit(need)) != 0 &&
           std::binary_search(preempt_needs.begin(), preempt_needs.end(), need);
  }
  // Whether this rule keeps every job `o` keeps.
  bool keeps_all_of(const PassOver& o) const {
    if (now != o.now || shadow_time != o.shadow_time || extra_milli < o.extra_milli ||
        room_milli < o.room_milli) {
      return false;
    }
    for (int64_t need : o.preempt_needs) {
      if (need > room_milli && !may_preempt(need)) return false;
    }
    return true;
  }
  void add_preempt_need(int64_t need) {
    const auto at = std::lower_bound(preempt_needs.begin(), preempt_needs.end(), need);
    if (at != preempt_needs.end() && *at == need) return;
    preempt_needs.insert(at, need);
    preempt_bits |= need_bit(need);
  }
  bool operator==(const PassOver&) const = default;
};

// What a stream keeps at each node of its tree about its subtree: the sum of the amounts, so
// that the amounts of all jobs ahead of a key are summed in O(log n) (amounts_before, and
// first_where, which finds a place in the fair walk), and what finds the next job a PassOver
// keeps (first_kept) without looking at the subtrees that hold none.
struct StreamSums {
  Amounts amounts = kZeroAmounts;
  int64_t min_need = std::numeric_limits<int64_t>::max();  // smallest amounts[kGpuDim]
  // The smallest known estimate (>= 0), if any is known.
  double min_estimate = std::numeric_limits<double>::infinity();
  bool any_estimate = false;
  bool any_wants_reason = false;
  uint64_t needs = 0;  // need_bit of each amounts[kGpuDim]

  static StreamSums of(const StreamEntry& e) {
    const bool known = e.estimate >= 0;
    return {
        e.amounts, e.amounts[kGpuDim], known ? e.estimate : std::numeric_limits<double>::infinity(),
        known,     e.wants_reason,     need_bit(e.amounts[kGpuDim])};
  }
  void add(const StreamSums& o) {
    amounts = amounts + o.amounts;
    needs |= o.needs;
    min_need = std::min(min_need, o.min_need);
    min_estimate = std::min(min_estimate, o.min_estimate);
    any_estimate = any_estimate || o.any_estimate;
    any_wants_reason = any_wants_reason || o.any_wants_reason;
  }
  // Whether the subtree may hold a job `rule` keeps: never false when it does (the estimate
  // is compared with slack, since now + estimate <= shadow_time is not estimate <= shadow_time
  // - now in floating point); PassOver::keeps decides for each job.
  bool may_keep(const PassOver& rule) const {
    if (any_wants_reason) return true;
    if (min_need > rule.room_milli && (needs & rule.preempt_bits) == 0) return false;
    if (min_need <= rule.extra_milli) return true;
    if (!any_estimate) return false;
    const double room = rule.shadow_time - rule.now;
    return min_estimate <= room + 1e-6 * (1 + std::abs(rule.shadow_time) + std::abs(rule.now));
  }
};

// The node update of a stream's tree: keeps StreamSums.
template <class NodeCItr, class NodeItr, class Cmp, class Alloc>
struct StreamSumsUpdate {
  using metadata_type = StreamSums;
  void operator()(NodeItr it, NodeCItr end) {
    StreamSums sums = StreamSums::of(**it);
    if (it.get_l_child() != end) sums.add(it.get_l_child().get_metadata());
    if (it.get_r_child() != end) sums.add(it.get_r_child().get_metadata());
    const_cast<StreamSums&>(it.get_metadata()) = sums;
  }
  // The summed amounts of the entries whose key is below `key`.
  Amounts amounts_before(const PendingKey& key) const {
    Amounts sum = kZeroAmounts;
    for (NodeCItr it = node_begin(); it != node_end();) {
      if ((*it)->key < key) {
        if (it.get_l_child() != node_end()) sum = sum + it.get_l_child().get_metadata().amounts;
        sum = sum + (*it)->amounts;
        it = it.get_r_child();
      } else {
        it = it.get_l_child();
      }
    }
    return sum;
  }
  // The first entry whose key is at least `from` that `rule` keeps; null when none.
  const StreamEntry* first_kept(const PendingKey& from, const PassOver& rule) const {
    return first_kept(node_begin(), from, rule);
  }
  // The first entry for which after(entry, amounts of the entries before it) holds, given that
  // it holds for every entry after one it holds for; null when none. `before` gets the amounts
  // of the entries ahead of it (of all entries when none).
  template <class After>
  const StreamEntry* first_where(const After& after, Amounts& before) const {
    const StreamEntry* found = nullptr;
    Amounts ahead = kZeroAmounts;  // of the entries left of the subtree at `it`
    for (NodeCItr it = node_begin(); it != node_end();) {
      Amounts here = ahead;
      if (it.get_l_child() != node_end()) here = here + it.get_l_child().get_metadata().amounts;
      if (after(**it, here)) {
        found = &**it;
        before = here;
        it = it.get_l_child();
      } else {
        ahead = here + (*it)->amounts;
        it = it.get_r_child();
      }
    }
    if (found == nullptr) before = ahead;
    return found;
  }
  virtual NodeCItr node_begin() const = 0;
  virtual NodeCItr node_end() const = 0;
  virtual ~StreamSumsUpdate() = default;

 private:
  // Down one path to `from`; off it, only into subtrees that may hold a kept entry.
  const StreamEntry* first_kept(NodeCItr it, const PendingKey& from, const PassOver& rule) const {
    while (it != node_end() && (*it)->key < from) it = it.get_r_child();
    if (it == node_end() || !it.get_metadata().may_keep(rule)) return nullptr;
    if (const StreamEntry* e = first_kept(it.get_l_child(), from, rule)) return e;
    if (rule.keeps(**it)) return &**it;
    return first_in(it.get_r_child(), rule);
  }
  // The first entry of a subtree (all at or after `from`) that `rule` keeps.
  const StreamEntry* first_in(NodeCItr it, const PassOver& rule) const {
    if (it == node_end() || !it.get_metadata().may_keep(rule)) return nullptr;
    if (const StreamEntry* e = first_in(it.get_l_child(), rule)) return e;
    if (rule.keeps(**it)) return &**it;
    return first_in(it.get_r_child(), rule);
  }
};

class PendingQueue {
 public:
  // libstdc++'s policy-based tree: a red-black tree whose nodes also sum their subtree.
  using Stream = __gnu_pbds::tree<StreamEntry, __gnu_pbds::null_type, std::less<StreamEntry>,
                                  __gnu_pbds::rb_tree_tag, StreamSumsUpdate>;
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
  // The job as queued, or null when it is not.
  const PendingJob* find(JobId id) const {
    const auto it = index_.find(id);
    return it == index_.end() ? nullptr : &jobs_[it->second];
  }

 private:
  void account(const PendingJob& job, uint32_t index, int sign);
  StreamEntry stream_entry(const PendingJob& job, uint32_t index) const;
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

// A caller's kept queue as a snapshot's pending jobs (serve and the Kubernetes scheduler keep
// their reasons between cycles): with `refresh`, every job, each wanting its reason (a full
// walk; `everyone` holds the copy), else the queue itself, so the cycle stops once nothing more
// can start and gives reasons only to jobs that want one.
void offer_pending(const PendingQueue& q, bool refresh, std::vector<PendingJob>& everyone,
                   Snapshot& snap);
// After the cycle: each job it gave a reason wants none until it is queued anew or the next
// refresh.
void reasons_given(PendingQueue& q, std::span<const PendingReason> given);

}  // namespace tessera
