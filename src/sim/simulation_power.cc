// Power and energy in the simulation (sim/simulation.h; docs/energy.md): the power model bound
// to the cluster and workload, each job's power limit, speed and draw, the cluster's energy
// integrated over time, and node sleep and wake (EnergySettings::sleep_after_s).
#include "sim/simulation.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

namespace tessera::sim_detail {

// ---- power and energy (docs/energy.md) ----

// Adds [from, to) at the current draws to the energy series' buckets.
void Simulation::integrate_series(double from, double to, double draw) {
  EnergyStats& e = result_.energy;
  const double dt = e.series_interval;
  while (from < to) {
    const auto b = static_cast<size_t>((from - result_.first_submit) / dt);
    const double end = std::min(to, result_.first_submit + static_cast<double>(b + 1) * dt);
    if (e.it_series_j.size() <= b) {
      e.it_series_j.resize(b + 1, 0.0);
      e.busy_series_j.resize(b + 1, 0.0);
      e.slept_series_j.resize(b + 1, 0.0);
    }
    e.it_series_j[b] += draw * (end - from);
    e.busy_series_j[b] += busy_w_ * (end - from);
    e.slept_series_j[b] += asleep_w_ * (end - from);
    from = end > from ? end : to;
  }
}

void Simulation::setup_power() {
  std::vector<std::string> models;
  for (uint32_t m = 0; m < w_.models.size(); ++m) models.push_back(w_.models.name(m));
  bound_.emplace(*opt_.power, c_.gpu_types(), models);
  view_.model = &*bound_;
  view_.cap_w = opt_.energy.cap_w;
  view_.default_energy_weight = opt_.energy.energy_weight;
  view_.node_headroom_w = opt_.energy.node_headroom_w;
  if (!view_.node_headroom_w.empty()) view_.node_headroom_w.resize(c_.nodes().size(), -1.0);
  const size_t racks = c_.racks().size();
  view_.rack_idle_w.assign(racks, 0.0);
  for (const Node& n : c_.nodes()) {
    const double idle = opt_.energy.node_base_w + n.num_gpus * bound_->spec(n.gpu_type).idle_w;
    view_.idle_w += idle;
    view_.rack_idle_w[n.rack] += idle;
  }
  if (!opt_.energy.rack_cap_w.empty()) {
    view_.rack_cap_w = opt_.energy.rack_cap_w;
    view_.rack_cap_w.resize(racks, kNoPowerCap);
  } else {
    view_.rack_idle_w.clear();
  }
  power_policies_ = opt_.energy.policies();
  for (QueueId q = 0; q < tree_.size(); ++q) {
    power_policies_ = power_policies_ || tree_.queue(q).energy_weight > 0;
  }
  if (power_policies_) {
    for (const JobSpec& s : w_.jobs) {
      if (auto why = power_infeasible_reason(view_, c_, s)) {
        throw std::invalid_argument(s.source + ": job " + s.name +
                                    " can never run under the power cap: " + *why);
      }
    }
  }
  result_.energy.series_interval = opt_.series_interval > 0 ? opt_.series_interval : 3600.0;
  node_asleep_.assign(c_.nodes().size(), false);
  node_gen_.assign(c_.nodes().size(), 0);
  result_.energy.modelled = true;
  result_.energy.carbon = opt_.carbon != nullptr;
  result_.energy.pue = opt_.energy.pue;
  result_.energy.price_per_kwh = opt_.energy.price_per_kwh;
  result_.energy.cap_w = opt_.energy.cap_w;
  result_.energy.idle_w = view_.idle_w;
  result_.energy.peak_w = view_.idle_w;
}

// The GPU type whose curve a job's placement uses (that of its first member's node).
GpuTypeId Simulation::type_of(const Allocation& a) const {
  return a.member_node.empty() ? 0 : c_.node(a.member_node.front()).gpu_type;
}

// Sets j's power state for its allocation and limit (not yet drawing).
void Simulation::price_power(JobId j) {
  JobState& js = jobs_[j];
  if (!bound_) return;
  const JobSpec& s = w_.jobs[j];
  const GpuTypeId t = type_of(js.alloc);
  const GpuPowerSpec& spec = bound_->spec(t);
  const PowerCurve& curve = bound_->curve(t, s.model);
  const double limit = js.limit_w > 0 ? js.limit_w : spec.tdp_w;
  js.power_speed = curve.speed(limit);
  const double gpus = run_gpus(js);
  js.draw_w = curve.power(limit) * gpus;
  js.inc_w = gpu_increment(view_, t, s.model, limit) * gpus;  // as the engine counts it
}

// j starts or stops counting in the cluster's draw.
void Simulation::set_drawing(JobId j, bool on) {
  JobState& js = jobs_[j];
  if (!bound_ || js.drawing == on) return;
  js.drawing = on;
  holding_w_ += on ? js.inc_w : -js.inc_w;
  busy_w_ += on ? js.draw_w : -js.draw_w;
  if (js.limit_w > 0 && js.limit_w < preferred_w(j) - 1e-6) {
    throttled_gpus_ += (on ? 1 : -1) * run_gpus(js);
  }
}

double Simulation::preferred_w(JobId j) const {
  const JobState& js = jobs_[j];
  const QueueId leaf = tree_.leaf_of(w_.jobs[j].tenant);
  const double own = leaf == kNoId ? kUnknown : tree_.queue(leaf).energy_weight;
  return preferred_limit(view_, c_, w_.jobs[j], js.alloc,
                         own >= 0 ? own : opt_.energy.energy_weight);
}

void Simulation::account_energy(JobId j, double joules, double grams) {
  result_.jobs[j].gpu_energy_j += joules;
  result_.tenants[w_.jobs[j].tenant].gpu_energy_j += joules;
  result_.energy.gpu_busy_j += joules;
  result_.jobs[j].gpu_carbon_g += grams;
  result_.tenants[w_.jobs[j].tenant].gpu_carbon_g += grams;
  result_.energy.busy_carbon_g += grams;
}

// A running job's power limit changes: its work so far is accounted at the old speed, the
// rest runs at the new one (no restart: nvidia-smi -pl applies to a running process).
void Simulation::set_limit(JobId j, double limit_w) {
  JobState& js = jobs_[j];
  if (js.phase != Phase::kRunning) return;
  rerate(j, [&] {
    const double base_speed = js.speed / js.power_speed;
    js.limit_w = limit_w;
    price_power(j);
    js.speed = base_speed * js.power_speed;
  });
  result_.energy.limit_changes++;
}

void Simulation::rerate(JobId j, const std::function<void()>& change) {
  JobState& js = jobs_[j];
  const bool was = js.drawing;
  set_drawing(j, false);
  if (js.begun) {
    const double done = account_run(j);
    js.remaining = std::max(0.0, js.remaining - done);
    const double restart_left = std::max(0.0, js.restart_cost - (now_ - js.run_start));
    js.run_start = now_;
    js.restart_cost = restart_left;
  }
  change();
  running_.update(running_entry(j));
  js.generation++;
  events_.push(js.run_start + js.restart_cost + js.remaining / js.speed, EventKind::kFinish, j,
               js.generation);
  if (!js.begun) events_.push(js.run_start, EventKind::kBegin, j, js.generation);
  set_drawing(j, was);
}

// ---- node sleep (EnergySettings::sleep_after_s) ----

double Simulation::node_idle_w(NodeId n) const {
  const Node& node = c_.node(n);
  return opt_.energy.node_base_w + node.num_gpus * bound_->spec(node.gpu_type).idle_w;
}

bool Simulation::node_empty(NodeId n) const {
  const Node& node = c_.node(n);
  if (state_.node_free_cpu(n) < node.cpu_milli) return false;
  for (GpuId g = node.first_gpu; g < node.first_gpu + node.num_gpus; ++g) {
    if (state_.gpu_free(g) < kMilliPerGpu) return false;
  }
  return true;
}

// After `a` was released: its nodes that are now empty may sleep after the threshold.
void Simulation::nodes_released(const Allocation& a) {
  if (!sleeping()) return;
  for (NodeId n : a.member_node) {
    if (node_asleep_[n] || down_[n] || !node_empty(n)) continue;
    events_.push(now_ + opt_.energy.sleep_after_s, EventKind::kNodeSleep, n, ++node_gen_[n]);
  }
}

void Simulation::node_sleep(NodeId n, uint32_t generation) {
  if (generation != node_gen_[n] || node_asleep_[n] || down_[n] || !node_empty(n)) return;
  node_asleep_[n] = true;
  asleep_w_ += node_idle_w(n);
  ++asleep_nodes_;
}

// Wakes the sleeping nodes of `a` (and cancels their pending sleep); returns whether any slept.
bool Simulation::wake_nodes(const Allocation& a) {
  if (!sleeping()) return false;
  bool woke = false;
  for (NodeId n : a.member_node) {
    ++node_gen_[n];
    if (!node_asleep_[n]) continue;
    node_asleep_[n] = false;
    asleep_w_ -= node_idle_w(n);
    --asleep_nodes_;
    result_.energy.wakes++;
    woke = true;
  }
  return woke;
}

}  // namespace tessera::sim_detail
