// The power and energy options of tessera simulate (docs/energy.md): cluster settings (node
// base power, PUE, energy price), the power cap and how it is honoured, and the energy knob.
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "insight/power_model.h"
#include "model/cluster.h"

namespace tessera {

struct EnergySettings;  // sim/simulator.h

struct EnergyArgs {
  double node_power_w = -1;  // < 0: the cluster file's power.node_watts, else 0
  double pue = -1;           // < 0: the cluster file's power.pue, else 1
  std::string power_cap;     // "KW" or "N%" of the cluster's peak draw; empty: none
  bool power_shifting = false;
  double energy_weight = 0;
  double energy_price = 0;  // per kWh
  double sleep_after_s = -1;
  double wake_s = 300;
  std::string carbon;  // hourly carbon-intensity CSV (its first row is the trace's time 0)
};

void add_energy_options(CLI::App& cmd, EnergyArgs& a);

// serve and kube: the power model from the data dir (`given`, else TESSERA_DATA, else
// ../shared/data), saying on stderr ("tessera COMMAND: no Zeus power data in ...") when it has
// no measurements.
std::shared_ptr<const PowerModel> load_service_power_model(const std::string& given,
                                                           const std::string& command);

// The settings for the simulator; throws CLI::ValidationError for a cap it cannot read (naming
// the option) or one below the cluster's idle draw.
EnergySettings energy_settings(const EnergyArgs& a, const Cluster& c, const PowerModel& m);

// How the run was configured, for the result's "run".
nlohmann::ordered_json energy_run_json(const EnergyArgs& a, const EnergySettings& s,
                                       const PowerModel& m);

}  // namespace tessera
