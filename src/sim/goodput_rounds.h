// Goodput-aware elastic scheduling in the simulator (`--policy goodput`;
// docs/goodput.md), as Pollux (OSDI'21) does it: every round each training job's GPU count is
// chosen from its goodput (throughput x statistical efficiency, learnt from what the job
// reports), and each job picks its batch size for the GPUs it gets.
//
// Two sides are kept apart. The truth (AdaptiveTraining) is Pollux's measured application
// profile: how fast a job really progresses on a placement, choosing at every epoch the batch
// with the best goodput there. The scheduler (engine/goodput_model.h) only sees the reports of
// running jobs: the step time of the placements they ran on and their current gradient
// statistics.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "engine/goodput_allocation.h"
#include "engine/goodput_model.h"
#include "model/cluster.h"
#include "model/ids.h"
#include "model/job.h"
#include "sim/execution_model.h"
#include "sim/pollux_profile.h"

namespace tessera {

// Where an adaptive job's training stands (Pollux's units, as PolluxApplication's).
struct TrainingProgress {
  double progress = 0;
  int epoch = 0;
};

// How an application trains on a placement (replicas per node, ascending) when it takes, at
// every epoch, the batch split with the best true goodput there (AdaptDL re-tunes its batch
// between epochs). Per placement the rate of every epoch is computed once.
class AdaptiveTraining {
 public:
  AdaptiveTraining(const PolluxApplication& app, BatchLimits limits);
  const PolluxApplication& app() const { return app_; }
  const BatchLimits& limits() const { return limits_; }

  // Seconds to finish from `at` on `placement` (0 when done).
  double seconds_left(const std::vector<int>& placement, const TrainingProgress& at);
  // Trains `seconds` on `placement` from `at`.
  void advance(const std::vector<int>& placement, TrainingProgress& at, double seconds);
  // The split it trains with on `placement` during epoch `epoch`.
  BatchSplit split(const std::vector<int>& placement, int epoch);

 private:
  struct Table {
    std::vector<BatchSplit> split;  // by epoch
    std::vector<double> rate;       // progress per second, by epoch
    std::vector<double> tail;       // seconds to train the epochs after e, by epoch
  };
  const Table& table(const std::vector<int>& placement);

  const PolluxApplication& app_;
  BatchLimits limits_;
  std::map<std::vector<int>, Table> tables_;
};

struct GoodputCandidate {
  JobId id = 0;
  int current = 0;      // GPUs it holds now (0: waiting)
  double attained = 0;  // GPU-seconds so far
  double ran = 0;       // seconds it has run so far
};

class GoodputPlanner {
 public:
  // Jobs of `w` whose model is an application with a profile in `profiles` are adaptive;
  // the others are rigid gangs of their full size.
  GoodputPlanner(const PolluxProfiles& profiles, const Workload& w, const Cluster& c,
                 GoodputAllocationOptions o);

  bool adaptive(JobId j) const { return jobs_[j].has_value(); }
  // Seconds (at speed 1) the adaptive job j needs to finish on `shape` from where it stands.
  double seconds_left(JobId j, const PlacementShape& shape);
  // Job j trained `seconds` on `shape`: its progress moves on, and it reports its step time
  // and gradient statistics there.
  void trained(JobId j, const PlacementShape& shape, double seconds);
  // Job j has trained `seconds` on `shape` since its progress was last moved on and is still
  // running: it reports as trained() would, without moving its progress.
  void report(JobId j, const PlacementShape& shape, double seconds);

  // GPUs each candidate gets in the next round (by index), from each job's speedup curve as
  // the scheduler knows it (packed on nodes of `gpus_per_node`), for `gpus` GPUs in all.
  std::vector<int> plan(std::span<const GoodputCandidate> jobs, int gpus, int gpus_per_node);
  // Job j's speedup on `replicas` GPUs over `nodes` nodes as the scheduler knows it (its
  // model once it has reported, else `replicas`).
  double speedup(JobId j, int nodes, int replicas) const;
  // The most GPUs job j may be given now (GoodputAllocationOptions::exploration times the most
  // it has reported from, at least one; rigid gangs: their size).
  int max_gpus(JobId j) const;

 private:
  struct Adaptive {
    AdaptiveTraining* training = nullptr;
    TrainingProgress at;
    GoodputModel model;
    int limit = 1;  // the most GPUs it can use at all
  };
  std::vector<int> replicas_of(const PlacementShape& shape) const;
  double type_factor(const PlacementShape& shape) const;
  void send_report(Adaptive& a, const std::vector<int>& placement, const TrainingProgress& at);
  // Job j trained `seconds` on `shape`: it reports from where that leaves it, and with `commit`
  // its progress moves there.
  void move_on(JobId j, const PlacementShape& shape, double seconds, bool commit);

  const Workload& w_;
  const Cluster& c_;
  GoodputAllocationOptions opt_;
  std::vector<std::unique_ptr<AdaptiveTraining>> trainings_;
  std::vector<std::optional<Adaptive>> jobs_;  // by JobId; empty for rigid jobs
};

}  // namespace tessera
