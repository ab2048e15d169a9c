#include "control/kube/power.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "control/energy.h"
#include "control/kube/cluster_model.h"
#include "insight/power_cap.h"

namespace tessera::kube {

void check_power_options(const PowerOptions& o, bool elastic) {
  const bool cap = !o.cap.empty();
  check_power_policy_flags(cap, o.shifting, o.energy_weight, elastic);
  if (!(o.node_power_w >= 0)) throw std::invalid_argument("--node-power must be 0 or more");
  if (cap) {
    // The form only: a percentage's watts depend on the nodes, known once listed.
    try {
      parse_power_cap(o.cap, 1);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(std::string("--power-cap: ") + e.what());
    }
  }
}

KubePower::KubePower(PowerOptions o) : opt_(std::move(o)) {}

void KubePower::rebuild(const ClusterModel& m) {
  const Cluster& c = m.cluster();
  generation_ = m.cluster_generation();
  bound_.emplace(model(), c.gpu_types(), std::vector<std::string>{});
  view_ = PowerView{};
  view_.model = &*bound_;
  view_.default_energy_weight = opt_.energy_weight;
  // Every node the Cluster holds (Ready, not cordoned) has its base power counted.
  const double base = opt_.node_power_w * static_cast<double>(c.nodes().size());
  view_.idle_w = cluster_idle_draw_w(c, model(), base);
  if (!opt_.cap.empty()) {
    view_.cap_w = parse_power_cap(opt_.cap, cluster_peak_draw_w(c, model(), base));
    const bool below = view_.cap_w < view_.idle_w && !c.nodes().empty();
    if (below && !cap_below_idle_said_) {
      std::fprintf(stderr,
                   "tessera kube: --power-cap: %.3f kW is below the cluster's idle draw of %.3f "
                   "kW (--node-power and every GPU idle, %zu nodes): nothing can start until "
                   "nodes leave or the cap is raised\n",
                   view_.cap_w / 1000, view_.idle_w / 1000, c.nodes().size());
    }
    cap_below_idle_said_ = below;
  }
  for (const Node& n : c.nodes()) {
    if (n.num_gpus == 0) continue;
    const std::string& type = c.gpu_types().at(n.gpu_type).name;
    if (has_power_figures(model(), type) || !types_said_.insert(type).second) continue;
    const GpuPowerSpec& s = model().spec(type);
    std::fprintf(stderr,
                 "tessera kube: node %s: GPU type '%s' has no power figures: under the power "
                 "policies its draw is estimated with assumed figures (TDP %.0f W, idle %.0f W), "
                 "not measured ones, and no power limit is written for pods on it (said once "
                 "per type)\n",
                 n.name.c_str(), type.c_str(), s.tdp_w, s.idle_w);
  }
}

const PowerView* KubePower::view(const ClusterModel& m) {
  if (generation_ != m.cluster_generation() || !bound_) rebuild(m);
  const Cluster& c = m.cluster();
  bool headroom = false;
  view_.node_headroom_w.assign(c.nodes().size(), -1.0);
  for (const auto& [name, info] : m.nodes()) {
    if (!info.thermal_headroom_invalid.empty()) {
      auto [it, fresh] = bad_said_.emplace(name, info.thermal_headroom_invalid);
      if (fresh || it->second != info.thermal_headroom_invalid) {
        it->second = info.thermal_headroom_invalid;
        std::fprintf(stderr,
                     "tessera kube: node %s: annotation %s: \"%s\" is not a number of watts; "
                     "ignored (the node is scheduled as if it had none)\n",
                     name.c_str(), kThermalHeadroomAnnotation,
                     info.thermal_headroom_invalid.c_str());
      }
    } else {
      bad_said_.erase(name);
    }
    if (info.thermal_headroom_w < 0) continue;
    const auto id = m.node_id(name);
    if (!id) continue;  // not schedulable now (NotReady, cordoned)
    view_.node_headroom_w[*id] = info.thermal_headroom_w;
    headroom = true;
  }
  if (!headroom) view_.node_headroom_w.clear();
  bool on = !opt_.cap.empty() || opt_.energy_weight > 0 || headroom;
  const QueueTree& tree = m.tree();
  for (QueueId q = 0; q < tree.size() && !on; ++q) on = tree.queue(q).energy_weight > 0;
  return on ? &view_ : nullptr;
}

double KubePower::annotated_limit(const Cluster& c, NodeId node, double limit_w) const {
  if (limit_w <= 0 || node >= c.nodes().size()) return 0;
  const std::string& type = c.gpu_types().at(c.node(node).gpu_type).name;
  if (!has_power_figures(model(), type)) return 0;
  const double w = std::round(limit_w);
  return w < model().spec(type).tdp_w - 0.5 ? w : 0;
}

double KubePower::draw_w(const ClusterModel& m) const {
  const Cluster& c = m.cluster();
  // The holders of each GPU: (milli held, their limit).
  std::vector<std::vector<std::pair<int32_t, double>>> held(c.num_gpus());
  for (const auto& [uid, r] : m.pods()) {
    if (!r.slot) continue;
    const double limit = r.power_limit_w();
    for (const GpuShare& s : r.slot->shares) {
      if (s.gpu < held.size()) held[s.gpu].emplace_back(s.milli, limit);
    }
  }
  double w = opt_.node_power_w * static_cast<double>(c.nodes().size());
  for (const Node& n : c.nodes()) {
    const std::string& type = c.gpu_types().at(n.gpu_type).name;
    for (GpuId g = n.first_gpu; g < n.first_gpu + n.num_gpus; ++g) {
      w += estimated_gpu_draw(model(), type, held[g]);
    }
  }
  return w;
}

std::string reason_words(const PendingReason& r, const Cluster& c, const std::string& text) {
  if (r.code == PendingCode::kCarbonDeferred) {
    // Unix seconds read badly: the times as UTC.
    return fmt::format(
        "carbon: waiting for cleaner electricity: {:.0f} g/kWh if it starts now, {:.0f} g/kWh "
        "from {}; its queue lets it wait until {}",
        r.carbon_now, r.carbon_then, format_time(r.carbon_at), format_time(r.carbon_until));
  }
  if (r.code != PendingCode::kPowerCapped || r.node >= c.nodes().size()) return text;
  std::string out = text;
  const std::string id = "node #" + std::to_string(r.node);
  const size_t at = out.find(id);
  if (at != std::string::npos) out.replace(at, id.size(), "node " + c.node(r.node).name);
  return out;
}

}  // namespace tessera::kube
