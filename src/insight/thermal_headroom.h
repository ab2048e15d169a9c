// Thermal headroom from temperature readings (docs/energy.md): how many watts
// above idle a host's GPUs can draw, in steady state, without a GPU passing a temperature limit.
//
// The model is the usual first-order one: in steady state a GPU sits at
//     T = T_inlet + R × P
// where P is its power draw and R its thermal resistance to the inlet air (°C/W). R is what
// cooling and placement in the rack decide: a GPU in a hot spot (poor airflow, a hot aisle)
// has a larger R. One reading (T, P) gives R = (T - T_inlet) / P, and the most the GPU can
// draw and stay at or below the limit is P_max = (T_limit - T_inlet) / R. Its headroom above
// idle is min(P_max, TDP) - idle (0 when P_max is below idle). A host's headroom is the sum over
// its GPUs: the engine's thermal check (PowerView::node_headroom_w) is per node, so a hot GPU
// beside cool ones lowers the node's budget rather than steering work off that one GPU.
//
// Temperature lags power by tens of seconds, so just after a job starts R reads low and the
// headroom high; the next reading corrects it. A GPU whose reading cannot give R (no
// temperature or draw reported, or a temperature within 2 °C of the inlet, where R is mostly
// noise) is not constrained: it counts its whole TDP - idle.
#pragma once

#include <vector>

namespace tessera {

struct GpuThermalReading {
  double temperature_c = -1;  // -1: not reported
  double draw_w = -1;         // -1: not reported
  double idle_w = 0;          // the GPU type's idle power and TDP (the power model's)
  double tdp_w = 0;
};

// One GPU's headroom above idle (W) under `limit_c` with inlet air at `inlet_c`.
double gpu_thermal_headroom_w(const GpuThermalReading& g, double limit_c, double inlet_c);

// The sum over a host's GPUs.
double thermal_headroom_w(const std::vector<GpuThermalReading>& gpus, double limit_c,
                          double inlet_c);

}  // namespace tessera
