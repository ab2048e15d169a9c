#include "insight/workload_classifier.h"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cmath>
#include <map>
#include <stdexcept>

#include "insight/runtime_predictor.h"

namespace tessera {

std::string_view to_string(WorkloadKind k) {
  switch (k) {
    case WorkloadKind::kServing:
      return "serving";
    case WorkloadKind::kTraining:
      return "training";
    case WorkloadKind::kBatch:
      return "batch";
    case WorkloadKind::kInteractive:
      return "interactive";
  }
  return "?";
}

bool parse_workload_kind(std::string_view s, WorkloadKind& out) {
  for (size_t k = 0; k < kWorkloadKinds; ++k) {
    if (to_string(static_cast<WorkloadKind>(k)) == s) {
      out = static_cast<WorkloadKind>(k);
      return true;
    }
  }
  return false;
}

std::string_view to_string(DurationClass d) {
  switch (d) {
    case DurationClass::kUnder10Min:
      return "<10m";
    case DurationClass::kUnderHour:
      return "10m-1h";
    case DurationClass::kUnder6Hours:
      return "1h-6h";
    case DurationClass::kOver6Hours:
      return ">6h";
  }
  return "?";
}

DurationClass duration_class_of(double seconds) {
  if (seconds < 600) return DurationClass::kUnder10Min;
  if (seconds < 3600) return DurationClass::kUnderHour;
  if (seconds < 6 * 3600) return DurationClass::kUnder6Hours;
  return DurationClass::kOver6Hours;
}

WorkloadFeatures workload_features(const JobSpec& s, std::string_view tenant,
                                   std::vector<std::string> command) {
  WorkloadFeatures f;
  f.cpu_milli = s.demand.cpu_milli;
  f.mem_mib = s.demand.mem_mib;
  f.gpus = s.demand.gpus;
  f.gpu_milli = s.demand.gpus == 0 ? kMilliPerGpu : s.demand.gpu_milli;
  f.members = s.min_members;
  f.gpu_type_count = s.allowed_types == kAnyGpuType ? 0 : std::popcount(s.allowed_types);
  f.tenant = std::string(tenant);
  f.name = s.name;
  f.command = std::move(command);
  return f;
}

KindDefaults defaults_for(WorkloadKind k) {
  switch (k) {
    case WorkloadKind::kServing:
      // A service drains its connections; only inference-critical work may displace it.
      return {PriorityClass::kProduction, false, 30};
    case WorkloadKind::kInteractive:
      return {PriorityClass::kProduction, false, 30};
    case WorkloadKind::kTraining:
      // Long work that checkpoints: it gets time to write one before its GPUs go.
      return {PriorityClass::kResearch, true, 300};
    case WorkloadKind::kBatch:
      return {PriorityClass::kBestEffort, true, 60};
  }
  return {};
}

WorkloadKind kind_of_class(PriorityClass p) {
  switch (p) {
    case PriorityClass::kInferenceCritical:
    case PriorityClass::kProduction:
      return WorkloadKind::kServing;
    case PriorityClass::kResearch:
      return WorkloadKind::kTraining;
    case PriorityClass::kBestEffort:
      return WorkloadKind::kBatch;
  }
  return WorkloadKind::kBatch;
}

namespace {

template <size_t N>
size_t argmax(const std::array<double, N>& v) {
  size_t best = 0;
  for (size_t i = 1; i < N; ++i) {
    if (v[i] > v[best]) best = i;  // ties go to the lower index: deterministic
  }
  return best;
}

// ---------------------------------------------------------------- majority

class MajorityClassifier final : public WorkloadClassifier {
 public:
  std::string_view name() const override { return "majority"; }
  WorkloadPrediction predict(const WorkloadFeatures&) const override {
    WorkloadPrediction p;
    if (seen_ == 0) {
      p.source = "prior";
      return p;
    }
    p.kind = static_cast<WorkloadKind>(argmax(kinds_));
    p.duration = static_cast<DurationClass>(argmax(durations_));
    p.confidence = kinds_[static_cast<size_t>(p.kind)] / seen_;
    p.source = "majority";
    return p;
  }
  void observe(const WorkloadFeatures&, WorkloadKind kind, double seconds) override {
    kinds_[static_cast<size_t>(kind)] += 1;
    durations_[static_cast<size_t>(duration_class_of(seconds))] += 1;
    seen_ += 1;
  }

 private:
  std::array<double, kWorkloadKinds> kinds_{};
  std::array<double, kDurationClasses> durations_{};
  double seen_ = 0;
};

// ---------------------------------------------------------------- threshold rule

WorkloadPrediction threshold_rule(const WorkloadFeatures& f) {
  WorkloadPrediction p;
  p.confidence = 0.5;
  p.source = "rule";
  const bool share = f.gpus > 0 && f.gpu_milli < kMilliPerGpu;
  if (f.members > 1 || (!share && int64_t{f.gpus} * f.members >= 8)) {
    p.kind = WorkloadKind::kTraining;
    p.duration = DurationClass::kUnder6Hours;
  } else if (share) {
    p.kind = WorkloadKind::kBatch;
    p.duration = DurationClass::kUnder10Min;
  } else {
    p.kind = WorkloadKind::kServing;
    p.duration = DurationClass::kUnderHour;
  }
  return p;
}

class ThresholdClassifier final : public WorkloadClassifier {
 public:
  std::string_view name() const override { return "threshold"; }
  WorkloadPrediction predict(const WorkloadFeatures& f) const override { return threshold_rule(f); }
  void observe(const WorkloadFeatures&, WorkloadKind, double) override {}
};

// ---------------------------------------------------------------- logistic regression

uint64_t fnv1a(std::string_view s, uint64_t h = 1469598103934665603ull) {
  for (const char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  return h;
}

int log2_bucket(int64_t v) {
  return v <= 0 ? -1 : std::bit_width(static_cast<uint64_t>(v));
}

// Digit-free tokens of `s` (split on anything not a letter), lower-case: run numbers and
// hashes say nothing about the kind, "serve", "train", "eval" do.
void tokens_of(std::string_view s, std::vector<std::string>& out, size_t limit) {
  std::string cur;
  bool digit = false;
  auto flush = [&] {
    if (!cur.empty() && !digit && cur.size() <= 32 && out.size() < limit) out.push_back(cur);
    cur.clear();
    digit = false;
  };
  for (const char c : s) {
    if (std::isalpha(static_cast<unsigned char>(c))) {
      cur.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      digit = true;
    } else {
      flush();
    }
  }
  flush();
}

std::string shape_key(const WorkloadFeatures& f) {
  return std::to_string(f.cpu_milli) + "/" + std::to_string(f.mem_mib) + "/" +
         std::to_string(f.gpus) + "x" + std::to_string(f.gpu_milli) + "/" +
         std::to_string(f.members) + "/" + std::to_string(f.gpu_type_count);
}

// Counts of kinds and duration classes among the finished jobs sharing a key.
struct History {
  std::array<double, kWorkloadKinds> kinds{};
  std::array<double, kDurationClasses> durations{};
  double n = 0;
};

class LogisticClassifier final : public WorkloadClassifier {
 public:
  explicit LogisticClassifier(LogisticClassifierOptions o) : o_(o) {
    if (o_.hash_bits < 8 || o_.hash_bits > 24) {
      throw std::invalid_argument("logistic classifier: hash_bits must be in [8, 24]");
    }
    if (!(o_.learning_rate > 0)) {
      throw std::invalid_argument("logistic classifier: learning_rate must be > 0");
    }
    const size_t d = size_t{1} << o_.hash_bits;
    kind_w_.assign(d * kWorkloadKinds, 0.0);
    kind_g_.assign(d * kWorkloadKinds, 0.0);
    dur_w_.assign(d * kDurationClasses, 0.0);
    dur_g_.assign(d * kDurationClasses, 0.0);
  }

  std::string_view name() const override { return "logistic"; }

  WorkloadPrediction predict(const WorkloadFeatures& f) const override {
    if (seen_ == 0) {
      WorkloadPrediction p = threshold_rule(f);
      p.source = "rule (untrained)";
      return p;
    }
    const std::vector<Feature> x = encode(f);
    const auto pk = softmax<kWorkloadKinds>(kind_w_, x);
    const auto pd = softmax<kDurationClasses>(dur_w_, x);
    WorkloadPrediction p;
    p.kind = static_cast<WorkloadKind>(argmax(pk));
    p.duration = static_cast<DurationClass>(argmax(pd));
    p.confidence = pk[static_cast<size_t>(p.kind)];
    p.source = "logistic";
    return p;
  }

  void observe(const WorkloadFeatures& f, WorkloadKind kind, double seconds) override {
    // Encoded before this job joins the history, as predict() would have seen it.
    const std::vector<Feature> x = encode(f);
    const DurationClass dc = duration_class_of(seconds);
    step<kWorkloadKinds>(kind_w_, kind_g_, x, static_cast<size_t>(kind));
    step<kDurationClasses>(dur_w_, dur_g_, x, static_cast<size_t>(dc));
    for (const std::string& key : history_keys(f)) {
      History& h = history_[key];
      h.kinds[static_cast<size_t>(kind)] += 1;
      h.durations[static_cast<size_t>(dc)] += 1;
      h.n += 1;
    }
    ++seen_;
  }

 private:
  struct Feature {
    size_t index;
    double value;
  };

  size_t slot(std::string_view token) const {
    return static_cast<size_t>(fnv1a(token) & ((uint64_t{1} << o_.hash_bits) - 1));
  }

  static std::vector<std::string> history_keys(const WorkloadFeatures& f) {
    std::vector<std::string> keys = {"shape=" + shape_key(f)};
    if (!f.tenant.empty()) keys.push_back("tenant=" + f.tenant);
    const std::string cls = name_class(f.name);
    if (!cls.empty()) keys.push_back("name=" + f.tenant + "/" + cls);
    return keys;
  }

  std::vector<Feature> encode(const WorkloadFeatures& f) const {
    std::vector<Feature> x;
    auto add = [&](const std::string& token, double value = 1.0) {
      x.push_back({slot(token), value});
    };
    add("bias");
    const bool share = f.gpus > 0 && f.gpu_milli < kMilliPerGpu;
    add(std::string("use=") + (f.gpus == 0 ? "cpu" : share ? "share" : "whole"));
    add("gpus=" + std::to_string(std::min(f.gpus, 64)));
    add("milli=" + std::to_string(f.gpu_milli));
    add("cpu=" + std::to_string(log2_bucket(f.cpu_milli)));
    add("mem=" + std::to_string(log2_bucket(f.mem_mib)));
    add("members=" + std::to_string(log2_bucket(f.members)));
    add("types=" + std::to_string(std::min(f.gpu_type_count, 8)));
    add("shape=" + shape_key(f));
    if (!f.tenant.empty()) add("tenant=" + f.tenant);
    std::vector<std::string> toks;
    tokens_of(f.name, toks, 8);
    for (const std::string& t : toks) add("tok=" + t);
    const std::string cls = name_class(f.name);
    if (!cls.empty()) {
      add("class=" + cls);
      add("tenant-class=" + f.tenant + "/" + cls);
    }
    toks.clear();
    for (const std::string& arg : f.command) tokens_of(arg, toks, 16);
    for (const std::string& t : toks) add("cmd=" + t);
    for (const std::string& key : history_keys(f)) {
      const auto it = history_.find(key);
      const std::string level = key.substr(0, key.find('='));
      if (it == history_.end()) {
        add("hist-none=" + level);
        continue;
      }
      const History& h = it->second;
      // Shares shrunk towards nothing while the support is small (add-one in the denominator).
      for (size_t k = 0; k < kWorkloadKinds; ++k) {
        if (h.kinds[k] > 0) add("hist=" + level + "/k" + std::to_string(k), h.kinds[k] / (h.n + 1));
      }
      for (size_t d = 0; d < kDurationClasses; ++d) {
        if (h.durations[d] > 0) {
          add("hist=" + level + "/d" + std::to_string(d), h.durations[d] / (h.n + 1));
        }
      }
    }
    return x;
  }

  template <size_t K>
  static std::array<double, K> softmax(const std::vector<double>& w,
                                       const std::vector<Feature>& x) {
    std::array<double, K> z{};
    for (const Feature& e : x) {
      for (size_t k = 0; k < K; ++k) z[k] += w[e.index * K + k] * e.value;
    }
    const double m = *std::max_element(z.begin(), z.end());
    double sum = 0;
    for (double& v : z) {
      v = std::exp(v - m);
      sum += v;
    }
    for (double& v : z) v /= sum;
    return z;
  }

  template <size_t K>
  void step(std::vector<double>& w, std::vector<double>& g2, const std::vector<Feature>& x,
            size_t label) const {
    const auto p = softmax<K>(w, x);
    for (const Feature& e : x) {
      for (size_t k = 0; k < K; ++k) {
        const double g = (p[k] - (k == label ? 1.0 : 0.0)) * e.value;
        if (g == 0) continue;
        double& acc = g2[e.index * K + k];
        acc += g * g;
        w[e.index * K + k] -= o_.learning_rate * g / std::sqrt(acc);
      }
    }
  }

  LogisticClassifierOptions o_;
  std::vector<double> kind_w_, kind_g_, dur_w_, dur_g_;
  std::map<std::string, History> history_;
  size_t seen_ = 0;
};

}  // namespace

std::unique_ptr<WorkloadClassifier> make_majority_classifier() {
  return std::make_unique<MajorityClassifier>();
}
std::unique_ptr<WorkloadClassifier> make_threshold_classifier() {
  return std::make_unique<ThresholdClassifier>();
}
std::unique_ptr<WorkloadClassifier> make_logistic_classifier(LogisticClassifierOptions o) {
  return std::make_unique<LogisticClassifier>(o);
}

std::unique_ptr<WorkloadClassifier> make_workload_classifier(std::string_view name) {
  if (name == "majority") return make_majority_classifier();
  if (name == "threshold") return make_threshold_classifier();
  if (name == "logistic") return make_logistic_classifier();
  return nullptr;
}

std::vector<std::string> workload_classifier_names() {
  return {"majority", "threshold", "logistic"};
}

}  // namespace tessera
