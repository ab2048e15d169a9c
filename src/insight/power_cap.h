// A power cap as the commands take it (`--power-cap KW|N%`; docs/energy.md): kilowatts,
// or a percentage of the cluster's peak draw (every node's base power plus every GPU at its TDP).
// Shared by `tessera serve` and (to be) `tessera simulate`.
#pragma once

#include <string>
#include <string_view>

#include "insight/power_model.h"
#include "model/cluster.h"

namespace tessera {

// The cap in W: "120" is 120 kW, "70%" is 70 % of `peak_w`. Throws std::invalid_argument
// ("expected kW (e.g. 120) or a percentage of the cluster's peak draw (e.g. 70%), got '...'")
// for anything else, a value not above 0 or a percentage above 100.
double parse_power_cap(std::string_view text, double peak_w);

// The cluster's IT draw with every GPU at its TDP (peak) or idle (idle), plus `base_w`: the
// nodes' base power all together (simulate: per node x nodes; serve: its host's, once).
double cluster_peak_draw_w(const Cluster& c, const PowerModel& m, double base_w);
double cluster_idle_draw_w(const Cluster& c, const PowerModel& m, double base_w);

// What serve and kube refuse of the power flags, in the same words (std::invalid_argument naming
// the flag): --power-shifting without --power-cap, an --energy-weight outside 0..1, shifting
// with elastic resizing.
void check_power_policy_flags(bool cap, bool shifting, double energy_weight, bool elastic);

}  // namespace tessera
