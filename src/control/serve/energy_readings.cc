// Energy in serve (control/energy.h): the GPUs' power as nvidia-smi reads it, and the
// energy and power gauges of /metrics.
#include <algorithm>
#include <iostream>

#include "backend/nvidia_smi.h"
#include "control/serve/job.h"
#include "control/serve/service.h"
#include "insight/thermal_headroom.h"

namespace tessera {

void Service::read_gpu_power_if_due() {
  if (!real_gpus_ || opt_.power_read_interval_seconds <= 0) return;
  const double t = now();
  if (last_power_read_ >= 0 && t - last_power_read_ < opt_.power_read_interval_seconds) return;
  last_power_read_ = t;
  read_gpu_power();
}

void Service::read_gpu_power() {
  if (!real_gpus_) return;
  std::map<int32_t, double> draw, temperature;
  try {
    for (const GpuReading& g : query_gpus(opt_.nvidia_smi)) {
      if (g.power_draw_w >= 0) draw[g.index] = g.power_draw_w;
      if (g.temperature_c >= 0) temperature[g.index] = g.temperature_c;
    }
    power_read_failing_ = false;
  } catch (const std::exception& e) {
    // The estimates stand in until it reads again.
    if (!power_read_failing_) {
      std::cerr << "tessera serve: cannot read the GPUs' power (" << e.what()
                << "); reporting estimates\n";
    }
    power_read_failing_ = true;
  }
  std::lock_guard lock(mu_);
  measured_w_ = std::move(draw);
  measured_c_ = std::move(temperature);
  if (opt_.thermal_limit_c > 0) {
    const double was = thermal_headroom_w_;
    thermal_headroom_w_ = thermal_headroom_locked();
    // More headroom may start what waits for it (less is only checked at the next start).
    if (thermal_headroom_w_ > was + 1) {
      dirty_ = true;
      wake_.notify_all();
    }
  }
}

double Service::thermal_headroom_locked() const {
  std::vector<GpuThermalReading> gpus;
  for (const NodeView& n : nodes_locked()) {
    const GpuPowerSpec& spec = power_->spec(n.gpu_type);
    for (const GpuView& g : n.gpus) {
      GpuThermalReading r;
      r.idle_w = spec.idle_w;
      r.tdp_w = spec.tdp_w;
      if (const auto t = measured_c_.find(g.index); t != measured_c_.end())
        r.temperature_c = t->second;
      if (const auto w = measured_w_.find(g.index); w != measured_w_.end()) r.draw_w = w->second;
      gpus.push_back(r);
    }
  }
  return thermal_headroom_w(gpus, opt_.thermal_limit_c, opt_.inlet_temp_c);
}

void Service::energy_metrics_locked(ServiceMetrics& m, double t) const {
  m.energy = true;
  std::map<std::string, double> live;
  for (const auto& [id, jp] : active_) {
    const RunRecord& r = jp->run;
    if (r.job == 0) continue;
    const double joules = run_joules_locked(*jp, t);
    if (joules > 0) live[r.tenant] += joules;
  }
  m.energy_joules = energy_.read(live);
  for (const ServiceMetrics::Tenant& tn : m.tenants) m.energy_joules.try_emplace(tn.name, 0.0);
  double gpus_w = 0;
  for (const NodeView& n : nodes_locked()) {
    // serve is one host: the headroom is its node's.
    if (opt_.thermal_limit_c > 0 && thermal_headroom_w_ >= 0) {
      m.thermal_headroom_w[n.name] = thermal_headroom_w_;
    }
    for (const GpuView& g : n.gpus) {
      ServiceMetrics::GpuPower p{n.name, g.index, 0, false};
      if (const auto c = measured_c_.find(g.index); c != measured_c_.end()) {
        p.temperature_c = c->second;
      }
      const auto measured = measured_w_.find(g.index);
      if (measured != measured_w_.end()) {
        p.watts = measured->second;
        p.measured = true;
      } else {
        // Each holder at its power limit (the TDP unless a power policy set one).
        std::vector<std::pair<int32_t, double>> held;
        for (const GpuHolder& h : g.holders) {
          if (h.milli <= 0) continue;
          const auto it = jobs_.find(h.job);
          held.emplace_back(h.milli, it != jobs_.end() ? it->second->row.power_limit_w : 0.0);
        }
        p.watts = estimated_gpu_draw(*power_, n.gpu_type, held);
      }
      gpus_w += p.watts;
      m.gpu_power.push_back(std::move(p));
    }
  }
  m.power_watts = (gpus_w + opt_.node_power_w) * opt_.pue;
}

}  // namespace tessera
