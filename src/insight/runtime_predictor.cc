#include "insight/runtime_predictor.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "insight/gbt.h"

namespace tessera {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kMinSeconds = 1.0;  // durations are clamped to at least this before logs

bool is_separator(char c) {
  return c == '-' || c == '_' || c == '.' || c == '/' || c == ':' || c == ' ' || c == '#';
}

uint64_t mix(uint64_t x) {  // splitmix64's finaliser
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
uint64_t combine(uint64_t h, uint64_t v) {
  return mix(h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2)));
}

uint64_t shape_hash(const JobFeatures& f) {
  uint64_t h = combine(0x5348415045ULL, static_cast<uint64_t>(f.members));
  h = combine(h, static_cast<uint64_t>(std::llround(f.gpus * 1000)));
  h = combine(h, static_cast<uint64_t>(f.gpu_milli));
  h = combine(h, static_cast<uint64_t>(f.cpu_milli));
  h = combine(h, static_cast<uint64_t>(f.mem_mib));
  h = combine(h, f.gpu_types);
  h = combine(h, f.model);
  return combine(h, static_cast<uint64_t>(f.priority));
}

// The fallback hierarchy of the quantile predictor, most specific first.
enum Level : uint8_t {
  kUserName,
  kUserShape,
  kUser,
  kTenantNameShape,
  kTenantName,
  kTenantShape,
  kTenantGpus,
  kTenant,
  kShape,
  kGpus,
  kGlobal,
  kNumLevels
};
constexpr std::array<std::string_view, kNumLevels> kLevelNames = {
    "user+name",   "user+shape",   "user",        "tenant+name+shape",
    "tenant+name", "tenant+shape", "tenant+gpus", "tenant",
    "shape",       "gpus",         "global"};

// The group key of `f` at `level`, or nullopt when a part of it is unknown.
bool level_key(const JobFeatures& f, int level, uint64_t& key) {
  const uint64_t gpus = static_cast<uint64_t>(std::llround(f.gpus * 1000));
  uint64_t h = mix(static_cast<uint64_t>(level) + 1);
  switch (level) {
    case kUserName:
      if (f.user == kNoId || f.name == kNoId) return false;
      h = combine(combine(h, f.user), f.name);
      break;
    case kUserShape:
      if (f.user == kNoId) return false;
      h = combine(combine(h, f.user), shape_hash(f));
      break;
    case kUser:
      if (f.user == kNoId) return false;
      h = combine(h, f.user);
      break;
    case kTenantNameShape:
      if (f.tenant == kNoId || f.name == kNoId) return false;
      h = combine(combine(combine(h, f.tenant), f.name), shape_hash(f));
      break;
    case kTenantName:
      if (f.tenant == kNoId || f.name == kNoId) return false;
      h = combine(combine(h, f.tenant), f.name);
      break;
    case kTenantShape:
      if (f.tenant == kNoId) return false;
      h = combine(combine(h, f.tenant), shape_hash(f));
      break;
    case kTenantGpus:
      if (f.tenant == kNoId) return false;
      h = combine(combine(h, f.tenant), gpus);
      break;
    case kTenant:
      if (f.tenant == kNoId) return false;
      h = combine(h, f.tenant);
      break;
    case kShape:
      h = combine(h, shape_hash(f));
      break;
    case kGpus:
      h = combine(h, gpus);
      break;
    default:
      break;
  }
  key = h;
  return true;
}

// Linear-interpolated quantile of a sorted sample.
double quantile_of(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return kNaN;
  const double pos = std::clamp(q, 0.0, 1.0) * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - static_cast<double>(lo));
}

// The last `cap` durations of one group (a ring) and how many it has seen.
struct Group {
  std::vector<float> ring;
  uint32_t next = 0;
  uint32_t seen = 0;
  void add(double v, size_t cap) {
    if (ring.size() < cap) {
      ring.push_back(static_cast<float>(v));
    } else {
      ring[next] = static_cast<float>(v);
      next = static_cast<uint32_t>((next + 1) % cap);
    }
    ++seen;
  }
};

// Group statistics along the hierarchy; shared by the quantile and the GBT predictors.
class GroupStats {
 public:
  explicit GroupStats(const QuantilePredictorOptions& o) : o_(o) {}

  void observe(const JobFeatures& f, double seconds) {
    const double v = std::max(seconds, kMinSeconds);
    for (int l = 0; l < kNumLevels; ++l) {
      uint64_t key = 0;
      if (level_key(f, l, key)) groups_[key].add(v, std::max<size_t>(o_.history, 1));
    }
  }

  const Group* group(const JobFeatures& f, int level) const {
    uint64_t key = 0;
    if (!level_key(f, level, key)) return nullptr;
    const auto it = groups_.find(key);
    return it == groups_.end() ? nullptr : &it->second;
  }

  static void sorted_values(const Group& g, std::vector<double>& out) {
    out.assign(g.ring.begin(), g.ring.end());
    std::sort(out.begin(), out.end());
  }

  Prediction predict(const JobFeatures& f) const {
    Prediction p;
    std::vector<double> vals;
    for (int l = 0; l < kNumLevels; ++l) {
      const Group* g = group(f, l);
      if (g == nullptr || g->ring.size() < std::max<uint32_t>(o_.min_support, 1)) continue;
      sorted_values(*g, vals);
      p.point = quantile_of(vals, o_.quantile);
      p.lower = quantile_of(vals, o_.lower_q);
      p.upper = quantile_of(vals, o_.upper_q);
      p.source = kLevelNames[static_cast<size_t>(l)];
      p.support = static_cast<uint32_t>(g->ring.size());
      break;
    }
    if (p.point < 0 || std::isnan(p.point)) {
      // Nothing has finished yet (or only groups below min_support): the prior.
      const Group* any = group(f, kGlobal);
      if (any != nullptr && !any->ring.empty()) {
        sorted_values(*any, vals);
        p.point = quantile_of(vals, o_.quantile);
        p.lower = quantile_of(vals, o_.lower_q);
        p.upper = quantile_of(vals, o_.upper_q);
        p.source = kLevelNames[kGlobal];
        p.support = static_cast<uint32_t>(any->ring.size());
      } else {
        p.point = o_.prior_seconds;
        p.lower = o_.prior_seconds / 10;
        p.upper = o_.prior_seconds * 10;
        p.source = "prior";
        p.support = 0;
      }
    }
    if (f.requested_seconds > 0) {
      // A time limit bounds the run: the job is killed at it.
      p.point = std::min(p.point, f.requested_seconds);
      p.upper = std::min(p.upper, f.requested_seconds);
      p.lower = std::min(p.lower, p.point);
    }
    return p;
  }

  // For the GBT: per level the log-median of the group (NaN when empty), then the log of the
  // support of the most specific non-empty level and that level's index.
  void encode(const JobFeatures& f, double* out) const {
    std::vector<double> vals;
    int first = kNumLevels;
    double first_support = 0, first_last = kNaN;
    for (int l = 0; l < kNumLevels; ++l) {
      const Group* g = group(f, l);
      if (g == nullptr || g->ring.empty()) {
        out[l] = kNaN;
        continue;
      }
      sorted_values(*g, vals);
      out[l] = std::log(quantile_of(vals, 0.5));
      if (first == kNumLevels) {
        first = l;
        first_support = static_cast<double>(g->seen);
        // The latest duration of that group (the ring's newest entry).
        const size_t newest = g->ring.size() < std::max<size_t>(o_.history, 1)
                                  ? g->ring.size() - 1
                                  : (g->next + g->ring.size() - 1) % g->ring.size();
        first_last = std::log(static_cast<double>(g->ring[newest]));
      }
    }
    out[kNumLevels] = std::log1p(first_support);
    out[kNumLevels + 1] = static_cast<double>(first);
    out[kNumLevels + 2] = first_last;
  }
  static constexpr size_t kEncoded = kNumLevels + 3;

 private:
  QuantilePredictorOptions o_;
  std::unordered_map<uint64_t, Group> groups_;
};

class QuantilePredictor final : public RuntimePredictor {
 public:
  explicit QuantilePredictor(const QuantilePredictorOptions& o) : stats_(o) {}
  std::string_view name() const override { return "quantile"; }
  Prediction predict(const JobFeatures& f) const override { return stats_.predict(f); }
  void observe(const JobFeatures& f, double s) override {
    if (s > 0) stats_.observe(f, s);
  }

 private:
  GroupStats stats_;
};

class MeanPredictor final : public RuntimePredictor {
 public:
  explicit MeanPredictor(double prior) : prior_(prior) {}
  std::string_view name() const override { return "mean"; }
  Prediction predict(const JobFeatures& f) const override {
    Prediction p;
    const std::array<std::pair<uint64_t, std::string_view>, 3> keys = {
        {{f.user == kNoId ? 0 : combine(1, f.user), "user"},
         {f.tenant == kNoId ? 0 : combine(2, f.tenant), "tenant"},
         {combine(3, 0), "global"}}};
    for (const auto& [key, source] : keys) {
      if (key == 0) continue;
      const auto it = sums_.find(key);
      if (it == sums_.end() || it->second.second == 0) continue;
      p.point = it->second.first / static_cast<double>(it->second.second);
      p.source = source;
      p.support = it->second.second;
      return p;
    }
    p.point = prior_;
    p.source = "prior";
    return p;
  }
  void observe(const JobFeatures& f, double s) override {
    if (!(s > 0)) return;
    auto add = [&](uint64_t key) {
      auto& [sum, n] = sums_[key];
      sum += s;
      ++n;
    };
    if (f.user != kNoId) add(combine(1, f.user));
    if (f.tenant != kNoId) add(combine(2, f.tenant));
    add(combine(3, 0));
  }

 private:
  double prior_;
  std::unordered_map<uint64_t, std::pair<double, uint32_t>> sums_;
};

class GbtPredictor final : public RuntimePredictor {
 public:
  explicit GbtPredictor(const GbtPredictorOptions& o) : o_(o), stats_(o.history) {}
  std::string_view name() const override { return "gbt"; }

  // Feature 0 is the log of the quantile predictor's answer: the model learns a correction to
  // it (the target is log(actual) minus it), so it need not rebuild the identity from bins.
  static constexpr size_t kRaw = 11;
  static constexpr size_t kFeatures = kRaw + GroupStats::kEncoded;

  void row(const JobFeatures& f, double* out) const {
    out[0] = std::log(std::max(stats_.predict(f).point, kMinSeconds));
    out[10] = std::log2(std::max(f.gpus, 1e-3));
    out[1] = static_cast<double>(f.gpu_milli);
    out[2] = std::log1p(static_cast<double>(std::max<int64_t>(f.cpu_milli, 0)));
    out[3] = std::log1p(static_cast<double>(std::max<int64_t>(f.mem_mib, 0)));
    out[4] = static_cast<double>(f.gpu_types);
    out[5] = static_cast<double>(f.priority);
    out[6] = f.requested_seconds > 0 ? std::log(f.requested_seconds) : kNaN;
    const double hours = f.submit_time / 3600.0;
    out[7] = std::fmod(hours, 24.0);  // hour of day (of the trace's clock)
    out[8] = f.model == kNoId ? kNaN : static_cast<double>(f.model);
    out[9] = static_cast<double>(f.members);
    stats_.encode(f, out + kRaw);
  }

  // Rows are remembered as predict() saw them, so that the model trains on the features a
  // submission had (the group statistics then), not the richer ones of the job's finish.
  static uint64_t features_hash(const JobFeatures& f) {
    uint64_t h = combine(shape_hash(f), f.tenant);
    h = combine(h, f.user);
    h = combine(h, f.name);
    h = combine(h, static_cast<uint64_t>(std::llround(f.requested_seconds)));
    return combine(h, static_cast<uint64_t>(std::llround(f.submit_time * 1000)));
  }

  Prediction predict(const JobFeatures& f) const override {
    std::array<double, kFeatures> x{};
    row(f, x.data());
    auto& rows = seen_[features_hash(f)];
    if (rows.size() < 64) rows.push_back(x);
    if (!model_.trained()) return stats_.predict(f);
    Prediction p;
    const double log_point = x[0] + model_.predict(x.data());
    p.point = std::exp(log_point);
    // Uncertainty: quantiles of recent out-of-sample log residuals.
    if (residuals_.size() >= 10) {
      std::vector<double> r(residuals_.begin(), residuals_.end());
      std::sort(r.begin(), r.end());
      p.lower = std::exp(log_point + quantile_of(r, o_.history.lower_q));
      p.upper = std::exp(log_point + quantile_of(r, o_.history.upper_q));
    } else {
      p.lower = p.point / 10;
      p.upper = p.point * 10;
    }
    p.source = "gbt";
    p.support = static_cast<uint32_t>(fitted_on_);
    if (f.requested_seconds > 0) {
      p.point = std::min(p.point, f.requested_seconds);
      p.upper = std::min(p.upper, f.requested_seconds);
      p.lower = std::min(p.lower, p.point);
    }
    return p;
  }

  void observe(const JobFeatures& f, double s) override {
    if (!(s > 0)) return;
    const double y = std::log(std::max(s, kMinSeconds));
    std::array<double, kFeatures> x{};
    const auto it = seen_.find(features_hash(f));
    if (it != seen_.end()) {
      x = it->second.front();  // as predict() saw it at submission
      it->second.erase(it->second.begin());
      if (it->second.empty()) seen_.erase(it);
    } else {
      row(f, x.data());  // never predicted: as a prediction would see it now
    }
    if (model_.trained()) {
      const double r = y - x[0] - model_.predict(x.data());
      if (residuals_.size() < kResiduals) {
        residuals_.push_back(r);
      } else {
        residuals_[residual_next_] = r;
        residual_next_ = (residual_next_ + 1) % kResiduals;
      }
    }
    stats_.observe(f, s);
    // Bounded training window: the last max_samples rows.
    const size_t cap = std::max<size_t>(o_.max_samples, 1);
    if (ys_.size() < cap) {
      xs_.insert(xs_.end(), x.begin(), x.end());
      ys_.push_back(y - x[0]);
    } else {
      std::copy(x.begin(), x.end(), xs_.begin() + static_cast<std::ptrdiff_t>(next_ * kFeatures));
      ys_[next_] = y - x[0];
      next_ = (next_ + 1) % cap;
    }
    ++observed_;
    // Fits after first_fit observations, then each time they double, then every
    // retrain_every.
    const size_t due =
        fitted_on_ == 0 ? o_.first_fit
                        : fitted_on_ + std::min(std::max<size_t>(o_.retrain_every, 1), fitted_on_);
    if (observed_ >= std::max<size_t>(due, 1)) {
      GbtParams gp;
      gp.loss = GbtLoss::kAbsolute;
      gp.trees = o_.trees;
      gp.max_depth = o_.max_depth;
      gp.learning_rate = o_.learning_rate;
      gp.min_leaf = o_.min_leaf;
      model_.fit(xs_, kFeatures, ys_, gp);
      fitted_on_ = observed_;
    }
  }

 private:
  static constexpr size_t kResiduals = 512;
  GbtPredictorOptions o_;
  GroupStats stats_;
  GradientBoostedTrees model_;
  std::vector<double> xs_, ys_;
  size_t next_ = 0;
  size_t observed_ = 0, fitted_on_ = 0;
  std::vector<double> residuals_;
  size_t residual_next_ = 0;
  mutable std::unordered_map<uint64_t, std::vector<std::array<double, kFeatures>>> seen_;
};

}  // namespace

std::string name_class(std::string_view name) {
  // Walk tokens (maximal runs of non-separators); keep the prefix up to the end of the last
  // token without a digit.
  size_t keep = 0;  // end of the last digit-free token seen
  size_t i = 0;
  while (i < name.size()) {
    while (i < name.size() && is_separator(name[i])) ++i;
    const size_t start = i;
    bool digit = false;
    while (i < name.size() && !is_separator(name[i])) {
      if (name[i] >= '0' && name[i] <= '9') digit = true;
      ++i;
    }
    if (i == start) break;
    if (!digit) keep = i;
  }
  return std::string(name.substr(0, keep));
}

JobFeatures FeatureEncoder::encode(const JobSpec& s, std::string_view user) {
  JobFeatures f;
  f.tenant = s.tenant;
  if (!user.empty()) f.user = users_.intern(user);
  const std::string cls = name_class(s.name);
  if (!cls.empty()) f.name = names_.intern(cls);
  f.model = s.model;
  f.gpus = static_cast<double>(s.gpu_milli_per_gang(s.min_members)) / kMilliPerGpu;
  f.members = s.min_members;
  f.gpu_milli = s.demand.gpu_milli;
  f.cpu_milli = s.demand.cpu_milli;
  f.mem_mib = s.demand.mem_mib;
  f.gpu_types = s.allowed_types;
  f.priority = s.priority;
  f.submit_time = s.submit_time;
  return f;
}

std::unique_ptr<RuntimePredictor> make_quantile_predictor(QuantilePredictorOptions o) {
  return std::make_unique<QuantilePredictor>(o);
}
std::unique_ptr<RuntimePredictor> make_gbt_predictor(GbtPredictorOptions o) {
  return std::make_unique<GbtPredictor>(o);
}
std::unique_ptr<RuntimePredictor> make_mean_predictor(double prior_seconds) {
  return std::make_unique<MeanPredictor>(prior_seconds);
}

std::unique_ptr<RuntimePredictor> make_runtime_predictor(std::string_view name) {
  if (name == "mean") return make_mean_predictor();
  if (name == "quantile") return make_quantile_predictor();
  if (name == "gbt") return make_gbt_predictor();
  return nullptr;
}

std::vector<std::string> runtime_predictor_names() {
  return {"mean", "quantile", "gbt"};
}

}  // namespace tessera
