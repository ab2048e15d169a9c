#include "sim/prediction_eval.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <queue>
#include <stdexcept>
#include <utility>

namespace tessera {

namespace {

double quantile(std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

struct Scores {
  std::vector<double> rel, log_ratio;
  size_t within_2x = 0, covered = 0, under = 0;
  std::map<std::string, size_t> sources;
};

}  // namespace

std::vector<PredictorAccuracy> evaluate_predictors(const Workload& w,
                                                   std::span<RuntimePredictor* const> predictors,
                                                   const PredictionEvalOptions& opt) {
  if (!opt.users.empty() && opt.users.size() != w.jobs.size()) {
    throw std::invalid_argument("evaluate_predictors: users must name one user per job");
  }
  FeatureEncoder enc;
  std::vector<JobFeatures> features(w.jobs.size());
  std::vector<Scores> scores(predictors.size());
  // Jobs running (per the trace), by finish time then index: a min-heap.
  using Finish = std::pair<double, size_t>;
  std::priority_queue<Finish, std::vector<Finish>, std::greater<>> running;
  for (size_t j = 0; j < w.jobs.size(); ++j) {
    const JobSpec& s = w.jobs[j];
    if (opt.progress && j % 4096 == 0) {
      opt.progress(Progress{static_cast<double>(j), static_cast<double>(w.jobs.size()), "jobs"});
    }
    if (j > 0 && s.submit_time < w.jobs[j - 1].submit_time) {
      throw std::invalid_argument("evaluate_predictors: workload is not sorted by submit time");
    }
    // Learn from everything that had finished by this submission, and nothing else.
    while (!running.empty() && running.top().first <= s.submit_time) {
      const size_t done = running.top().second;
      running.pop();
      for (RuntimePredictor* p : predictors) p->observe(features[done], w.jobs[done].work_seconds);
    }
    features[j] = enc.encode(s, opt.users.empty() ? std::string_view{} : opt.users[j]);
    const double actual = s.work_seconds;
    if (!(actual > 0)) continue;
    for (size_t k = 0; k < predictors.size(); ++k) {
      const Prediction p = predictors[k]->predict(features[j]);
      if (j < opt.skip) continue;
      Scores& sc = scores[k];
      const double pred = std::max(p.point, 0.0);
      sc.rel.push_back(std::abs(pred - actual) / actual);
      const double ratio = std::max(pred, 1e-9) / actual;
      sc.log_ratio.push_back(std::abs(std::log(ratio)));
      if (ratio >= 0.5 && ratio <= 2.0) ++sc.within_2x;
      if (p.lower >= 0 && p.upper >= 0 && actual >= p.lower && actual <= p.upper) ++sc.covered;
      if (pred < actual) ++sc.under;
      ++sc.sources[std::string(p.source)];
    }
    running.emplace(s.submit_time + actual, j);
  }
  std::vector<PredictorAccuracy> out;
  for (size_t k = 0; k < predictors.size(); ++k) {
    Scores& sc = scores[k];
    PredictorAccuracy a;
    a.name = std::string(predictors[k]->name());
    a.jobs = sc.rel.size();
    if (a.jobs > 0) {
      const double n = static_cast<double>(a.jobs);
      double sum = 0;
      for (double r : sc.rel) sum += r;
      a.mean_rel_error = sum / n;
      a.median_rel_error = quantile(sc.rel, 0.5);
      a.p90_rel_error = quantile(sc.rel, 0.9);
      a.median_log_ratio = quantile(sc.log_ratio, 0.5);
      a.within_2x = static_cast<double>(sc.within_2x) / n;
      a.coverage = static_cast<double>(sc.covered) / n;
      a.under_share = static_cast<double>(sc.under) / n;
    }
    a.sources = std::move(sc.sources);
    out.push_back(std::move(a));
  }
  return out;
}

nlohmann::json to_json(const PredictorAccuracy& a) {
  nlohmann::json j;
  j["predictor"] = a.name;
  j["jobs"] = a.jobs;
  j["median_rel_error"] = a.median_rel_error;
  j["p90_rel_error"] = a.p90_rel_error;
  j["mean_rel_error"] = a.mean_rel_error;
  j["median_abs_log_ratio"] = a.median_log_ratio;
  j["within_2x"] = a.within_2x;
  j["interval_coverage"] = a.coverage;
  j["under_estimated"] = a.under_share;
  j["sources"] = a.sources;
  return j;
}

}  // namespace tessera
