// Power policies in serve (docs/energy.md): the power view the engine's cycle
// sees (a cap on this host's estimated draw, the energy knob), each job's GPU power limit as
// the cycle sets it, and, with --apply-power-limits, those limits applied to real GPUs.
#include <fmt/format.h>
#include <algorithm>
#include <cctype>
#include <cmath>
#include <iostream>
#include <stdexcept>

#include "control/serve/job.h"
#include "control/serve/service.h"
#include "insight/power_cap.h"

namespace tessera {

void Service::setup_power() {
  const bool cap = !opt_.power_cap.empty();
  check_power_policy_flags(cap, opt_.power_shifting, opt_.energy_weight, policy_.elastic);
  policy_.power_shifting = opt_.power_shifting;
  bound_power_.emplace(*power_, cluster_.gpu_types(), std::vector<std::string>{});
  power_view_.model = &*bound_power_;
  power_view_.default_energy_weight = opt_.energy_weight;
  power_view_.idle_w = cluster_idle_draw_w(cluster_, *power_, opt_.node_power_w);
  if (cap) {
    const double peak = cluster_peak_draw_w(cluster_, *power_, opt_.node_power_w);
    try {
      power_view_.cap_w = parse_power_cap(opt_.power_cap, peak);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(std::string("--power-cap: ") + e.what());
    }
    if (power_view_.cap_w < power_view_.idle_w) {
      throw std::invalid_argument(fmt::format(
          "--power-cap: {:.3f} kW is below this host's idle draw of {:.3f} kW (--node-power and "
          "every GPU idle): nothing could ever run",
          power_view_.cap_w / 1000, power_view_.idle_w / 1000));
    }
  }
  const bool thermal = opt_.thermal_limit_c > 0;
  if (thermal) {
    if (!real_gpus_) {
      throw std::invalid_argument(
          "--thermal-limit: this server schedules virtual GPUs (nvidia-smi reported none), so "
          "there are no temperatures to read");
    }
    if (!(opt_.thermal_limit_c <= 120)) {
      throw std::invalid_argument(
          "--thermal-limit must be a GPU temperature in °C, at most 120 (GPUs slow down near "
          "85-90 °C)");
    }
    if (!(opt_.inlet_temp_c < opt_.thermal_limit_c)) {
      throw std::invalid_argument(
          fmt::format("--inlet-temp ({:g} °C) must be below --thermal-limit ({:g} °C)",
                      opt_.inlet_temp_c, opt_.thermal_limit_c));
    }
  } else if (opt_.thermal_limit_c < 0) {
    throw std::invalid_argument("--thermal-limit must be a temperature above 0 °C");
  }
  power_policies_ = cap || thermal || opt_.energy_weight > 0;
  for (QueueId q = 0; q < tree_template_.size(); ++q) {
    power_policies_ = power_policies_ || tree_template_.queue(q).energy_weight > 0;
  }
  if (power_policies_) {
    for (const Node& n : cluster_.nodes()) {
      const std::string& type = cluster_.gpu_types().at(n.gpu_type).name;
      if (has_power_figures(*power_, type)) continue;
      throw std::invalid_argument(
          std::string(cap       ? "--power-cap"
                      : thermal ? "--thermal-limit"
                                : "--energy-weight (or a queue's energy_weight)") +
          ": GPU type '" + type +
          "' has no power figures, so no draw or power limit can be estimated for it" +
          (real_gpus_ ? std::string()
                      : std::string("; give virtual GPUs a type with --virtual-gpu-type (e.g. "
                                    "V100)")));
    }
  }
  if (opt_.apply_power_limits) {
    if (!real_gpus_) {
      throw std::invalid_argument(
          "--apply-power-limits: this server schedules virtual GPUs (nvidia-smi reported none), "
          "so there is no power limit to set; without the flag limits are advisory (recorded "
          "and reported)");
    }
    if (!opt_.root) {
      throw std::invalid_argument(
          "--apply-power-limits needs root: `nvidia-smi -pl` changes a GPU's power limit only "
          "for root; run the server as root, or without the flag (limits are then advisory)");
    }
    try {
      gpu_limits_ = power_limits(opt_.nvidia_smi,
                                 opt_.run_command ? opt_.run_command : CommandRunner(run_command));
    } catch (const std::exception& e) {
      throw std::runtime_error(std::string("--apply-power-limits: ") + e.what());
    }
  }
}

double Service::energy_weight_locked(TenantId t) const {
  const QueueId leaf = tree_ ? tree_->leaf_of(t) : kNoId;
  const double own = leaf == kNoId ? kUnknown : tree_->queue(leaf).energy_weight;
  return own >= 0 ? own : opt_.energy_weight;
}

double Service::tdp_of(const Allocation& a) const {
  if (a.member_node.empty()) return 0;
  return bound_power_->spec(cluster_.node(a.member_node.front()).gpu_type).tdp_w;
}

std::string Service::start_limit_why_locked(const Job& j, double limit_w) const {
  if (!power_policies_ || limit_w <= 0) return "";
  const double eta = energy_weight_locked(j.spec.tenant);
  const double preferred = preferred_limit(power_view_, cluster_, j.spec, j.alloc, eta);
  if (limit_w < preferred - 0.5) return "power cap";
  return fmt::format("energy weight {:g}", eta);
}

double Service::run_joules_locked(const Job& j, double t) const {
  if (j.run.job == 0) return 0;
  return j.run_joules + j.run.gpu_watts * std::max(0.0, t - std::max(j.power_since, j.run.started));
}

void Service::set_power_limit_locked(Job& j, double limit_w, double t, std::string why) {
  const double tdp = tdp_of(j.alloc);
  if (limit_w >= tdp - 0.5) limit_w = 0;  // the default
  if (j.run.job != 0) {
    j.run_joules = run_joules_locked(j, t);
    j.power_since = t;
    j.run.gpu_watts = run_gpu_watts(*power_, j.run.gpu_milli, limit_w);
  }
  j.row.power_limit_w = limit_w;
  j.power_why = std::move(why);
}

void Service::apply_gpu_power_limits_locked() {
  if (!opt_.apply_power_limits || gpu_limits_.empty()) return;
  std::map<int, double> want;  // host GPU index -> the lowest limit a holder runs at
  for (const auto& [id, jp] : active_) {
    const double limit = jp->row.power_limit_w;
    if (limit <= 0) continue;
    for (const GpuShare& g : jp->alloc.shares) {
      const int index = gpu_index_[g.gpu];
      const auto [it, added] = want.emplace(index, limit);
      if (!added) it->second = std::min(it->second, limit);
    }
  }
  const CommandRunner& run = opt_.run_command ? opt_.run_command : CommandRunner(run_command);
  for (auto& [index, g] : gpu_limits_) {
    const auto w = want.find(index);
    double target = w != want.end() ? w->second : g.default_w;
    if (target <= 0) continue;  // no default reported: nothing to restore to
    if (g.min_w > 0) target = std::max(target, g.min_w);
    if (g.max_w > 0) target = std::min(target, g.max_w);
    target = std::round(target);
    if (g.limit_w >= 0 && std::abs(target - g.limit_w) < 0.5) continue;
    const std::vector<std::string> cmd = set_power_limit_command(opt_.nvidia_smi, index, target);
    const CommandResult r = run(cmd);
    if (r.exit_code == 0) {
      g.limit_w = target;
      gpu_limit_failing_.erase(index);
      continue;
    }
    if (gpu_limit_failing_.insert(index).second) {
      std::string line;
      for (const std::string& a : cmd) line += (line.empty() ? "" : " ") + a;
      std::string out = r.output;
      while (!out.empty() && std::isspace(static_cast<unsigned char>(out.back()))) out.pop_back();
      std::cerr << "tessera serve: cannot set GPU " << index << "'s power limit (" << line
                << " exited with " << r.exit_code << ": " << out
                << "); its jobs' limit stays advisory until it succeeds\n";
    }
  }
}

}  // namespace tessera
