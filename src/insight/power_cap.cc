#include "insight/power_cap.h"

#include <stdexcept>

#include "model/csv.h"

namespace tessera {

double parse_power_cap(std::string_view text, double peak_w) {
  std::string_view v = text;
  const bool percent = !v.empty() && v.back() == '%';
  if (percent) v.remove_suffix(1);
  double x = 0;
  if (v.empty() || !csv::parse_double(v, x) || !(x > 0) || (percent && x > 100)) {
    throw std::invalid_argument(
        "expected kW (e.g. 120) or a percentage of the cluster's peak draw (e.g. 70%), got '" +
        std::string(text) + "'");
  }
  return percent ? peak_w * x / 100 : x * 1000;
}

namespace {

double draw_w(const Cluster& c, const PowerModel& m, double base_w, bool peak) {
  double w = base_w;
  for (const Node& n : c.nodes()) {
    const GpuPowerSpec& s = m.spec(c.gpu_types().at(n.gpu_type).name);
    w += n.num_gpus * (peak ? s.tdp_w : s.idle_w);
  }
  return w;
}

}  // namespace

double cluster_peak_draw_w(const Cluster& c, const PowerModel& m, double base_w) {
  return draw_w(c, m, base_w, true);
}

double cluster_idle_draw_w(const Cluster& c, const PowerModel& m, double base_w) {
  return draw_w(c, m, base_w, false);
}

void check_power_policy_flags(bool cap, bool shifting, double energy_weight, bool elastic) {
  if (shifting && !cap) {
    throw std::invalid_argument(
        "--power-shifting needs --power-cap: it lowers jobs' power limits to fit them under the "
        "cap");
  }
  if (!(energy_weight >= 0 && energy_weight <= 1)) {
    throw std::invalid_argument("--energy-weight must be between 0 and 1");
  }
  if (shifting && elastic) {
    throw std::invalid_argument(
        "--power-shifting cannot be combined with elastic resizing: resizes do not account for "
        "power");
  }
}

}  // namespace tessera
