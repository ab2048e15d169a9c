// The simulator's fairness bookkeeping per leaf queue: what each holds and wants, what it is
// entitled to (engine/fair_share.h's water_fill, so "entitled" means what the engine means),
// decayed long-term usage for the engine's snapshot, Jain's index over time, and a time series
// of share vs. entitlement.
#pragma once

#include <array>
#include <span>
#include <string>
#include <vector>

#include "engine/decayed_usage.h"
#include "model/allocation.h"
#include "model/cluster.h"
#include "model/job.h"
#include "model/queue_tree.h"

namespace tessera {

// Mean GPUs held and entitled per leaf queue in consecutive buckets of `interval` seconds
// from `start` (the last bucket may be shorter; its means are over its own length).
struct ShareSeries {
  double start = 0;
  double interval = 0;
  std::vector<std::string> queues;                  // leaf paths, one per series
  std::vector<std::vector<double>> gpus, entitled;  // [series][bucket]
};

class FairnessTracker {
 public:
  // `tree` must be bound to w.tenants and outlive the tracker. series_interval <= 0: no series.
  FairnessTracker(const QueueTree& tree, const Cluster& c, const Workload& w,
                  double series_interval, double start);

  // A job of tenant t arrived or left for good (Jain's index counts periods when every leaf
  // with jobs in the workload has one pending or running).
  void job_arrived(TenantId t) { active_[tree_.leaf_of(t)]++; }
  void job_done(TenantId t) { active_[tree_.leaf_of(t)]--; }
  // Demand (pending at minimum size, or running) and usage (running) changes. Best-effort
  // jobs earn no entitlement: callers pass their demand, the tracker ignores it.
  void add_demand(const JobSpec& job, const Amounts& a, int sign);
  void add_usage(TenantId t, const Amounts& a, int sign);
  // What a running job holding `a` counts for usage and demand: amounts_of(a), in effective
  // throughput when the tree's fairness.count is throughput (engine/fair_share.h).
  Amounts held(const JobSpec& job, const Allocation& a) const;

  // Integrates everything over [from, to) with the state as it is now.
  void advance(double from, double to);

  // Decayed usage by QueueId (leaves), for Snapshot::decayed_usage; empty if the tree's
  // half-life is 0.
  std::span<const Amounts> decayed_usage() const { return decayed_.view(); }

  double jain_integral() const { return jain_integral_; }
  double jain_time() const { return jain_time_; }
  ShareSeries series() const;

 private:
  void refresh_entitlement();

  const QueueTree& tree_;
  const Cluster& cluster_;
  Amounts capacity_;             // in the tree's fairness unit (fair_capacity)
  std::vector<QueueId> leaves_;  // leaves with jobs in the workload, by id
  std::vector<int32_t> active_;  // by QueueId
  std::vector<Amounts> usage_, demand_, entitled_;
  bool dirty_ = true;
  DecayedUsage decayed_;
  double jain_integral_ = 0, jain_time_ = 0;
  double series_start_ = 0, series_interval_ = 0, series_end_ = 0;
  std::vector<std::vector<double>> gpu_seconds_, entitled_seconds_;  // [leaf index][bucket]
};

}  // namespace tessera
