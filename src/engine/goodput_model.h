// Goodput of a data-parallel training job, as Pollux (Qiao et al., OSDI'21) defines it:
// throughput (samples per second) x statistical efficiency (progress per sample relative to
// training with the initial batch size), learnt online from what the running job reports
// (docs/goodput.md).
//
// The scheduler does not know a job's profile: it fits a small performance model to the step
// times the job reported on the placements it ran on, and takes the gradient statistics
// (|g|^2 and the gradient variance, whose ratio is the gradient noise scale) from the job's
// latest report. A job that has never reported is assumed to scale perfectly (speedup =
// replicas), which is what makes the scheduler try it on more GPUs.
#pragma once

#include <map>
#include <tuple>
#include <utility>
#include <vector>

namespace tessera {

// What a job allows of its batch: the global batch it was tuned for (init_batch, where the
// efficiency is 1), the largest global batch it may train with, and the per-GPU (atomic)
// batch range that fits a GPU's memory. fixed_batch > 0: the job trains with that global batch
// only (no adaptation; e.g. a job whose batch is already at its maximum).
struct BatchLimits {
  int init_batch = 0;
  int max_batch = 0;
  int min_local = 1;
  int max_local = 0;
  int fixed_batch = 0;
};

// How a global batch is split: per-GPU micro-batch and extra accumulation steps per
// synchronisation, over `replicas` GPUs.
struct BatchSplit {
  int atomic_bsz = 0;
  int accum_steps = 0;
  long long batch(int replicas) const {
    return static_cast<long long>(replicas) * atomic_bsz * (accum_steps + 1);
  }
};

// The splits worth trying on `replicas` GPUs: Pollux's 50 global batches spaced geometrically
// from max(init_batch, min_local x replicas) to max_batch, each split with as little
// accumulation as max_local allows (a single GPU above init_batch accumulates at least once,
// so that the gradient statistics stay estimable). Empty when no split fits.
std::vector<BatchSplit> candidate_splits(const BatchLimits& l, int replicas);

// The split a fixed global batch gets (Pollux's Job.update_local_bsz).
BatchSplit fixed_split(const BatchLimits& l, int batch, int replicas);

// One step-time report from a running job: on `nodes` nodes with `replicas` GPUs and per-GPU
// batch `atomic_bsz`, a synchronised step took `step_time` seconds, of which `sync_time` was
// gradient synchronisation (not repeated by accumulation micro-steps).
struct StepReport {
  int nodes = 1;
  int replicas = 1;
  int atomic_bsz = 1;
  double step_time = 0;
  double sync_time = 0;
};

// Gradient statistics a job reports: squared norm of the true gradient and the variance of
// its estimate per sample at the initial batch (Pollux's grad_sqr, grad_var).
struct GradientStats {
  double sqr = 0;
  double var = 0;
};

struct GoodputChoice {
  double goodput = 0;  // samples per second x efficiency (init-batch-equivalent samples/s)
  BatchSplit split;
};

class GoodputModel {
 public:
  explicit GoodputModel(BatchLimits limits);

  // Records a step-time report and refits the performance model. Reports for a configuration
  // already seen keep the first (steady-state) value.
  void report(const StepReport& r);
  void report(const GradientStats& g) { grad_ = g, has_grad_ = true; }
  // Training progress, in iterations at the initial batch size (what one step with
  // init_batch achieves): how far it is and how far it trains in all.
  void report_progress(double done, double total);

  // Seconds one GPU would need for the rest of its training at the goodput it would have there
  // now; < 0 when unknown (no progress or no step-time report yet).
  double remaining_gpu_seconds() const;

  bool profiled() const { return !obs_.empty() && has_grad_; }
  // The most GPUs the job has reported from (0: none).
  int max_profiled_replicas() const { return max_replicas_; }
  const BatchLimits& limits() const { return limits_; }

  // Statistical efficiency of training with global batch `batch` (1 at init_batch).
  double efficiency(double batch) const;
  // Predicted seconds per synchronised step of the whole batch.
  double iteration_time(int nodes, int replicas, const BatchSplit& s) const;
  // The split with the highest predicted goodput on `replicas` GPUs over `nodes` nodes
  // (goodput 0 when none fits).
  GoodputChoice best(int nodes, int replicas) const;
  // best(nodes, replicas) relative to best(1, 1); `replicas` for a job that has not reported.
  double speedup(int nodes, int replicas) const;
  // speedup() for 0..max_replicas GPUs packed on nodes of `gpus_per_node` (element n: n GPUs on
  // ceil(n / gpus_per_node) nodes; element 0 is 0), computing best(1, 1) once.
  std::vector<double> speedup_curve(int max_replicas, int gpus_per_node) const;

  // The fitted parameters (seconds): compute = alpha_c + beta_c x atomic batch; network =
  // alpha + beta x max(0, replicas - 2), inter-node (n) or within a node (r); alpha_1 on one
  // GPU.
  struct Params {
    double alpha_c = 0, beta_c = 0, alpha_n = 0, beta_n = 0, alpha_r = 0, beta_r = 0;
    double alpha_1 = 0;
  };
  const Params& params() const { return p_; }

 private:
  void fit();

  BatchLimits limits_;
  // (nodes, replicas, atomic_bsz) -> (step_time, sync_time)
  std::map<std::tuple<int, int, int>, std::pair<double, double>> obs_;
  GradientStats grad_;
  bool has_grad_ = false;
  double done_ = 0, total_ = -1;
  int max_replicas_ = 0;
  Params p_;
};

}  // namespace tessera
