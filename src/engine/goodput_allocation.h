// How many GPUs each training job gets in the next round of goodput-aware scheduling
// (docs/goodput.md): the allocation that maximises the sum of the jobs' weighted speedups,
// found greedily, GPU by GPU, over each job's speedup curve.
//
// A job's weight falls with the GPU time it has attained (least-attained-service, as Tiresias
// and Tessera's las: new and short jobs first, without knowing any job's length), so a GPU goes
// to the job whose next GPUs add the most speedup per GPU, weighted by how little it has had.
// A long job therefore takes every GPU its speedup curve makes worth taking while the cluster
// is quiet and gives them back, down to none, when new jobs arrive. Keeping what a job holds is
// preferred by `restart_penalty` (a resize or a start costs a checkpoint and a restart).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace tessera {

struct GoodputDemand {
  // speedup[n]: the job's speedup on n GPUs relative to one (speedup[0] = 0), for n up to the
  // most it may get (speedup.size() - 1). A rigid gang has 0 below its size.
  std::vector<double> speedup;
  // Only the largest size or nothing (a gang that cannot resize).
  bool rigid = false;
  int current = 0;                  // GPUs it holds now
  double attained_gpu_seconds = 0;  // GPU time it has had so far
  double run_seconds = 0;           // how long it has run so far (all its runs)
  // What one GPU would need for the rest of its training (from its progress reports); < 0:
  // unknown.
  double remaining_gpu_seconds = -1;
};

// Which jobs a GPU's speedup counts most for.
enum class GoodputPriority : uint8_t {
  // Least attained service (Tiresias): weight halves as attained GPU time passes levels.
  kLeastAttained,
  // Shortest remaining (SRPT on speedups, Smith's rule): weight 1 / (1 + remaining / scale),
  // so that the speedup counted is the rate at which a job nears its end; jobs that report no
  // progress are weighted by attained service.
  kShortestRemaining,
};

struct GoodputAllocationOptions {
  GoodputPriority priority = GoodputPriority::kShortestRemaining;
  // kLeastAttained: a job's weight is 2^-(level x service_exponent), its level
  // floor(log2(1 + attained / service_scale)). kShortestRemaining: the weight is
  // (1 + remaining / service_scale)^-service_exponent.
  double service_scale = 20000;  // GPU-seconds
  double service_exponent = 1;
  // A job given any GPU count but the one it holds restarts (a waiting job starts), losing
  // `restart_seconds` of progress. That is weighed as the fraction restart_seconds / run_seconds
  // of its speedup (a job is expected to run about as long again as it has run, so a restart
  // costs a young job a larger share of what is left), at most max_restart_penalty.
  double restart_seconds = 30;
  double max_restart_penalty = 0.3;
  // ... and at least this: however long a job has run, a change is also exposed to the next
  // arrivals taking its GPUs again.
  double min_restart_penalty = 0.2;
  // A job is offered at most this many times the GPUs it has reported from (its model is not
  // trusted further out). Pollux uses 2; 4 lets a job whose curve dips where it first spans
  // two nodes reach the larger sizes that pay off (docs/goodput.md).
  double exploration = 4;
};

// Shares of the GPUs by group (the queue tree's, engine/goodput_round.h): job j belongs to the
// groups in groups_of[j] (its leaf queue and the queues above it); each group g is entitled to
// entitled[g] GPUs. The allocation first gives each group at most what it is entitled to, then
// shares out what is left (borrowing) as if there were no groups.
struct GoodputGroups {
  std::vector<std::vector<int>> groups_of;  // by job
  std::vector<int> entitled;                // by group
};

// GPUs per job (by index), summing to at most `gpus`. Deterministic: ties go to the lower index.
std::vector<int> allocate_goodput(std::span<const GoodputDemand> jobs, int gpus,
                                  const GoodputAllocationOptions& o = {},
                                  const GoodputGroups* groups = nullptr);

}  // namespace tessera
