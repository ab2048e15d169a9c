#include "sim/classification_eval.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <numeric>

#include "model/csv.h"
#include "model/input_error.h"

namespace tessera {

namespace {

constexpr int64_t kMaxValue = int64_t{1} << 52;

}  // namespace

std::vector<LabelledJob> parse_alibaba_labelled(std::string_view text, const std::string& origin,
                                                size_t max_jobs,
                                                std::map<std::string, size_t>* raw_labels) {
  csv::LineReader lines(text);
  std::string_view head;
  while (lines.next(head) && csv::is_blank(head)) {
  }
  if (csv::is_blank(head)) throw InputError(input_error_message(origin, 0, "", "empty file"));
  const csv::Header h(
      head, {"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"},
      {"gpu_spec", "qos", "pod_phase", "creation_time", "deletion_time", "scheduled_time"}, origin,
      lines.line_number(), "Alibaba pod list");
  for (const char* need : {"qos", "creation_time", "deletion_time"}) {
    if (h.index(need) < 0) {
      throw InputError(input_error_message(
          origin, lines.line_number(), need,
          "classification needs the qos, creation_time and deletion_time columns (the "
          "multigpu pod lists lack them)"));
    }
  }
  const int c_name = h.index("name"), c_cpu = h.index("cpu_milli"), c_mem = h.index("memory_mib"),
            c_gpu = h.index("num_gpu"), c_milli = h.index("gpu_milli"),
            c_spec = h.index("gpu_spec"), c_qos = h.index("qos"),
            c_create = h.index("creation_time"), c_delete = h.index("deletion_time");
  csv::Row row(origin, h);
  std::vector<LabelledJob> out;
  std::string_view line;
  while ((max_jobs == 0 || out.size() < max_jobs) && lines.next(line)) {
    if (csv::is_blank(line)) continue;
    row.reset(line, lines.line_number());
    LabelledJob j;
    if (row.empty(c_name)) row.fail(c_name, "must not be empty");
    j.features.name = std::string(row.str(c_name));
    j.features.cpu_milli = row.integer(c_cpu, 0, kMaxValue);
    j.features.mem_mib = row.integer(c_mem, 0, kMaxValue);
    j.features.gpus = static_cast<int32_t>(row.integer(c_gpu, 0, 1024));
    const int64_t milli = row.integer(c_milli, 0, kMilliPerGpu);
    if (j.features.gpus > 0 && milli == 0) {
      row.fail(c_milli, "a pod with GPUs needs gpu_milli in [1, 1000]");
    }
    j.features.gpu_milli = j.features.gpus == 0 ? kMilliPerGpu : static_cast<int32_t>(milli);
    if (!row.empty(c_spec)) {
      // Distinct '|'-separated names ("V100M16|V100M32|V100M32" restricts to two types).
      std::vector<std::string_view> names;
      std::string_view spec = row.str(c_spec);
      while (true) {
        const size_t bar = spec.find('|');
        const std::string_view one = csv::trim(spec.substr(0, bar));
        if (!one.empty() && std::find(names.begin(), names.end(), one) == names.end()) {
          names.push_back(one);
        }
        if (bar == std::string_view::npos) break;
        spec.remove_prefix(bar + 1);
      }
      j.features.gpu_type_count = static_cast<int32_t>(names.size());
    }
    const std::string_view qos = row.str(c_qos);
    if (qos == "LS" || qos == "Guaranteed") {
      j.kind = WorkloadKind::kServing;
    } else if (qos == "BE" || qos == "Burstable") {
      j.kind = WorkloadKind::kBatch;
    } else {
      row.fail(c_qos, "expected LS, BE, Guaranteed or Burstable, got '" + std::string(qos) + "'");
    }
    if (raw_labels != nullptr) ++(*raw_labels)[std::string(qos)];
    if (row.empty(c_create)) row.fail(c_create, "must not be empty");
    const int64_t created = row.integer(c_create, 0, kMaxValue);
    j.submit = static_cast<double>(created);
    if (!row.empty(c_delete))
      j.end = static_cast<double>(row.integer(c_delete, created, kMaxValue));
    j.source = origin + ":" + std::to_string(row.line());
    out.push_back(std::move(j));
  }
  if (out.empty()) throw InputError(input_error_message(origin, 0, "", "no pods"));
  return out;
}

std::vector<LabelledJob> read_alibaba_labelled(const std::string& path, size_t max_jobs,
                                               std::map<std::string, size_t>* raw_labels) {
  return parse_alibaba_labelled(csv::read_file(path), path, max_jobs, raw_labels);
}

ReportClasses kind_classes() {
  ReportClasses c;
  for (size_t k = 0; k < kWorkloadKinds; ++k) {
    c.names.emplace_back(to_string(static_cast<WorkloadKind>(k)));
    c.of_kind[k] = k;
  }
  return c;
}

ReportClasses alibaba_qos_classes() {
  ReportClasses c;
  c.names = {"LS", "BE"};
  c.of_kind[static_cast<size_t>(WorkloadKind::kServing)] = 0;
  c.of_kind[static_cast<size_t>(WorkloadKind::kInteractive)] = 0;
  c.of_kind[static_cast<size_t>(WorkloadKind::kTraining)] = 1;
  c.of_kind[static_cast<size_t>(WorkloadKind::kBatch)] = 1;
  return c;
}

std::vector<ClassifierScore> evaluate_classifiers(const std::vector<LabelledJob>& jobs,
                                                  std::span<WorkloadClassifier* const> classifiers,
                                                  const ClassificationEvalOptions& opt) {
  const ReportClasses& rc = opt.classes;
  const size_t n = rc.names.size();
  for (const size_t c : rc.of_kind) {
    if (c >= n) throw std::invalid_argument("evaluate_classifiers: a kind maps to no class");
  }
  std::vector<size_t> by_submit(jobs.size());
  std::iota(by_submit.begin(), by_submit.end(), size_t{0});
  std::stable_sort(by_submit.begin(), by_submit.end(),
                   [&](size_t a, size_t b) { return jobs[a].submit < jobs[b].submit; });
  std::vector<size_t> by_end;
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (jobs[i].end >= 0) by_end.push_back(i);
  }
  std::stable_sort(by_end.begin(), by_end.end(),
                   [&](size_t a, size_t b) { return jobs[a].end < jobs[b].end; });

  std::vector<ClassifierScore> scores(classifiers.size());
  std::vector<double> confidence(classifiers.size(), 0.0);
  std::vector<size_t> duration_right(classifiers.size(), 0), duration_scored(classifiers.size(), 0);
  for (size_t c = 0; c < classifiers.size(); ++c) {
    scores[c].name = std::string(classifiers[c]->name());
    scores[c].classes = rc.names;
    scores[c].confusion.assign(n, std::vector<size_t>(n, 0));
    scores[c].duration_confusion.assign(kDurationClasses, std::vector<size_t>(kDurationClasses, 0));
  }
  size_t next_end = 0;
  for (size_t pos = 0; pos < by_submit.size(); ++pos) {
    const LabelledJob& job = jobs[by_submit[pos]];
    // Only labels known strictly before this submission.
    while (next_end < by_end.size() && jobs[by_end[next_end]].end < job.submit) {
      const LabelledJob& done = jobs[by_end[next_end++]];
      for (WorkloadClassifier* c : classifiers) {
        c->observe(done.features, done.kind, done.end - done.submit);
      }
    }
    if (opt.progress && pos % 4096 == 0) {
      opt.progress({static_cast<double>(pos), static_cast<double>(jobs.size()), ""});
    }
    if (pos < opt.skip) continue;
    const size_t actual = rc.of_kind[static_cast<size_t>(job.kind)];
    for (size_t c = 0; c < classifiers.size(); ++c) {
      const WorkloadPrediction p = classifiers[c]->predict(job.features);
      ClassifierScore& s = scores[c];
      ++s.jobs;
      ++s.confusion[actual][rc.of_kind[static_cast<size_t>(p.kind)]];
      confidence[c] += p.confidence;
      ++s.sources[std::string(p.source)];
      if (job.end >= 0) {
        const size_t d = static_cast<size_t>(duration_class_of(job.end - job.submit));
        ++s.duration_confusion[d][static_cast<size_t>(p.duration)];
        ++duration_scored[c];
        duration_right[c] += d == static_cast<size_t>(p.duration) ? 1 : 0;
      }
    }
  }
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (size_t c = 0; c < scores.size(); ++c) {
    ClassifierScore& s = scores[c];
    if (s.jobs == 0) continue;
    size_t right = 0;
    s.recall.assign(n, nan);
    s.precision.assign(n, nan);
    double recall_sum = 0;
    size_t with_jobs = 0;
    for (size_t a = 0; a < n; ++a) {
      right += s.confusion[a][a];
      size_t row = 0, col = 0;
      for (size_t b = 0; b < n; ++b) {
        row += s.confusion[a][b];
        col += s.confusion[b][a];
      }
      if (row > 0) {
        s.recall[a] = static_cast<double>(s.confusion[a][a]) / row;
        recall_sum += s.recall[a];
        ++with_jobs;
      }
      if (col > 0) s.precision[a] = static_cast<double>(s.confusion[a][a]) / col;
    }
    s.accuracy = static_cast<double>(right) / s.jobs;
    s.macro_recall = with_jobs == 0 ? 0 : recall_sum / with_jobs;
    s.mean_confidence = confidence[c] / s.jobs;
    s.duration_accuracy =
        duration_scored[c] == 0 ? 0 : static_cast<double>(duration_right[c]) / duration_scored[c];
  }
  return scores;
}

nlohmann::ordered_json to_json(const ClassifierScore& s) {
  auto number = [](const std::vector<double>& v, size_t i) {
    return i >= v.size() || std::isnan(v[i]) ? nlohmann::ordered_json()
                                             : nlohmann::ordered_json(v[i]);
  };
  nlohmann::ordered_json j;
  j["name"] = s.name;
  j["jobs"] = s.jobs;
  j["accuracy"] = s.accuracy;
  j["macro_recall"] = s.macro_recall;
  nlohmann::ordered_json per = nlohmann::ordered_json::object();
  for (size_t c = 0; c < s.classes.size(); ++c) {
    per[s.classes[c]] = {{"recall", number(s.recall, c)}, {"precision", number(s.precision, c)}};
  }
  j["per_class"] = per;
  j["classes"] = s.classes;
  j["confusion"] = s.confusion;  // rows: actual, columns: predicted
  j["duration_accuracy"] = s.duration_accuracy;
  std::vector<std::string> durations;
  for (size_t d = 0; d < kDurationClasses; ++d) {
    durations.emplace_back(to_string(static_cast<DurationClass>(d)));
  }
  j["duration_classes"] = durations;
  j["duration_confusion"] = s.duration_confusion;
  j["mean_confidence"] = s.mean_confidence;
  j["sources"] = s.sources;
  return j;
}

ClassifiedDefaults apply_classified_defaults(Workload& w, WorkloadClassifier& c,
                                             const QueueTree* queues) {
  ClassifiedDefaults out;
  std::vector<size_t> order(w.jobs.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return w.jobs[a].submit_time < w.jobs[b].submit_time;
  });
  // Labelled jobs with a known duration, by when they would have finished.
  struct Done {
    double at;
    size_t job;
  };
  std::vector<Done> done;
  for (size_t i = 0; i < w.jobs.size(); ++i) {
    const JobSpec& s = w.jobs[i];
    if (s.priority_given && s.work_seconds > 0) done.push_back({s.submit_time + s.work_seconds, i});
  }
  std::stable_sort(done.begin(), done.end(),
                   [](const Done& a, const Done& b) { return a.at < b.at; });
  auto tenant_name = [&](TenantId t) -> std::string {
    return t < w.tenants.size() ? w.tenants.name(t) : std::string();
  };
  size_t next = 0;
  for (const size_t i : order) {
    JobSpec& s = w.jobs[i];
    while (next < done.size() && done[next].at < s.submit_time) {
      const JobSpec& d = w.jobs[done[next++].job];
      c.observe(workload_features(d, tenant_name(d.tenant)), kind_of_class(d.priority),
                d.work_seconds);
    }
    if (s.priority_given) {
      ++out.labelled;
      continue;
    }
    const WorkloadPrediction p = c.predict(workload_features(s, tenant_name(s.tenant)));
    const PriorityClass cls = defaults_for(p.kind).priority;
    if (queues != nullptr) {
      const QueueId q = queues->leaf_of(s.tenant);
      if (q != kNoId && (queues->queue(q).allowed_classes & class_bit(cls)) == 0) {
        ++out.kept_queue_default;
        continue;
      }
    }
    s.priority = cls;
    // It now has a class of its own: the queue's default no longer replaces it.
    s.priority_given = true;
    ++out.classified;
    ++out.kinds[static_cast<size_t>(p.kind)];
  }
  return out;
}

}  // namespace tessera
