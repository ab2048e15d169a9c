// The running jobs as a caller keeps them between cycles, beside its PendingQueue:
// the caller edits one entry when one job starts, stops or changes instead of rebuilding the
// list every cycle, and a cycle reads each tenant's usage and demand from it
// (compute_queue_shares) instead of summing them over every running job.
//
// Invariants: jobs() holds every running job once, densely, in the order they were added
// except that removal moves the last job into the hole (the order a caller's own list keeps,
// so a cycle sees the jobs in the same order either way); every job's position is in index_;
// usage(t) and demand(t) equal the sums over t's jobs of fair_amounts_of(settings, cluster,
// spec, *alloc) as of their last add or update (demand: best-effort excluded), so an entry
// must be updated whenever its allocation changes.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <map>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/snapshot.h"
#include "model/cluster.h"
#include "model/queue_tree.h"

namespace tessera {

class QueueOrder;

class RunningSet {
 public:
  // Usage is counted as `settings` counts it (FairnessSettings::count); a cycle whose queue
  // tree counts otherwise sums its running jobs itself. `cluster` must outlive the set.
  // With `order` (which must outlive the set) and an order whose ranks do not move with
  // attained service, it also keeps the preemption ranks running (QueueOrder::rank).
  RunningSet(const Cluster& cluster, const FairnessSettings& settings,
             const QueueOrder* order = nullptr);

  // Adds a job (its spec and allocation must outlive its stay); throws std::invalid_argument
  // if present.
  void add(const RunningJob& job);
  // Replaces a present job's entry (its allocation may have changed in place, as when an
  // elastic gang is resized); throws std::invalid_argument if absent.
  void update(const RunningJob& job);
  // Removes a job; throws std::invalid_argument if absent.
  void remove(JobId id);
  bool contains(JobId id) const { return index_.contains(id); }
  const RunningJob& at(JobId id) const { return jobs_[index_.at(id)]; }

  size_t size() const { return jobs_.size(); }
  bool empty() const { return jobs_.empty(); }
  std::span<const RunningJob> jobs() const { return jobs_; }

  const Cluster& cluster() const { return cluster_; }
  FairCount fair_count() const { return settings_.count; }
  // By TenantId: how many jobs run, what they hold as fair shares count it, and the part of
  // it that is not best-effort (QueueShares::usage and demand). tenants() bounds the ids with
  // jobs.
  TenantId tenants() const { return static_cast<TenantId>(per_tenant_.size()); }
  uint32_t count(TenantId t) const { return t < per_tenant_.size() ? per_tenant_[t].jobs : 0; }
  Amounts usage(TenantId t) const {
    return t < per_tenant_.size() ? per_tenant_[t].usage : kZeroAmounts;
  }
  Amounts demand(TenantId t) const {
    return t < per_tenant_.size() ? per_tenant_[t].demand : kZeroAmounts;
  }
  size_t count(PriorityClass c) const { return by_class_[static_cast<size_t>(c)]; }
  // Whether it keeps the ranks `order` gives (min_rank), and the lowest of them (the largest
  // int64_t when none runs).
  bool ranks_for(const QueueOrder& order) const { return ranked_ && &order == order_; }
  int64_t min_rank() const {
    return rank_.empty() ? std::numeric_limits<int64_t>::max() : rank_.begin()->first;
  }

 private:
  struct TenantSums {
    uint32_t jobs = 0;
    Amounts usage = kZeroAmounts;
    Amounts demand = kZeroAmounts;
  };
  // What jobs_[pos] was counted with, kept so that removing it subtracts exactly that.
  struct Counted {
    TenantId tenant = 0;
    PriorityClass priority = PriorityClass::kResearch;
    int64_t rank = 0;  // when ranked_
    Amounts amounts = kZeroAmounts;
  };
  Counted counted(const RunningJob& job) const;
  void account(const Counted& c, int sign);

  const Cluster& cluster_;
  FairnessSettings settings_;
  const QueueOrder* order_;
  bool ranked_;  // order_ is set and its ranks are fixed while a job runs
  std::vector<RunningJob> jobs_;
  std::vector<Counted> counted_;               // parallel to jobs_
  std::unordered_map<JobId, uint32_t> index_;  // job -> position in jobs_
  std::vector<TenantSums> per_tenant_;         // by TenantId
  std::array<size_t, 4> by_class_{};           // by PriorityClass
  std::map<int64_t, uint32_t> rank_;           // rank -> jobs holding it (when ranked_)
};

}  // namespace tessera
