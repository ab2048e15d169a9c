#include "apps/energy_options.h"

#include <fmt/format.h>

#include <iostream>

#include "apps/data_dir.h"
#include "insight/power_cap.h"
#include "insight/zeus_curves.h"
#include "sim/simulator.h"

namespace tessera {

void add_energy_options(CLI::App& s, EnergyArgs& a) {
  s.add_option("--node-power", a.node_power_w,
               "each node's draw besides its GPUs, in W (CPU, memory, fans; default: the cluster "
               "file's power.node_watts, else 0: not counted)")
      ->check(CLI::NonNegativeNumber);
  s.add_option("--pue", a.pue,
               "power usage effectiveness: facility energy / IT energy (>= 1; default: the "
               "cluster file's power.pue, else 1)")
      ->check(CLI::Range(1.0, 10.0));
  CLI::Option* cap = s.add_option(
      "--power-cap", a.power_cap,
      "cap on the cluster's estimated IT draw: kW, or a percentage of its peak draw (70%); "
      "default: the cluster file's power.cap_kw (its rack caps and thermal headroom always "
      "apply)");
  s.add_flag("--power-shifting", a.power_shifting,
             "under --power-cap, lower jobs' GPU power limits (least speed lost per watt first) "
             "before holding jobs; without it jobs wait until power frees")
      ->needs(cap);
  s.add_option("--energy-weight", a.energy_weight,
               "Zeus's energy knob for queues that set no energy_weight: 0 runs jobs at full "
               "power, 1 at the power limit that spends least energy per unit of work")
      ->check(CLI::Range(0.0, 1.0));
  s.add_option("--energy-price", a.energy_price, "price per kWh, for the energy cost in --json")
      ->check(CLI::NonNegativeNumber);
  s.add_option("--carbon", a.carbon,
               "hourly carbon intensity CSV (time,g_per_kwh; its first row is the trace's time 0 "
               "and it repeats): carbon per tenant in --json, and best-effort jobs of queues "
               "with carbon_defer wait for cleaner hours")
      ->check(CLI::ExistingFile);
  CLI::Option* sleep =
      s.add_option("--node-sleep-after", a.sleep_after_s,
                   "power nodes down once nothing has run on them for this many seconds (they "
                   "draw nothing asleep); bin-packing placement (bestfit) keeps whole nodes idle")
          ->check(CLI::NonNegativeNumber);
  s.add_option("--node-wake", a.wake_s,
               "seconds a sleeping node takes to wake: a job placed on it begins that much later "
               "(default 300)")
      ->check(CLI::NonNegativeNumber)
      ->needs(sleep);
}

EnergySettings energy_settings(const EnergyArgs& a, const Cluster& c, const PowerModel& m) {
  EnergySettings s;
  const ClusterPower& file = c.power();
  s.node_base_w = a.node_power_w >= 0 ? a.node_power_w : std::max(0.0, file.node_base_w);
  s.pue = a.pue >= 0 ? a.pue : (file.pue >= 1 ? file.pue : 1.0);
  if (file.cap_w > 0) s.cap_w = file.cap_w;
  for (double r : file.rack_cap_w) s.rack_cap_w.push_back(r >= 0 ? r : kNoPowerCap);
  s.node_headroom_w = file.node_headroom_w;
  s.energy_weight = a.energy_weight;
  s.price_per_kwh = a.energy_price;
  s.sleep_after_s = a.sleep_after_s;
  s.wake_s = a.wake_s;
  if (!a.power_cap.empty()) {
    const double base = s.node_base_w * static_cast<double>(c.nodes().size());
    try {
      s.cap_w = parse_power_cap(a.power_cap, cluster_peak_draw_w(c, m, base));
    } catch (const std::invalid_argument& e) {
      throw CLI::ValidationError("--power-cap", e.what());
    }
    const double idle = cluster_idle_draw_w(c, m, base);
    if (s.cap_w < idle) {
      throw CLI::ValidationError(
          "--power-cap",
          fmt::format("{:.1f} kW is below the cluster's idle draw of {:.1f} kW: nothing could "
                      "ever run",
                      s.cap_w / 1000, idle / 1000));
    }
  }
  return s;
}

nlohmann::ordered_json energy_run_json(const EnergyArgs& a, const EnergySettings& s,
                                       const PowerModel& m) {
  nlohmann::ordered_json j;
  j["curves"] = m.measured() ? "measured (Zeus)" : "flat at TDP (no Zeus data)";
  j["node_power_watts"] = s.node_base_w;
  j["pue"] = s.pue;
  j["power_cap"] =
      a.power_cap.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(a.power_cap);
  j["power_cap_watts"] =
      s.cap_w < kNoPowerCap ? nlohmann::ordered_json(s.cap_w) : nlohmann::ordered_json();
  j["power_shifting"] = a.power_shifting;
  j["energy_weight"] = a.energy_weight;
  j["energy_price_per_kwh"] = a.energy_price;
  j["node_sleep_after_seconds"] =
      a.sleep_after_s >= 0 ? nlohmann::ordered_json(a.sleep_after_s) : nlohmann::ordered_json();
  j["node_wake_seconds"] = a.wake_s;
  j["carbon"] = a.carbon.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(a.carbon);
  return j;
}

std::shared_ptr<const PowerModel> load_service_power_model(const std::string& given,
                                                           const std::string& command) {
  const std::string data = data_dir_or_default(given);
  auto model = std::make_shared<const PowerModel>(load_power_model(data));
  if (!model->measured()) {
    std::cerr << "tessera " << command << ": no Zeus power data in " << data
              << "/energy/zeus: GPU power is estimated at each type's TDP\n";
  }
  return model;
}

}  // namespace tessera
