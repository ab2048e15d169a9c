#include "insight/thermal_headroom.h"

#include <algorithm>

namespace tessera {

namespace {
// Below this rise over the inlet a reading says little about R (sensor resolution is 1 °C).
constexpr double kMinRiseC = 2;
}  // namespace

double gpu_thermal_headroom_w(const GpuThermalReading& g, double limit_c, double inlet_c) {
  const double full = std::max(0.0, g.tdp_w - g.idle_w);
  const double rise = g.temperature_c - inlet_c;
  if (g.temperature_c < 0 || g.draw_w <= 0 || rise < kMinRiseC) return full;
  const double r = rise / g.draw_w;  // °C per W
  const double p_max = (limit_c - inlet_c) / r;
  return std::clamp(p_max - g.idle_w, 0.0, full);
}

double thermal_headroom_w(const std::vector<GpuThermalReading>& gpus, double limit_c,
                          double inlet_c) {
  double sum = 0;
  for (const GpuThermalReading& g : gpus) sum += gpu_thermal_headroom_w(g, limit_c, inlet_c);
  return sum;
}

}  // namespace tessera
