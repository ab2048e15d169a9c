#include "engine/stages/power_stage.h"

#include <cmath>

namespace tessera {

PowerStage::PowerStage(CycleSession& s, Placer& placer)
    : s_(s), placer_(placer), ledger_(*s.snap.power, s.cluster, s.policy.power_shifting) {
  for (size_t i = 0; i < s_.snap.running.size(); ++i) {
    const RunningJob& r = s_.snap.running[i];
    ledger_.add(r.id, *r.spec, *r.alloc, r.power_limit_w,
                preferred_limit(*s_.snap.power, s_.cluster, *r.spec, *r.alloc,
                                energy_weight(s_.running_leaf(i))));
  }
}

std::optional<bool> PowerStage::try_place_cool(const JobSpec& job, Allocation& alloc) {
  auto cool = thermal_restriction(job);
  if (!cool) return std::nullopt;
  // Nodes without the thermal headroom for its members are out of bounds for it.
  JobSpec& restricted = thermal_job_;
  restricted = job;
  restricted.eligible_nodes = std::move(cool);
  return placer_.try_place(restricted, alloc);
}

void PowerStage::too_hot(PendingReason& reason) const {
  reason.code = PendingCode::kPowerCapped;
  reason.node = hot_node_;
  reason.power_cap_w = s_.snap.power->node_headroom_w[hot_node_];
  reason.power_need_w = ledger_.node_draw_w(hot_node_) + hot_need_w_;
}

void PowerStage::started() {
  start_holder_.push_back(admitted_holder_);
  admitted_holder_ = kNoHolder;
}

// After a rack or node power cap refused `job`'s placement: places it again without the
// nodes of the racks and nodes that refused it, up to 4 times, and admits it. On success
// `alloc` holds the committed placement; on failure `reason` says why it waits.
bool PowerStage::place_away_from_caps(const PendingJob& pj, const JobSpec& job, Allocation& alloc,
                                      PendingReason& reason) {
  std::vector<bool> banned(s_.cluster.nodes().size(), false);
  for (int attempt = 0; attempt < 4; ++attempt) {
    if (reason.rack != kNoId && reason.rack < s_.cluster.racks().size()) {
      const Rack& r = s_.cluster.racks()[reason.rack];
      for (NodeId n = r.first_node; n < r.first_node + r.num_nodes; ++n) banned[n] = true;
    } else if (reason.node != kNoId && reason.node < banned.size()) {
      banned[reason.node] = true;
    } else {
      return false;  // the cluster's own cap: no placement helps
    }
    JobSpec& away = thermal_job_;
    away = job;
    away.eligible_nodes = eligible_where(job, [&](NodeId n) { return !banned[n]; });
    Allocation again;
    if (!placer_.try_place(away, again)) return false;
    if (s_.over_type_limit(s_.current_leaf, again) != kNoId) {
      s_.scratch.release(again);
      return false;
    }
    PendingReason why = reason;
    why.rack = kNoId;
    why.node = kNoId;
    if (admit(pj, again, why)) {
      alloc = std::move(again);
      return true;
    }
    s_.scratch.release(again);
    reason = why;
  }
  return false;
}

// ---- thermal headroom ----

// What one member of `job` would draw above idle on node n (at its preferred limit there).
double PowerStage::member_draw_w(const JobSpec& job, NodeId n) const {
  const PowerView& v = *s_.snap.power;
  const GpuTypeId t = s_.cluster.node(n).gpu_type;
  const double limit =
      preferred_limit_on(v, t, job.model, energy_weight(s_.shares.leaf_of(job.tenant)));
  return gpu_increment(v, t, job.model, limit) * job.demand.gpus *
         static_cast<double>(job.demand.gpu_milli) / kMilliPerGpu;
}

// The nodes `job` may use given thermal headroom, when some node it could otherwise use lacks
// the headroom for one of its members; null when none is excluded (or no headroom is set).
// Sets hot_node_ / hot_need_w_ to one excluded node, for the pending reason.
std::shared_ptr<const NodeSet> PowerStage::thermal_restriction(const JobSpec& job) {
  if (s_.snap.power->node_headroom_w.empty()) return nullptr;
  const std::vector<double>& room = s_.snap.power->node_headroom_w;
  if (hot_nodes_.empty()) {
    for (NodeId n = 0; n < room.size(); ++n) {
      if (room[n] >= 0) hot_nodes_.push_back(n);
    }
  }
  auto lacks = [&](NodeId n) {
    return room[n] >= 0 && room[n] - ledger_.node_draw_w(n) < member_draw_w(job, n) - 1e-9;
  };
  bool any = false;
  for (NodeId n : hot_nodes_) {
    if (job.eligible_nodes != nullptr && !job.eligible_nodes->contains(n)) continue;
    if (lacks(n)) {
      any = true;
      hot_node_ = n;
      hot_need_w_ = member_draw_w(job, n);
      break;
    }
  }
  if (!any) return nullptr;
  return eligible_where(job, [&](NodeId n) { return !lacks(n); });
}

// The nodes `job` may use (its own restriction, if any) for which `keep` holds.
template <class Keep>
std::shared_ptr<const NodeSet> PowerStage::eligible_where(const JobSpec& job, Keep&& keep) const {
  return std::make_shared<const NodeSet>(
      NodeSet::matching(s_.cluster.nodes().size(), [&](NodeId n) {
        return (job.eligible_nodes == nullptr || job.eligible_nodes->contains(n)) && keep(n);
      }));
}

double PowerStage::energy_weight(QueueId leaf) const {
  const double own = leaf < s_.tree.size() ? s_.tree.queue(leaf).energy_weight : kUnknown;
  return own >= 0 ? own : s_.snap.power->default_energy_weight;
}

// Whether `job` may start on `alloc` under the power caps (lowering limits when the policy
// shifts them); on success the next start recorded (started()) takes the ledger's holder; on
// failure `reason` says which cap.
bool PowerStage::admit(const PendingJob& pj, const Allocation& alloc, PendingReason& reason) {
  const double want = preferred_limit(*s_.snap.power, s_.cluster, *pj.spec, alloc,
                                      energy_weight(s_.shares.leaf_of(pj.spec->tenant)));
  const size_t h = ledger_.add(pj.id, *pj.spec, alloc, want, want);
  if (!ledger_.admit(h, reason)) return false;
  admitted_holder_ = h;
  return true;
}

// After every start: raise lowered limits within the caps, and report each start's limit and
// each running job's changed one.
void PowerStage::settle() {
  ledger_.restore();
  for (size_t k = 0; k < s_.out.starts.size(); ++k) {
    if (k < start_holder_.size() && start_holder_[k] != kNoHolder) {
      s_.out.starts[k].power_limit_w = ledger_.limit(start_holder_[k]);
    }
  }
  for (size_t i = 0; i < s_.snap.running.size(); ++i) {
    if (s_.evicted(i)) continue;
    const RunningJob& r = s_.snap.running[i];
    const double was = r.power_limit_w > 0 ? r.power_limit_w : default_limit(i);
    if (std::abs(ledger_.limit(i) - was) > 1e-6) {
      s_.out.power_limits.push_back(PowerLimit{r.id, ledger_.limit(i)});
    }
  }
}

double PowerStage::default_limit(size_t running) const {
  const Allocation& a = *s_.snap.running[running].alloc;
  const GpuTypeId t = a.member_node.empty() ? 0 : s_.cluster.node(a.member_node.front()).gpu_type;
  return s_.snap.power->model->spec(t).tdp_w;
}

}  // namespace tessera
