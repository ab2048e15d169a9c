#include "control/energy.h"

#include <algorithm>

namespace tessera {

bool has_power_figures(const PowerModel& model, std::string_view type) {
  return &model.spec(type) != &unknown_power_spec();
}

double estimated_gpu_watts(const PowerModel& model, std::string_view type, double limit_w) {
  if (!has_power_figures(model, type)) return 0;
  const GpuPowerSpec& spec = model.spec(type);
  const double limit = limit_w > 0 ? std::min(limit_w, spec.tdp_w) : spec.tdp_w;
  return std::min(spec.tdp_w, model.curve(type, "").power(limit));
}

double run_gpu_watts(const PowerModel& model, const std::map<std::string, int64_t>& gpu_milli,
                     double limit_w) {
  double w = 0;
  for (const auto& [type, milli] : gpu_milli) {
    w += static_cast<double>(milli) / 1000.0 * estimated_gpu_watts(model, type, limit_w);
  }
  return w;
}

double estimated_gpu_draw(const PowerModel& model, std::string_view type, int32_t held_milli) {
  if (!has_power_figures(model, type)) return 0;
  const GpuPowerSpec& spec = model.spec(type);
  if (held_milli <= 0) return spec.idle_w;
  const double w = static_cast<double>(held_milli) / 1000.0 * estimated_gpu_watts(model, type);
  return std::clamp(w, spec.idle_w, spec.tdp_w);
}

double estimated_gpu_draw(const PowerModel& model, std::string_view type,
                          const std::vector<std::pair<int32_t, double>>& held) {
  if (!has_power_figures(model, type)) return 0;
  const GpuPowerSpec& spec = model.spec(type);
  if (held.empty()) return spec.idle_w;
  double w = 0;
  for (const auto& [milli, limit] : held) {
    w += static_cast<double>(milli) / 1000.0 * estimated_gpu_watts(model, type, limit);
  }
  return std::clamp(w, spec.idle_w, spec.tdp_w);
}

const std::map<std::string, double>& EnergyCounters::read(
    const std::map<std::string, double>& live) {
  std::map<std::string, double> now = ended_;
  for (const auto& [tenant, j] : live) now[tenant] += j;
  for (const auto& [tenant, j] : now) {
    double& shown = shown_[tenant];
    shown = std::max(shown, j);
  }
  return shown_;
}

}  // namespace tessera
