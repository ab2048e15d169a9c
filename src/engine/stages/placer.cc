#include "engine/stages/placer.h"

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

namespace tessera {

namespace {

// What the scorers read of `job` (demand, span, members), on `types` and `nodes`, written into
// `out` without copying the job's strings.
JobSpec& placed_as(const JobSpec& job, GpuTypeMask types, std::shared_ptr<const NodeSet> nodes,
                   JobSpec& out) {
  out.demand = job.demand;
  out.max_span = job.max_span;
  out.min_members = job.min_members;
  out.max_members = job.max_members;
  out.allowed_types = types;
  out.eligible_nodes = std::move(nodes);
  return out;
}

}  // namespace

void Placer::begin(const PendingJob& pj) {
  preferred_ = nullptr;
  hold_for_data_ = data_held_ = false;
  if (s_.snap.preferred_nodes == nullptr) return;
  const auto it = s_.snap.preferred_nodes->find(pj.id);
  if (it != s_.snap.preferred_nodes->end() && it->second != nullptr && !it->second->empty()) {
    preferred_ = it->second;
    hold_for_data_ = s_.snap.now - pj.queued_since < s_.snap.locality_wait_seconds;
  }
}

// Places the gang at its largest size the queue's quota allows (max, else min members); with
// heterogeneity-aware placement, on its preferred GPU types first.
bool Placer::try_place(const JobSpec& job, Allocation& alloc) {
  // Data locality first: on the nodes holding its dataset; within its locality wait, only
  // there.
  if (preferred_ != nullptr) {
    std::shared_ptr<const NodeSet> nodes = preferred_;
    if (job.eligible_nodes != nullptr) {
      nodes = std::make_shared<const NodeSet>(NodeSet::matching(
          s_.cluster.nodes().size(),
          [&](NodeId n) { return preferred_->contains(n) && job.eligible_nodes->contains(n); }));
    }
    const JobSpec& p = placed_as(job, job.allowed_types, std::move(nodes), local_job_);
    if (try_place_sized(p, alloc)) return true;
    if (hold_for_data_) {
      data_held_ = true;
      return false;
    }
  }
  if (s_.policy.heterogeneity && !job.type_speed.empty()) {
    const GpuTypeMask preferred = preferred_types(job);
    if (preferred != 0) {
      if (try_place_sized(placed_as(job, preferred, job.eligible_nodes, preferred_job_), alloc)) {
        return true;
      }
    }
  }
  return try_place_sized(job, alloc);
}

// Calls f(type, speed) for each GPU type present in the cluster that the job may use and has a
// known speed on.
template <class F>
void Placer::for_each_usable_type(const JobSpec& job, F&& f) const {
  const GpuTypeMask present = s_.cluster.present_types();
  for (GpuTypeId t = 0; t < job.type_speed.size() && t < 64; ++t) {
    if (((present >> t) & 1u) == 0 || !type_allowed(job.allowed_types, t)) continue;
    const double v = job.type_speed[t];
    if (v > 0) f(t, v);
  }
}

// The job's slowest and fastest speed over its usable types (0, 0 when none is known).
std::pair<double, double> Placer::speed_range(const JobSpec& job) const {
  double lo = 0, hi = 0;
  for_each_usable_type(job, [&](GpuTypeId, double v) {
    lo = lo == 0 ? v : std::min(lo, v);
    hi = std::max(hi, v);
  });
  return {lo, hi};
}

// The speed-up a job gets from its fastest allowed GPU type present over its slowest.
double Placer::type_spread(const JobSpec& job) const {
  const auto [lo, hi] = speed_range(job);
  return lo > 0 ? hi / lo : 1.0;
}

// The GPU types a job should try first: the fastest (within 10 %) when its speed-up from them
// is at least the median of the jobs waiting in this cycle, else the slowest; 0 when its
// types are all alike.
GpuTypeMask Placer::preferred_types(const JobSpec& job) {
  if (hetero_median_ < 0) {
    std::vector<double> spreads;
    spreads.reserve(s_.snap.pending.size());
    for (const PendingJob& pj : s_.snap.pending) {
      if (!pj.spec->type_speed.empty()) spreads.push_back(type_spread(*pj.spec));
    }
    if (spreads.empty()) return 0;
    std::nth_element(spreads.begin(), spreads.begin() + spreads.size() / 2, spreads.end());
    hetero_median_ = spreads[spreads.size() / 2];
  }
  // Plain variables, not a structured binding: the lambda below captures them, which
  // clang before 16 does not allow of bindings.
  const auto range = speed_range(job);
  const double lo = range.first, hi = range.second;
  const double spread = lo > 0 ? hi / lo : 1.0;
  if (spread <= 1.0 + 1e-9) return 0;
  const bool fast = spread >= hetero_median_;
  GpuTypeMask mask = 0;
  for_each_usable_type(job, [&](GpuTypeId t, double v) {
    if (fast ? v >= 0.9 * hi : v <= 1.1 * lo) mask |= GpuTypeMask{1} << t;
  });
  return mask;
}

bool Placer::try_place_sized(const JobSpec& job, Allocation& alloc) {
  const bool max_fits_quota =
      job.max_members == job.min_members ||
      s_.over_limit(s_.current_leaf, amounts_of(job, job.max_members)) == kNoId;
  if (max_fits_quota && s_.policy.scorer->place(s_.scratch, job, job.max_members, s_.rng, alloc)) {
    return true;
  }
  if (job.min_members >= job.max_members) return false;
  // An elastic gang: as many members as the free GPUs of its types could hold, else its
  // minimum (it grows later, policy.elastic, when GPUs are idle).
  const int64_t per_member = job.gpu_milli_per_gang(1);
  if (s_.policy.elastic && per_member > 0) {
    // Free capacity it may use (an upper bound on what it can get); the scratch state may be
    // mid-preemption here, so a restricted job's is summed afresh, not cached.
    const int64_t free = job.eligible_nodes == nullptr
                             ? s_.scratch.free_milli_matching(job.allowed_types)
                             : s_.sum_free_on(job.allowed_types, *job.eligible_nodes);
    const auto fit =
        static_cast<int32_t>(std::min<int64_t>(job.max_members - 1, free / per_member));
    if (fit > job.min_members && s_.over_limit(s_.current_leaf, amounts_of(job, fit)) == kNoId &&
        s_.policy.scorer->place(s_.scratch, job, fit, s_.rng, alloc)) {
      return true;
    }
  }
  return s_.policy.scorer->place(s_.scratch, job, job.min_members, s_.rng, alloc);
}

}  // namespace tessera
