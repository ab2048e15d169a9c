// Pollux's measured application profiles (OSDI'21 artifact, petuum/adaptdl simulator/traces),
// turned into work and placement speed for jobs with a FIXED global batch size (the
// Tiresias-style jobs of Pollux's workloads). docs/execution-model.md gives the formulas.
//
// Per application `<dir>/placements.csv` holds measured (step_time, sync_time) per placement
// string ("24" = one node with 2 replicas and one with 4) and per-replica batch size;
// `scalability.csv` holds the same for 6-16 nodes by (num_nodes, num_replicas) only;
// `validation-<batch>.csv` holds, per epoch, the training progress reached and the gradient
// statistics (grad_sqr, grad_var) that set the statistical efficiency of a batch size.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tessera {

struct PolluxStepTime {
  double step_time = 0;  // seconds per optimizer step with no gradient accumulation
  double sync_time = 0;  // of which gradient synchronisation (not repeated by accumulation)
};

// How a fixed global batch is split over the replicas (Pollux's Job.update_local_bsz).
struct PolluxBatchConfig {
  int atomic_bsz = 0;   // samples per replica per micro-step
  int accum_steps = 0;  // extra micro-steps accumulated before each synchronisation
  int replicas = 0;
  // The batch actually trained with: replicas * atomic_bsz * (accum_steps + 1).
  long long effective_batch() const {
    return static_cast<long long>(replicas) * atomic_bsz * (accum_steps + 1);
  }
};

class PolluxApplication {
 public:
  // Loads the profile in `dir`. `max_epochs` is Pollux's per-application training length;
  // `max_local_bsz` <= 0 means "the largest local batch of placements.csv". Throws InputError
  // naming the file and line on malformed input or a missing file.
  static PolluxApplication load(const std::string& dir, const std::string& name, int max_epochs,
                                int max_local_bsz = 0);

  const std::string& name() const { return name_; }
  int init_batch_size() const { return init_batch_size_; }  // smallest validated batch
  int max_batch_size() const { return max_batch_size_; }    // largest validated batch
  int min_local_bsz() const { return min_local_bsz_; }
  int max_local_bsz() const { return max_local_bsz_; }
  int max_epochs() const { return max_epochs_; }

  // Step and sync time with `replicas_per_node` (zeros ignored, any order) at per-replica
  // batch `local_bsz`: the measured row of placements.csv when the placement is in it,
  // otherwise interpolated (see interpolate()).
  PolluxStepTime throughput(const std::vector<int>& replicas_per_node, double local_bsz) const;
  // Whether placements.csv measured this placement (after Pollux's rotation normalisation).
  bool measured(const std::vector<int>& replicas_per_node) const;
  // The interpolation over (num_nodes, num_replicas, local_bsz) used for placements that
  // placements.csv lacks; public so tests can compare it with measured rows.
  PolluxStepTime interpolate(int num_nodes, int num_replicas, double local_bsz) const;

  PolluxBatchConfig batch_config(int batch_size, int replicas) const;
  // Seconds per iteration (one synchronised step of the whole batch) on a placement.
  double iteration_time(const std::vector<int>& replicas_per_node,
                        const PolluxBatchConfig& cfg) const;
  // Iterations to train max_epochs with this batch configuration, statistical efficiency
  // included.
  double total_iterations(const PolluxBatchConfig& cfg) const;
  // Seconds to train to completion on `replicas_per_node` with global batch `batch_size`
  // (the batch of the job; the replica count is the placement's).
  double work_seconds(const std::vector<int>& replicas_per_node, int batch_size) const;

  // Training progress (Pollux's units: iterations at the initial batch size) reached at the end
  // of epoch `epoch` (0 at epoch 0); the job is done at progress_at_epoch(max_epochs()).
  double progress_at_epoch(int epoch) const;
  // Gradient statistics during epoch `epoch` (0-based) when training with global `batch_size`
  // (linear between the validated batches, clamped at the ends): (grad_sqr, grad_var).
  std::pair<double, double> grad_stats(double batch_size, int epoch) const;
  // Progress per iteration with global `batch_size` during epoch `epoch`, relative to an
  // iteration at the initial batch size (Pollux's gain).
  double gain(double batch_size, int epoch) const;

 private:
  struct Curve {  // step/sync time against local_bsz, sorted by local_bsz
    std::vector<double> bsz, step, sync;
    PolluxStepTime at(double local_bsz) const;
  };
  struct Validation {
    int batch_size = 0;
    std::vector<double> progress, grad_sqr, grad_var;  // per epoch
  };

  PolluxStepTime at_node_count(int num_nodes, int num_replicas, double local_bsz) const;

  std::string name_;
  int init_batch_size_ = 0, max_batch_size_ = 0, min_local_bsz_ = 0, max_local_bsz_ = 0;
  int max_epochs_ = 0;
  std::map<std::string, Curve> placements_;  // canonical placement string -> curve
  // (num_nodes -> (num_replicas -> curve)): placements.csv grouped and averaged plus
  // scalability.csv.
  std::map<int, std::map<int, Curve>> groups_;
  std::vector<Validation> validation_;  // sorted by batch_size
};

// The six applications of Pollux's artifact, each loaded when its folder exists.
class PolluxProfiles {
 public:
  // `applications_dir` is <data>/philly/pollux/applications. Applications whose folder is
  // missing are left out; a malformed file throws InputError.
  static PolluxProfiles load(const std::string& applications_dir);
  const PolluxApplication* find(std::string_view name) const;
  bool empty() const { return apps_.empty(); }

 private:
  std::vector<std::shared_ptr<const PolluxApplication>> apps_;
};

// Pollux's canonical form of a placement: zeros dropped, the lexicographically smallest
// rotation (applications.py get_throughput).
std::vector<int> canonical_placement(const std::vector<int>& replicas_per_node);

}  // namespace tessera
