// Runtime-prediction accuracy on a trace: replays the jobs in submit order and asks
// each predictor for every job before it starts, having shown it only the jobs that had
// finished by then. See docs/prediction.md.
#pragma once

#include <cstddef>
#include <map>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "insight/runtime_predictor.h"
#include "model/job.h"
#include "model/progress.h"

namespace tessera {

struct PredictorAccuracy {
  std::string name;
  size_t jobs = 0;  // jobs scored
  // Relative error |predicted - actual| / actual over the scored jobs.
  double median_rel_error = 0, p90_rel_error = 0, mean_rel_error = 0;
  double median_log_ratio = 0;  // median |ln(predicted / actual)|: symmetric in over/under
  double within_2x = 0;         // share of jobs predicted within a factor 2
  double coverage = 0;          // share of jobs whose actual lies in [lower, upper]
  double under_share = 0;       // share predicted shorter than they ran
  std::map<std::string, size_t> sources;  // which level/model answered, and how often
};

struct PredictionEvalOptions {
  // Jobs scored only from this index on (the first ones teach every predictor); all are
  // still observed.
  size_t skip = 0;
  // The submitting user of job i, where the trace has one (empty: none).
  std::vector<std::string> users;
  ProgressFn progress;  // told every 4,096 jobs (null: never)
};

// The actual duration of a job is its work_seconds (the trace's duration); jobs without one
// are skipped. A job counts as finished at submit + duration (the trace gives no queueing
// delay), so a predictor learns from it no earlier than that. Predictors are fed in place
// (they keep what they learnt).
std::vector<PredictorAccuracy> evaluate_predictors(const Workload& w,
                                                   std::span<RuntimePredictor* const> predictors,
                                                   const PredictionEvalOptions& opt = {});

nlohmann::json to_json(const PredictorAccuracy& a);

}  // namespace tessera
