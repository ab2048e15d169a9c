// Runtime (duration) prediction from what a scheduler legitimately knows when a job is
// submitted: who submitted it, what it is called, what it asks for, when. Never from what the
// job will do (its work, its trace duration). Predictors learn online: observe() each job as
// it finishes, predict() each job as it arrives. See docs/prediction.md.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "model/gpu_type.h"
#include "model/ids.h"
#include "model/interner.h"
#include "model/job.h"

namespace tessera {

// The scheduler-side features of a job. Categorical ids are interned by the caller (see
// FeatureEncoder); kNoId means "not known".
struct JobFeatures {
  uint32_t tenant = kNoId;
  uint32_t user = kNoId;
  uint32_t name = kNoId;  // the job name's class (name_class()), interned
  uint32_t model = kNoId;
  double gpus = 0;  // GPUs of the whole gang at its minimum size (fractions for shares)
  int32_t members = 1;
  int32_t gpu_milli = 1000;  // share of each GPU a member asks for
  int64_t cpu_milli = 0;     // per member
  int64_t mem_mib = 0;       // per member
  GpuTypeMask gpu_types = kAnyGpuType;
  PriorityClass priority = PriorityClass::kResearch;
  double requested_seconds = kUnknown;  // a time limit the user gave, if any
  double submit_time = 0;               // seconds (the hour of day and weekday come from it)
};

struct Prediction {
  double point = kUnknown;  // predicted duration, seconds
  double lower = kUnknown;  // a low / high quantile (p10 / p90 by default): the uncertainty
  double upper = kUnknown;
  std::string_view source = "none";  // which model or fallback level answered
  uint32_t support = 0;              // observations behind the answer
};

class RuntimePredictor {
 public:
  virtual ~RuntimePredictor() = default;
  virtual std::string_view name() const = 0;
  virtual Prediction predict(const JobFeatures& f) const = 0;
  // A finished job and how long it ran (seconds > 0).
  virtual void observe(const JobFeatures& f, double actual_seconds) = 0;
};

// The job name with run-specific parts dropped, so that resubmissions share a class: the
// prefix up to the last token (separated by - _ . / : space #) that has no digit
// ("train-bert-0042" -> "train-bert", "philly-17" -> "philly", "sweep_lr0.1_7" -> "sweep",
// "bert-v2-large-3" -> "bert-v2-large"). A name with no digit-free token gives "".
std::string name_class(std::string_view name);

// Turns JobSpecs into JobFeatures, interning name classes (and users) as it goes.
class FeatureEncoder {
 public:
  // `user` is the submitting user's name where the trace has one ("" otherwise).
  JobFeatures encode(const JobSpec& s, std::string_view user = {});

 private:
  Interner names_, users_;
};

// (a) Per-group quantiles with hierarchical fallback: the answer comes from the most specific
// group with at least `min_support` observations, along
//   user+name -> user+shape -> user -> tenant+name+shape -> tenant+name -> tenant+shape
//   -> tenant+gpus -> tenant -> shape -> gpus -> global -> prior
// where "shape" is the full resource request (gang size, GPU share, CPU, memory, GPU types,
// priority class, model class). Levels whose key is unknown (no user, no name class) are skipped.
// Each group keeps its last `history` durations; the point is their `quantile`, the spread their
// `lower_q` and `upper_q` quantiles. A requested time limit, when given, caps the point.
struct QuantilePredictorOptions {
  size_t history = 32;
  uint32_t min_support = 2;
  double quantile = 0.5;
  double lower_q = 0.1, upper_q = 0.9;
  double prior_seconds = 3600;  // before anything has finished
};
std::unique_ptr<RuntimePredictor> make_quantile_predictor(QuantilePredictorOptions o = {});

// (b) Gradient-boosted regression trees (insight/gbt.h, least-absolute-deviation loss) on
// log-duration, as a correction to (a): the target is log(actual) - log(quantile answer).
// Features: the quantile answer itself; the request (log GPUs, members, GPU share, log CPU,
// log memory, GPU-type mask, priority class, model class id, requested time); the hour of day
// of submission (of the trace's clock); and history encodings of the categorical features:
// the log-median duration of the job's group at every level of (a)'s hierarchy, the support
// and index of its most specific non-empty level and the latest duration there (target
// encoding computed online, so only finished jobs count). Rows are kept as predict() saw them
// at submission. Refitted from the last `max_samples` observations after `first_fit`
// observations, then each time they double, then every `retrain_every`; until the first fit
// it answers as (a). Uncertainty: the p10/p90 of its recent out-of-sample log residuals.
struct GbtPredictorOptions {
  size_t first_fit = 200;
  size_t retrain_every = 2000;
  size_t max_samples = 12000;
  int trees = 60;
  int max_depth = 3;
  double learning_rate = 0.1;
  size_t min_leaf = 50;
  QuantilePredictorOptions history;  // the group statistics it encodes (and falls back to)
};
std::unique_ptr<RuntimePredictor> make_gbt_predictor(GbtPredictorOptions o = {});

// The naive baseline: the running mean duration of the job's user, else of its tenant (a
// Philly virtual cluster), else of every job; the prior before anything finished.
std::unique_ptr<RuntimePredictor> make_mean_predictor(double prior_seconds = 3600);

// "mean", "quantile" or "gbt"; nullptr for anything else.
std::unique_ptr<RuntimePredictor> make_runtime_predictor(std::string_view name);
std::vector<std::string> runtime_predictor_names();

}  // namespace tessera
