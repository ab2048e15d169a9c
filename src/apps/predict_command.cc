#include "apps/predict_command.h"
#include "apps/json_file.h"
#include "apps/progress_line.h"

#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <memory>
#include <stdexcept>

#include "insight/runtime_predictor.h"
#include "model/gpu_type.h"
#include "sim/prediction_eval.h"
#include "sim/trace_readers.h"

namespace tessera {

CLI::App* add_predict_command(CLI::App& app, PredictArgs& a) {
  CLI::App* p = app.add_subcommand(
      "predict",
      "Runtime-prediction accuracy: replay a trace in submit order, predict each job from the "
      "jobs finished before it, report relative errors per predictor");
  p->add_option("--workload", a.workload, "workload trace")->required();
  p->add_option("--format", a.format, "pollux|philly|tiresias|alibaba|jsonl (default: guessed)");
  p->add_option("--predictor", a.predictors,
                "predictors to compare (repeatable): mean (the naive per-user, else per-tenant "
                "running mean), quantile, gbt (default: all three)");
  p->add_option("--max-jobs", a.max_jobs, "read at most this many jobs from the trace");
  p->add_option("--skip", a.skip, "score jobs only from this index on (all are learnt from)");
  p->add_option("--json", a.json_out, "write the accuracy table as JSON to this file");
  p->add_flag("--quiet", a.quiet, "do not print the table");
  return p;
}

int run_predict(const PredictArgs& a) {
  std::vector<std::unique_ptr<RuntimePredictor>> owned;
  std::vector<RuntimePredictor*> predictors;
  for (const std::string& name : a.predictors) {
    auto p = make_runtime_predictor(name);
    if (!p) {
      throw std::invalid_argument("--predictor: unknown predictor '" + name +
                                  "' (mean, quantile, gbt)");
    }
    predictors.push_back(p.get());
    owned.push_back(std::move(p));
  }
  const TraceFormat f = trace_format_for(a.workload, a.format);
  const GpuTypeTable types = GpuTypeTable::builtin();
  ReaderOptions ro;
  ro.gpu_types = &types;
  ro.max_jobs = a.max_jobs;
  const Workload w = read_workload(a.workload, f, ro);
  PredictionEvalOptions opt;
  opt.skip = a.skip;
  std::vector<PredictorAccuracy> results;
  {
    ProgressLine progress("predict");
    opt.progress = progress.callback();
    results = evaluate_predictors(w, predictors, opt);
  }
  const size_t scored = results.empty() ? 0 : results.front().jobs;
  if (scored == 0) {
    // An all-zero table reads as perfect accuracy: say why, and fail.
    size_t known = 0;
    for (const JobSpec& j : w.jobs) known += j.work_seconds > 0 ? 1 : 0;
    throw std::runtime_error(fmt::format(
        "no job was scored: {} of the {} jobs read have a known duration{}", known, w.jobs.size(),
        known == 0 ? " (this trace gives none: predict needs philly, tiresias, alibaba or jsonl "
                     "with work)"
                   : fmt::format(", and --skip {} skips them all", a.skip)));
  }

  nlohmann::json out;
  out["workload"] = a.workload;
  out["format"] = std::string(to_string(f));
  out["jobs"] = w.jobs.size();
  out["skip"] = a.skip;
  out["predictors"] = nlohmann::json::array();
  for (const PredictorAccuracy& r : results) out["predictors"].push_back(to_json(r));
  write_json_file(a.json_out, out);
  if (!a.quiet) {
    std::cout << fmt::format("{} ({} jobs, {} scored)\n", a.workload, w.jobs.size(), scored);
    std::cout << fmt::format("{:<10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}\n", "predictor",
                             "median_rel", "p90_rel", "mean_rel", "within_2x", "coverage", "under");
    for (const PredictorAccuracy& r : results) {
      std::cout << fmt::format(
          "{:<10} {:>10.3f} {:>10.3f} {:>10.2f} {:>10.3f} {:>10.3f} {:>10.3f}\n", r.name,
          r.median_rel_error, r.p90_rel_error, r.mean_rel_error, r.within_2x, r.coverage,
          r.under_share);
    }
  }
  return 0;
}

}  // namespace tessera
