#include "apps/classify_command.h"

#include <fmt/format.h>

#include <cmath>
#include <iostream>
#include <memory>
#include <stdexcept>

#include "apps/json_file.h"
#include "apps/progress_line.h"
#include "apps/provenance.h"
#include "insight/workload_classifier.h"
#include "sim/classification_eval.h"

namespace tessera {

CLI::App* add_classify_command(CLI::App& app, ClassifyArgs& a) {
  CLI::App* c = app.add_subcommand(
      "classify",
      "Workload-classification accuracy: replay an Alibaba GPU pod list in creation order, "
      "predict each pod's QoS (LS / BE) and duration class from the pods deleted before it");
  c->add_option("--trace", a.trace, "Alibaba pod list with qos, creation_time, deletion_time")
      ->required();
  c->add_option("--classifier", a.classifiers,
                "classifiers to compare (repeatable): logistic, majority, threshold (default: "
                "all three)");
  c->add_option("--max-jobs", a.max_jobs, "read at most this many pods");
  c->add_option("--skip", a.skip, "score pods only from this index on (all are learnt from)");
  c->add_option("--json", a.json_out, "write the scores as JSON to this file");
  c->add_flag("--quiet", a.quiet, "do not print the tables");
  return c;
}

namespace {

std::string pct(double v) {
  return std::isnan(v) ? "-" : fmt::format("{:.1f}", 100 * v);
}

}  // namespace

int run_classify(const ClassifyArgs& a) {
  std::vector<std::unique_ptr<WorkloadClassifier>> owned;
  std::vector<WorkloadClassifier*> classifiers;
  for (const std::string& name : a.classifiers) {
    auto c = make_workload_classifier(name);
    if (!c) {
      throw std::invalid_argument("--classifier: unknown classifier '" + name +
                                  "' (logistic, majority, threshold)");
    }
    classifiers.push_back(c.get());
    owned.push_back(std::move(c));
  }
  std::map<std::string, size_t> raw;
  const std::vector<LabelledJob> jobs = read_alibaba_labelled(a.trace, a.max_jobs, &raw);
  if (a.skip >= jobs.size()) {
    throw std::invalid_argument(
        fmt::format("--skip {}: the trace has only {} pods", a.skip, jobs.size()));
  }
  ClassificationEvalOptions opt;
  opt.classes = alibaba_qos_classes();
  opt.skip = a.skip;
  std::vector<ClassifierScore> scores;
  {
    ProgressLine progress("classify");
    opt.progress = progress.callback();
    scores = evaluate_classifiers(jobs, classifiers, opt);
  }

  nlohmann::ordered_json out;
  out["command"] = "classify";
  out["tessera"] = build_identity();
  out["trace"] = file_identity(a.trace);
  out["max_jobs"] = a.max_jobs;
  out["skip"] = a.skip;
  out["pods"] = jobs.size();
  out["qos"] = raw;
  out["label_mapping"] = {{"LS", "LS"}, {"Guaranteed", "LS"}, {"BE", "BE"}, {"Burstable", "BE"}};
  out["classifiers"] = nlohmann::ordered_json::array();
  for (const ClassifierScore& s : scores) out["classifiers"].push_back(to_json(s));
  write_json_file(a.json_out, out);
  if (a.quiet) return 0;
  std::cout << fmt::format("{} ({} pods, {} scored)\n", a.trace, jobs.size(),
                           scores.empty() ? 0 : scores.front().jobs);
  std::cout << fmt::format("{:<10} {:>8} {:>9} {:>9} {:>9} {:>9} {:>9}\n", "classifier", "accuracy",
                           "LS_recall", "LS_prec", "BE_recall", "BE_prec", "duration");
  for (const ClassifierScore& s : scores) {
    std::cout << fmt::format("{:<10} {:>8} {:>9} {:>9} {:>9} {:>9} {:>9}\n", s.name,
                             pct(s.accuracy), pct(s.recall[0]), pct(s.precision[0]),
                             pct(s.recall[1]), pct(s.precision[1]), pct(s.duration_accuracy));
  }
  std::cout << "confusion (rows: actual LS, BE; columns: predicted LS, BE)\n";
  for (const ClassifierScore& s : scores) {
    std::cout << fmt::format("{:<10} LS [{:>5} {:>5}]  BE [{:>5} {:>5}]\n", s.name,
                             s.confusion[0][0], s.confusion[0][1], s.confusion[1][0],
                             s.confusion[1][1]);
  }
  return 0;
}

}  // namespace tessera
