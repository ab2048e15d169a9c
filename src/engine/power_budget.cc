#include "engine/power_budget.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace tessera {

namespace {

constexpr double kEps = 1e-9;

// The GPU type whose curve an allocation uses: that of its first member's node.
GpuTypeId type_of(const Cluster& c, const Allocation& a) {
  return a.member_node.empty() ? 0 : c.node(a.member_node.front()).gpu_type;
}

const PowerCurve& curve_of(const PowerView& v, const Cluster& c, const JobSpec& job,
                           const Allocation& a) {
  return v.model->curve(type_of(c, a), job.model);
}

const GpuPowerSpec& spec_of(const PowerView& v, const Cluster& c, const Allocation& a) {
  return v.model->spec(type_of(c, a));
}

// Adds `g` GPUs to `id`'s entry of a short (id, GPUs) list.
void add_gpus(std::vector<std::pair<uint32_t, double>>& list, uint32_t id, double g) {
  auto it = std::find_if(list.begin(), list.end(), [&](const auto& e) { return e.first == id; });
  if (it == list.end()) {
    list.emplace_back(id, g);
  } else {
    it->second += g;
  }
}

}  // namespace

double gpu_increment(const PowerView& v, GpuTypeId t, uint32_t model, double limit_w) {
  const GpuPowerSpec& s = v.model->spec(t);
  const double limit = limit_w > 0 ? limit_w : s.tdp_w;
  return std::max(0.0, v.model->curve(t, model).power(limit) - s.idle_w);
}

double preferred_limit_on(const PowerView& v, GpuTypeId t, uint32_t model, double eta) {
  const GpuPowerSpec& s = v.model->spec(t);
  if (eta <= 0) return s.tdp_w;
  return energy_optimal_limit(v.model->curve(t, model), eta, s.tdp_w);
}

double power_increment(const PowerView& v, const Cluster& c, const JobSpec& job,
                       const Allocation& alloc, double limit_w) {
  return gpu_increment(v, type_of(c, alloc), job.model, limit_w) *
         static_cast<double>(alloc.gpu_milli()) / kMilliPerGpu;
}

std::optional<std::string> power_infeasible_reason(const PowerView& v, const Cluster& c,
                                                   const JobSpec& job) {
  if (v.cap_w >= kNoPowerCap && v.rack_cap_w.empty()) return std::nullopt;
  // (Thermal headroom is not checked: it only keeps jobs off some nodes.)
  // The least it could ever add: its smallest gang, on the GPU type (of those it may use) that
  // draws least above idle at that type's lowest limit.
  const double gpus = static_cast<double>(job.gpu_milli_per_gang(job.min_members)) / kMilliPerGpu;
  double least = std::numeric_limits<double>::infinity();
  for (GpuTypeId t = 0; t < c.gpu_types().size() && t < 64; ++t) {
    if (((c.present_types() >> t) & 1u) == 0 || !type_allowed(job.allowed_types, t)) continue;
    const GpuPowerSpec& s = v.model->spec(t);
    const PowerCurve& curve = v.model->curve(t, job.model);
    const double lowest = std::max(s.min_limit_w, curve.min_limit());
    least = std::min(least, std::max(0.0, curve.power(lowest) - s.idle_w) * gpus);
  }
  if (least == std::numeric_limits<double>::infinity()) return std::nullopt;
  if (!v.rack_cap_w.empty() && least > 0) {
    // The most GPUs the rack caps let it hold at that draw per GPU, over every rack.
    const double per_gpu = least / gpus;
    double room = 0;
    for (RackId r = 0; r < c.racks().size() && r < v.rack_cap_w.size(); ++r) {
      const Rack& rack = c.racks()[r];
      double rack_gpus = 0;
      for (NodeId n = rack.first_node; n < rack.first_node + rack.num_nodes; ++n) {
        if (type_allowed(job.allowed_types, c.node(n).gpu_type)) rack_gpus += c.node(n).num_gpus;
      }
      const double fit = v.rack_cap_w[r] >= kNoPowerCap
                             ? rack_gpus
                             : std::floor((v.rack_cap_w[r] - v.rack_idle_w[r]) / per_gpu + kEps);
      room += std::clamp(fit, 0.0, rack_gpus);
    }
    if (room + kEps < gpus) {
      return fmt::format(
          "its {:g} GPUs would draw at least {:.0f} W each above idle even at the lowest power "
          "limit, and the racks' power caps leave room for {:g} such GPUs in all",
          gpus, per_gpu, room);
    }
  }
  if (v.idle_w + least > v.cap_w + kEps) {
    return fmt::format(
        "its {:g} GPUs would draw at least {:.1f} kW above idle even at the lowest power limit, "
        "and the power cap of {:.1f} kW leaves {:.1f} kW above the cluster's idle draw",
        gpus, least / 1000, v.cap_w / 1000, std::max(0.0, v.cap_w - v.idle_w) / 1000);
  }
  return std::nullopt;
}

double preferred_limit(const PowerView& v, const Cluster& c, const JobSpec& job,
                       const Allocation& alloc, double eta) {
  return preferred_limit_on(v, type_of(c, alloc), job.model, eta);
}

PowerLedger::PowerLedger(const PowerView& v, const Cluster& c, bool shifting)
    : view_(v), cluster_(c), shifting_(shifting), draw_(v.idle_w), rack_draw_(v.rack_idle_w) {
  if (!v.node_headroom_w.empty()) node_draw_.assign(c.nodes().size(), 0.0);
}

void PowerLedger::add_draw(const Holder& h, double d) {
  draw_ += d;
  if (h.gpus <= 0) return;
  if (!rack_draw_.empty()) {
    for (const auto& [r, g] : h.racks) rack_draw_[r] += d * g / h.gpus;
  }
  for (const auto& [n, g] : h.nodes) node_draw_[n] += d * g / h.gpus;
}

double PowerLedger::inc(const Holder& h, double limit) const {
  return std::max(0.0, h.curve->power(limit) - h.idle_w) * h.gpus;
}

void PowerLedger::apply(Holder& h, double limit) {
  const double before = h.active ? inc(h, h.limit) : 0.0;
  const double after = h.active ? inc(h, limit) : 0.0;
  h.limit = limit;
  add_draw(h, after - before);
}

size_t PowerLedger::add(JobId job, const JobSpec& spec, const Allocation& alloc, double limit_w,
                        double preferred_w) {
  Holder h;
  h.job = job;
  h.curve = &curve_of(view_, cluster_, spec, alloc);
  const GpuPowerSpec& s = spec_of(view_, cluster_, alloc);
  h.idle_w = s.idle_w;
  h.min_limit = std::max(s.min_limit_w, h.curve->min_limit());
  h.gpus = static_cast<double>(alloc.gpu_milli()) / kMilliPerGpu;
  const size_t gpm = static_cast<size_t>(alloc.gpus_per_member);
  for (size_t m = 0; m < alloc.member_node.size(); ++m) {
    const RackId r = cluster_.node(alloc.member_node[m]).rack;
    int64_t milli = 0;
    for (size_t k = 0; k < gpm; ++k) milli += alloc.shares[m * gpm + k].milli;
    const double g = static_cast<double>(milli) / kMilliPerGpu;
    add_gpus(h.racks, r, g);
    const NodeId n = alloc.member_node[m];
    if (!node_draw_.empty() && view_.node_headroom_w[n] >= 0) add_gpus(h.nodes, n, g);
  }
  h.preferred = preferred_w > 0 ? preferred_w : s.tdp_w;
  h.limit = limit_w > 0 ? limit_w : s.tdp_w;
  h.active = false;
  holders_.push_back(std::move(h));
  set_active(holders_.size() - 1, true);
  return holders_.size() - 1;
}

void PowerLedger::set_active(size_t h, bool active) {
  Holder& x = holders_[h];
  if (x.active == active) return;
  add_draw(x, inc(x, x.limit) * (active ? 1 : -1));
  x.active = active;
}

std::optional<uint32_t> PowerLedger::violated(const Holder& h) const {
  if (draw_ > view_.cap_w + kEps) return kNoId;
  if (!rack_draw_.empty()) {
    for (const auto& [r, g] : h.racks) {
      if (r < view_.rack_cap_w.size() && rack_draw_[r] > view_.rack_cap_w[r] + kEps) return r;
    }
  }
  for (const auto& [n, g] : h.nodes) {
    if (node_draw_[n] > view_.node_headroom_w[n] + kEps) return kNodeCap + n;
  }
  return std::nullopt;
}

double PowerLedger::next_lower(const Holder& h) const {
  double best = 0;
  for (const PowerPoint& p : h.curve->points()) {
    if (p.limit_w < h.limit - kEps && p.limit_w >= h.min_limit - kEps) best = p.limit_w;
  }
  return best;
}

double PowerLedger::next_higher(const Holder& h) const {
  for (const PowerPoint& p : h.curve->points()) {
    if (p.limit_w > h.limit + kEps) return p.limit_w <= h.preferred + kEps ? p.limit_w : 0.0;
  }
  return 0;
}

bool PowerLedger::fits_alone(const Holder& h, double limit) const {
  const double d = inc(h, limit);
  if (view_.idle_w + d > view_.cap_w + kEps) return false;
  if (!view_.rack_cap_w.empty() && h.gpus > 0) {
    for (const auto& [r, g] : h.racks) {
      if (r < view_.rack_cap_w.size() &&
          view_.rack_idle_w[r] + d * g / h.gpus > view_.rack_cap_w[r] + kEps) {
        return false;
      }
    }
  }
  return true;
}

bool PowerLedger::admit(size_t hid, PendingReason& why) {
  if (!shifting_) {
    // Holding never touches other jobs' limits, but a job that could not run at its preferred
    // limit even on an otherwise idle cluster starts at the highest limit that could.
    Holder& h = holders_[hid];
    while (!fits_alone(h, h.limit)) {
      const double lower = next_lower(h);
      if (lower <= 0) break;
      apply(h, lower);
    }
  }
  std::optional<uint32_t> v = violated(holders_[hid]);
  if (!v) return true;
  std::vector<std::pair<size_t, double>> journal;  // (holder, limit before) to undo
  if (shifting_) {
    while (v) {
      // The step that loses the least speed per watt saved, among holders drawing on the
      // violated cap (any for the cluster's; those on the rack for a rack's).
      size_t best = holders_.size();
      double best_ratio = std::numeric_limits<double>::infinity(), best_to = 0;
      for (size_t i = 0; i < holders_.size(); ++i) {
        const Holder& h = holders_[i];
        if (!h.active) continue;
        if (*v != kNoId && *v < kNodeCap &&
            std::none_of(h.racks.begin(), h.racks.end(),
                         [&](const auto& e) { return e.first == *v; })) {
          continue;
        }
        if (*v != kNoId && *v >= kNodeCap &&
            std::none_of(h.nodes.begin(), h.nodes.end(),
                         [&](const auto& e) { return e.first == *v - kNodeCap; })) {
          continue;
        }
        const double to = next_lower(h);
        if (to <= 0) continue;
        const double saved = inc(h, h.limit) - inc(h, to);
        if (saved <= kEps) continue;
        const double lost = (h.curve->speed(h.limit) - h.curve->speed(to)) * h.gpus;
        const double ratio = lost / saved;
        if (ratio < best_ratio - kEps) best = i, best_ratio = ratio, best_to = to;
      }
      if (best == holders_.size()) break;
      journal.emplace_back(best, holders_[best].limit);
      apply(holders_[best], best_to);
      v = violated(holders_[hid]);
    }
    if (!v) return true;
  }
  why.code = PendingCode::kPowerCapped;
  why.shifted = shifting_;
  if (*v == kNoId) {
    why.power_cap_w = view_.cap_w;
    why.power_need_w = draw_;
  } else if (*v >= kNodeCap) {
    why.node = *v - kNodeCap;
    why.power_cap_w = view_.node_headroom_w[why.node];
    why.power_need_w = node_draw_[why.node];
  } else {
    why.rack = *v;
    why.power_cap_w = view_.rack_cap_w[*v];
    why.power_need_w = rack_draw_[*v];
  }
  for (auto it = journal.rbegin(); it != journal.rend(); ++it)
    apply(holders_[it->first], it->second);
  set_active(hid, false);
  return false;
}

void PowerLedger::restore() {
  if (!shifting_) return;
  for (;;) {
    size_t best = holders_.size();
    double best_ratio = -1, best_to = 0;
    for (size_t i = 0; i < holders_.size(); ++i) {
      Holder& h = holders_[i];
      if (!h.active || h.limit >= h.preferred - kEps) continue;
      const double to = next_higher(h);
      if (to <= 0) continue;
      const double from = h.limit;
      const double cost = inc(h, to) - inc(h, from);
      const double gain = (h.curve->speed(to) - h.curve->speed(from)) * h.gpus;
      // Would the raise keep every cap it touches?
      apply(h, to);
      const bool ok = !violated(h);
      apply(h, from);
      if (!ok) continue;
      const double ratio = cost > kEps ? gain / cost : std::numeric_limits<double>::infinity();
      if (ratio > best_ratio) best = i, best_ratio = ratio, best_to = to;
    }
    if (best == holders_.size()) return;
    apply(holders_[best], best_to);
  }
}

}  // namespace tessera
