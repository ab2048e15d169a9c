#include "insight/power_model.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <stdexcept>

namespace tessera {

namespace {

// Pool-adjacent violators: the non-decreasing sequence closest (least squares) to `v`.
void make_monotone(std::vector<double>& v) {
  std::vector<double> sum, count;
  for (double x : v) {
    sum.push_back(x);
    count.push_back(1);
    while (sum.size() > 1 &&
           sum[sum.size() - 2] / count[count.size() - 2] > sum.back() / count.back()) {
      sum[sum.size() - 2] += sum.back();
      count[count.size() - 2] += count.back();
      sum.pop_back();
      count.pop_back();
    }
  }
  size_t i = 0;
  for (size_t b = 0; b < sum.size(); ++b) {
    for (int k = 0; k < static_cast<int>(count[b]); ++k) v[i++] = sum[b] / count[b];
  }
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string lower(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
  }
  return out;
}

// Linear interpolation on (x, y) pairs sorted by x, clamped to the ends.
template <class X, class Y>
double interpolate(const std::vector<PowerPoint>& p, double at, X x, Y y) {
  if (at <= x(p.front())) return y(p.front());
  if (at >= x(p.back())) return y(p.back());
  const auto it = std::upper_bound(p.begin(), p.end(), at,
                                   [&](double v, const PowerPoint& q) { return v < x(q); });
  const PowerPoint& hi = *it;
  const PowerPoint& lo = *(it - 1);
  const double span = x(hi) - x(lo);
  if (span <= 0) return y(hi);
  return y(lo) + (y(hi) - y(lo)) * (at - x(lo)) / span;
}

// Idle power of a type Zeus did not measure is its TDP times the median, over the measured
// types of `specs` (each once, not its variants), of idle / TDP (docs/energy.md).
double idle_fraction(const std::vector<GpuPowerSpec>& specs) {
  std::vector<double> f;
  for (const GpuPowerSpec& s : specs) {
    if (s.type == s.measured_as) f.push_back(s.idle_w / s.tdp_w);
  }
  return median(f);
}

GpuPowerSpec derived_spec(std::string type, double tdp, double min_limit, std::string source) {
  GpuPowerSpec s;
  s.type = std::move(type);
  s.tdp_w = tdp;
  s.min_limit_w = min_limit;
  s.source = std::move(source);
  return s;
}

}  // namespace

PowerCurve::PowerCurve(std::vector<PowerPoint> points) {
  if (points.empty()) throw std::invalid_argument("power curve: no points");
  std::sort(points.begin(), points.end(),
            [](const PowerPoint& a, const PowerPoint& b) { return a.limit_w < b.limit_w; });
  std::vector<double> speed, power;
  for (const PowerPoint& p : points) {
    if (!(p.limit_w > 0) || !(p.speed > 0) || !(p.power_w >= 0)) {
      throw std::invalid_argument("power curve: a limit, speed or power is not positive");
    }
    speed.push_back(p.speed);
    power.push_back(p.power_w);
  }
  make_monotone(speed);
  make_monotone(power);
  const double top = speed.back();
  for (size_t i = 0; i < points.size(); ++i) {
    points[i].speed = speed[i] / top;
    points[i].power_w = power[i];
  }
  points_ = std::move(points);
}

double PowerCurve::speed(double limit_w) const {
  return interpolate(
      points_, limit_w, [](const PowerPoint& p) { return p.limit_w; },
      [](const PowerPoint& p) { return p.speed; });
}

double PowerCurve::power(double limit_w) const {
  return interpolate(
      points_, limit_w, [](const PowerPoint& p) { return p.limit_w; },
      [](const PowerPoint& p) { return p.power_w; });
}

const std::vector<GpuPowerSpec>& builtin_power_specs() {
  // Measured types: TDP and the lowest limit are the ends of the limits Zeus swept on that GPU
  // (which are the driver's range for the board it used); idle is the lowest average draw Zeus
  // measured on it while training (an upper bound of idle: the GPU was busy with a small
  // model). Others: TDP from NVIDIA's datasheet for the form factor the type name implies
  // (SXM for A100/H100/H200), lowest limit as `nvidia-smi -q -d POWER` reports it ("Min Power
  // Limit"), idle derived (idle_fraction). docs/energy.md cites each.
  static const std::vector<GpuPowerSpec> specs = [] {
    const std::string zeus = "Zeus power trace (NSDI'23): the limits it swept";
    const std::string zeus_idle = "Zeus power trace: lowest average draw measured";
    std::vector<GpuPowerSpec> s = {
        {"V100", 250, 100, 34.75, zeus + " on V100 PCIe (TDP 250 W)", zeus_idle, "V100"},
        {"P100", 250, 125, 33.29, zeus + " on P100 PCIe (TDP 250 W)", zeus_idle, "P100"},
        {"A40", 300, 100, 79.93, zeus + " on A40 (TDP 300 W)", zeus_idle, "A40"},
        {"RTX6000", 260, 100, 54.69, zeus + " on Quadro RTX 6000 (TDP 260 W)", zeus_idle,
         "RTX6000"},
    };
    // V100 variants and Alibaba's anonymised V100-class G2/G3 run on the V100's measurements.
    for (const char* v : {"V100M16", "V100M32", "V100-32G", "G2", "G3"}) {
      GpuPowerSpec c = s[0];
      c.type = v;
      c.source += std::string(v)[0] == 'G' ? " (assumed: anonymised V100-class type)" : "";
      s.push_back(c);
    }
    const std::string ds = "NVIDIA datasheet TDP; Min Power Limit as nvidia-smi -q reports";
    s.push_back(derived_spec("K80", 150, 100, ds + " (per GPU; 300 W per two-GPU board)"));
    s.push_back(derived_spec("T4", 70, 60, ds));
    s.push_back(derived_spec("A10", 150, 100, ds));
    s.push_back(derived_spec("A100-40G", 400, 100, ds + " (SXM4)"));
    s.push_back(derived_spec("A100-80G", 400, 100, ds + " (SXM4)"));
    s.push_back(derived_spec("H100", 700, 200, ds + " (SXM5)"));
    s.push_back(derived_spec("H200", 700, 200, ds + " (SXM; lowest limit assumed as H100's)"));
    // Types added to the GPU table later. No reading of their lowest limit was at hand: L40S
    // takes the A40's and A10's (the boards nearest it), the others the H100's share of its TDP
    // (200 / 700 W), since a fixed 200 W would sit below a 1,200 W board's idle draw.
    const std::string dt = "NVIDIA datasheet TDP";
    const auto h100_share = [](double tdp) { return std::round(tdp * 200 / 700); };
    s.push_back(derived_spec("L40S", 350, 100, dt + "; lowest limit assumed as A40's and A10's"));
    s.push_back(derived_spec("B200", 1000, h100_share(1000),
                             dt + " (HGX B200); lowest limit assumed at H100's share of TDP"));
    s.push_back(derived_spec("GB200", 1200, h100_share(1200),
                             dt + " (GB200 NVL72); lowest limit assumed at H100's share of TDP"));
    s.push_back(derived_spec("MI300X", 750, h100_share(750),
                             "AMD datasheet peak board power; lowest limit assumed at H100's share "
                             "of TDP"));
    const double frac = idle_fraction(s);
    for (GpuPowerSpec& g : s) {
      if (g.curves_measured()) continue;
      g.idle_w = std::round(g.tdp_w * frac * 10) / 10;
      g.idle_from = "derived: TDP x the measured types' median idle/TDP";
    }
    return s;
  }();
  return specs;
}

const GpuPowerSpec& unknown_power_spec() {
  static const GpuPowerSpec s = [] {
    GpuPowerSpec g =
        derived_spec("unknown", 300, 100, "assumed: a GPU type with no power figures (TDP 300 W)");
    g.idle_w = g.tdp_w * idle_fraction(builtin_power_specs());
    g.idle_from = "assumed: TDP x the measured types' median idle/TDP";
    return g;
  }();
  return s;
}

double energy_optimal_limit(const PowerCurve& curve, double eta, double max_power_w) {
  if (!(eta >= 0 && eta <= 1)) {
    throw std::invalid_argument("energy weight (eta) must be within [0, 1]");
  }
  double best = curve.max_limit();
  double best_cost = std::numeric_limits<double>::infinity();
  // From the highest limit down, keeping the first minimum: ties go to the faster limit.
  const auto& p = curve.points();
  for (auto it = p.rbegin(); it != p.rend(); ++it) {
    const double cost = (eta * it->power_w + (1 - eta) * max_power_w) / it->speed;
    if (cost < best_cost - 1e-12) {
      best_cost = cost;
      best = it->limit_w;
    }
  }
  return best;
}

PowerModel::PowerModel(std::map<std::string, TypeCurves> measured) : measured_(!measured.empty()) {
  // The measured types' curves on a normalised axis (limit / TDP, power / TDP), by workload.
  struct Normalised {
    double tdp;
    const TypeCurves* curves;
  };
  std::vector<Normalised> norm;
  for (const GpuPowerSpec& s : builtin_power_specs()) {
    if (s.type != s.measured_as) continue;  // each measured GPU once, not its variants
    auto it = measured.find(s.type);
    if (it != measured.end()) norm.push_back({s.tdp_w, &it->second});
  }
  std::vector<std::string> keys;
  for (const Normalised& n : norm) {
    for (const auto& [k, c] : *n.curves) {
      if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
    }
  }
  auto derive = [&](const GpuPowerSpec& spec) {
    TypeCurves out;
    if (norm.empty()) {
      // No measurements: flat at TDP, the worst case, and no speed lost to a limit.
      out[""] = PowerCurve({PowerPoint{spec.tdp_w, 1, spec.tdp_w}});
      return out;
    }
    for (const std::string& k : keys) {
      std::vector<PowerPoint> pts;
      constexpr int kSteps = 8;
      for (int i = 0; i <= kSteps; ++i) {
        const double limit =
            std::round(spec.min_limit_w + (spec.tdp_w - spec.min_limit_w) * i / kSteps);
        const double x = limit / spec.tdp_w;
        std::vector<double> sp, pw;
        for (const Normalised& n : norm) {
          auto c = n.curves->find(k);
          if (c == n.curves->end()) continue;
          sp.push_back(c->second.speed(x * n.tdp));
          pw.push_back(c->second.power(x * n.tdp) / n.tdp);
        }
        pts.push_back(PowerPoint{limit, median(sp), median(pw) * spec.tdp_w});
      }
      out[k] = PowerCurve(std::move(pts));
    }
    return out;
  };
  for (const GpuPowerSpec& s : builtin_power_specs()) {
    auto it = measured.find(s.measured_as);
    if (s.curves_measured() && it != measured.end()) {
      curves_[s.type] = it->second;
    } else {
      curves_[s.type] = derive(s);
    }
  }
  curves_["unknown"] = derive(unknown_power_spec());
}

const GpuPowerSpec& PowerModel::spec(std::string_view type) const {
  const std::string want = lower(type);
  for (const GpuPowerSpec& s : builtin_power_specs()) {
    if (lower(s.type) == want) return s;
  }
  // Spellings hardware and clusters use (A100-SXM4-80GB, H100 80GB HBM3, Tesla V100-SXM2-16GB).
  const std::vector<std::pair<std::string, std::string>> contains = {
      {"h200", "H200"}, {"h100", "H100"},       {"a100", "A100-40G"}, {"a40", "A40"},
      {"a10", "A10"},   {"v100", "V100"},       {"p100", "P100"},     {"k80", "K80"},
      {"t4", "T4"},     {"rtx6000", "RTX6000"}, {"l40s", "L40S"},     {"gb200", "GB200"},
      {"b200", "B200"}, {"mi300x", "MI300X"},
  };
  for (const auto& [needle, name] : contains) {
    if (want.find(needle) == std::string::npos) continue;
    if (name == "A100-40G" && want.find("80g") != std::string::npos) return spec("A100-80G");
    return spec(name);
  }
  return unknown_power_spec();
}

std::string PowerModel::workload_of(std::string_view model) {
  const std::string m = lower(model);
  if (m.empty()) return "";
  if (m.find("resnet50") != std::string::npos || m.find("imagenet") != std::string::npos) {
    return "resnet50";
  }
  if (m.find("shufflenet") != std::string::npos || m.find("cifar") != std::string::npos) {
    return "shufflenetv2";
  }
  if (m.find("deepspeech") != std::string::npos) return "deepspeech2";
  if (m.find("ncf") != std::string::npos || m.find("recommendation") != std::string::npos ||
      m.find("movielens") != std::string::npos) {
    return "ncf";
  }
  if (m.find("bert") != std::string::npos) return "bert";
  return "";
}

const PowerModel::TypeCurves& PowerModel::curves_of(const GpuPowerSpec& spec) const {
  auto it = curves_.find(spec.type);
  if (it == curves_.end()) it = curves_.find("unknown");
  return it->second;
}

const PowerCurve& PowerModel::curve(std::string_view type, std::string_view workload) const {
  const TypeCurves& c = curves_of(spec(type));
  auto it = c.find(std::string(workload));
  if (it == c.end()) it = c.find("");
  return it->second;
}

std::vector<std::string> PowerModel::workloads() const {
  std::vector<std::string> out;
  for (const auto& [type, curves] : curves_) {
    for (const auto& [k, c] : curves) {
      if (!k.empty() && std::find(out.begin(), out.end(), k) == out.end()) out.push_back(k);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

BoundPowerModel::BoundPowerModel(const PowerModel& model, const GpuTypeTable& types,
                                 const std::vector<std::string>& model_names) {
  std::vector<std::string> keys = {""};
  for (const std::string& name : model_names) {
    const std::string k = PowerModel::workload_of(name);
    auto it = std::find(keys.begin(), keys.end(), k);
    workload_.push_back(static_cast<uint32_t>(it - keys.begin()));
    if (it == keys.end()) keys.push_back(k);
  }
  for (GpuTypeId t = 0; t < types.size(); ++t) {
    const std::string& name = types.at(t).name;
    specs_.push_back(&model.spec(name));
    std::vector<const PowerCurve*> row;
    for (const std::string& k : keys) row.push_back(&model.curve(name, k));
    table_.push_back(std::move(row));
  }
}

const PowerCurve& BoundPowerModel::curve(GpuTypeId t, uint32_t model) const {
  const uint32_t col = model < workload_.size() ? workload_[model] : 0;
  return *table_.at(t)[col];
}

}  // namespace tessera
