// The discrete-event simulator: replays a workload on a cluster through the engine.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "engine/decisions.h"
#include "engine/policy.h"
#include "model/cluster.h"
#include "model/job.h"
#include "model/queue_tree.h"
#include "sim/execution_model.h"
#include "sim/fairness_tracker.h"

namespace tessera {

struct SimOptions {
  // Orders whose ranking changes with time (las) are re-evaluated this often while work waits.
  double tick_seconds = 60;
  std::ostream* events = nullptr;  // JSON-lines event log, or none
  // The queue tree, bound to the workload's tenants; null: one equal queue per tenant.
  const QueueTree* queues = nullptr;
  // A preempted job is asked to checkpoint: it stops at once, but its GPUs reach the job that
  // preempted it only after this long (that job starts then), and it waits again only after
  // its checkpoint is written. Jobs that checkpoint on request (checkpoint_interval 0) lose
  // nothing; others lose the work since their last periodic checkpoint.
  double checkpoint_grace = 30;
  // Buckets of the share-vs-entitlement time series; <= 0: none.
  double series_interval = 3600;
  // Jobs whose history (submit, each change of pending reason, start, preemption, finish) is
  // recorded in SimResult::histories: the "why is my job pending" of a replay.
  std::vector<JobId> explain;
};

struct HistoryEntry {
  double t = 0;
  std::string what;
};
struct JobHistory {
  JobId job = 0;
  std::vector<HistoryEntry> entries;
};

struct JobOutcome {
  double submit = 0;
  double first_start = -1;
  double finish = -1;
  int32_t preemptions = 0;
  double gpu_seconds = 0;            // allocated GPU time (whole-GPU equivalents x seconds)
  double effective_gpu_seconds = 0;  // allocated time weighted by the progress rate achieved
  double lost_work_seconds = 0;      // reference-seconds of work lost to preemption
  double lost_gpu_seconds = 0;       // GPU-seconds of allocated time whose work was lost
  bool has_first_reason = false;
  PendingCode first_reason = PendingCode::kInsufficientGpus;
};

struct TenantSeries {
  double gpu_seconds = 0;  // allocated GPU-seconds over the run
};

struct SimResult {
  std::vector<JobOutcome> jobs;  // by JobId (Workload::jobs order)
  std::vector<TenantSeries> tenants;
  double first_submit = 0;
  double last_finish = 0;
  double allocated_gpu_seconds = 0;
  double effective_gpu_seconds = 0;
  // Jain's index over leaf queues of received/entitled share, integrated over the time every
  // queue with jobs had demand, and that time.
  double jain_integral = 0;
  double jain_time = 0;
  ShareSeries series;
  std::vector<JobHistory> histories;  // one per SimOptions::explain job, in that order
  uint64_t cycles = 0;
  uint64_t events = 0;
  uint64_t preemptions = 0;
};

// Runs every job of `w` to completion. Jobs must have passed admission (infeasible_reason);
// throws std::invalid_argument naming the first job that did not.
SimResult simulate(const Workload& w, const Cluster& c, const Policy& policy,
                   const ExecutionModel& model, const SimOptions& opt);

}  // namespace tessera
