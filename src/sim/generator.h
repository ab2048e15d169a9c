// A synthetic workload generator: the embedded default workload of `tessera simulate` and a
// source of small examples (the project ships no trace data).
//
// Output is a pure function of the options: random numbers come from std::mt19937_64 (whose
// sequence the standard fixes) turned into uniforms from its 53 high bits and then into each
// distribution by our own inverse-CDF code, never std::*_distribution (whose output differs
// between standard libraries). Times are rounded to whole seconds, which also absorbs any
// last-bit differences between math libraries' log/exp.
#pragma once

#include <array>
#include <cstdint>

#include "model/job.h"
#include "sim/trace_readers.h"  // write_jsonl saves a generated workload

namespace tessera {

struct GeneratorOptions {
  uint64_t seed = 1;
  int jobs = 400;
  int tenants = 4;  // named tenant-0 .. tenant-(n-1), chosen uniformly per job
  // Mean of the exponential gaps between submissions; the first job is submitted at 0. The
  // default offers a load of about 1.0 on 64 GPUs with the defaults below: mean gang 3.1 GPUs x
  // mean clipped duration 5,195 s / 250 s / 64 GPUs = 1.006 (docs/traces.md).
  double mean_interarrival_s = 250;
  // Relative weights of gangs of 1, 2, 4, 8 and 16 GPUs (members of one whole GPU each).
  std::array<double, 5> gang_weights = {0.5, 0.2, 0.15, 0.1, 0.05};
  // Work (seconds on the reference placement) is log-normal with this median and log-space
  // standard deviation, rounded to seconds and clipped to [min, max]; duration_estimate = work.
  double duration_median_s = 1800;
  double duration_sigma = 1.5;
  double min_duration_s = 60;
  double max_duration_s = 24 * 3600;
  // Percent of single-GPU jobs that ask for a share of one GPU (250, 500 or 750 milli-GPU).
  int fraction_share_pct = 0;
  // When set, every job is one of Pollux's six applications with its usual batch size, and
  // its work is left unknown for the execution model to derive (as for Pollux traces).
  bool pollux_models = false;
  double restart_cost_s = 30;  // Pollux's re-scale delay
};

// Throws std::invalid_argument on nonsensical options (no jobs, negative times, all-zero
// weights, ...).
Workload generate_workload(const GeneratorOptions& opt);

}  // namespace tessera
