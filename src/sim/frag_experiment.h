// The capacity experiment of the FGD paper (Weng et al., ATC'23, section 6): pods of an
// Alibaba trace arrive one by one, in a seeded random order, with no departures, until their
// GPU demand reaches `inflate` x the cluster's GPU capacity (the trace is sampled with
// replacement to get there, or thinned at random when it already exceeds it). A pod that
// cannot be placed fails and stays out. After every arrival we record the GPU allocation
// ratio and the fragmentation ratio; the curve gives their means over the arrivals whose
// arrived demand rounds to each whole percent, averaged over seeds.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "engine/frag.h"
#include "model/progress.h"
#include "sim/alibaba_reader.h"

namespace tessera {

struct FragOptions {
  std::string policy = "fgd";
  int seeds = 1;             // seeds first_seed, first_seed + 1, ...
  uint64_t first_seed = 42;  // the paper's
  double inflate = 1.3;      // arrived GPU demand at the end, as a multiple of capacity
  double popularity = 0.95;  // target workload: the shapes covering this share of pods
  ProgressFn progress;       // told after each seed's run (null: never)
};

struct FragPoint {
  int arrived_pct = 0;
  double allocated_pct = 0;   // allocated GPU milli / capacity
  double frag_ratio_pct = 0;  // fragment amount / idle GPU milli
  double frag_pct = 0;        // fragment amount / capacity
};

struct FragRun {
  uint64_t seed = 0;
  std::vector<FragPoint> curve;  // index = arrived percent, 0 .. ceil(100 * inflate)
  size_t pods_arrived = 0, pods_failed = 0;
  double seconds = 0;  // wall time of the arrival loop
};

struct FragResult {
  std::string policy;
  std::vector<uint64_t> seeds;
  int64_t total_gpus = 0;
  size_t target_shapes = 0;
  std::vector<FragPoint> curve;  // mean over runs, index = arrived percent
  std::vector<FragRun> runs;
  // The input files, when the caller names them: --json records them so that a report can
  // draw the published curves of the same pod list.
  std::string nodes, pods;
};

// The arrival sequence of one seed: `pods` thinned or sampled with replacement until their
// GPU demand is the largest not above inflate x capacity_milli, then shuffled.
std::vector<frag::PodSpec> arrival_sequence(const std::vector<frag::PodSpec>& pods,
                                            int64_t capacity_milli, double inflate, Rng& rng);

// One run of one policy and seed. `memo` must have been built on `target`.
FragRun run_frag_once(const std::vector<frag::NodeSpec>& nodes,
                      const std::vector<frag::PodSpec>& pods, frag::FragMemo& memo,
                      const std::string& policy, uint64_t seed, double inflate);

FragResult run_frag(const AlibabaCluster& cluster, const AlibabaPods& pods, const FragOptions& opt);

// {"policy", "seeds", "total_gpus", "target_shapes", "curve": [{"arrived_pct",
// "allocated_pct", "frag_ratio_pct", "frag_pct"}, ...]} with one curve entry per percent from
// 1 to the end.
void write_frag_json(const FragResult& r, std::ostream& out);

}  // namespace tessera
