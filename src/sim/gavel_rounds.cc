#include "sim/gavel_rounds.h"

#include <algorithm>
#include <numeric>

#include "engine/admission.h"
#include "engine/round_plan.h"
#include "engine/type_shares.h"

namespace tessera {

double type_throughput(const Cluster& c, const JobSpec& s, GpuTypeId t) {
  return t < s.type_speed.size() ? static_cast<double>(s.type_speed[t])
                                 : c.gpu_types().at(t).relative_speed;
}

bool GavelPlanner::fits_type(const Cluster& c, JobId id, const JobSpec& s, GpuTypeId t) {
  auto it = fits_.find(id);
  if (it == fits_.end()) {
    // Types whose nodes can hold the gang at all (an empty cluster of that type admits it):
    // the LP counts GPUs, not how they are spread over nodes.
    GpuTypeMask mask = 0;
    for (GpuTypeId u = 0; u < c.gpu_types().size(); ++u) {
      JobSpec on = s;
      on.allowed_types = GpuTypeMask{1} << u;
      if (type_allowed(s.allowed_types, u) && !infeasible_reason(c, on)) mask |= on.allowed_types;
    }
    it = fits_.emplace(id, mask).first;
  }
  return (it->second & (GpuTypeMask{1} << t)) != 0;
}

std::vector<GpuTypeId> GavelPlanner::plan(const Cluster& c, const std::vector<GavelCandidate>& jobs,
                                          bool aware, double stay_factor, size_t max_jobs) {
  std::vector<GpuTypeId> out(jobs.size(), kNoGpuType);
  if (jobs.empty()) return out;
  if (max_jobs > 0 && jobs.size() > max_jobs) {
    // Too many to share time among usefully (and for the LP to solve every round): the
    // running jobs and the least-served waiting ones, up to max_jobs, are planned; the rest
    // wait this round.
    std::vector<size_t> keep;
    for (size_t k = 0; k < jobs.size(); ++k) {
      if (jobs[k].running_on != kNoGpuType) keep.push_back(k);
    }
    std::vector<size_t> waiting;
    for (size_t k = 0; k < jobs.size(); ++k) {
      if (jobs[k].running_on == kNoGpuType) waiting.push_back(k);
    }
    std::stable_sort(waiting.begin(), waiting.end(),
                     [&](size_t a, size_t b) { return jobs[a].attained < jobs[b].attained; });
    for (size_t k : waiting) {
      if (keep.size() >= max_jobs) break;
      keep.push_back(k);
    }
    std::sort(keep.begin(), keep.end());
    std::vector<GavelCandidate> some;
    for (size_t k : keep) some.push_back(jobs[k]);
    const std::vector<GpuTypeId> part = plan(c, some, aware, stay_factor, 0);
    for (size_t i = 0; i < keep.size(); ++i) out[keep[i]] = part[i];
    return out;
  }
  // The LP's types: those the cluster has.
  std::vector<GpuTypeId> types;
  std::vector<double> capacity;
  for (GpuTypeId t = 0; t < c.gpu_types().size(); ++t) {
    if (c.num_gpus_of_type(t) == 0) continue;
    types.push_back(t);
    capacity.push_back(c.num_gpus_of_type(t));
  }
  const auto gpus_of = [](const JobSpec& s) {
    return static_cast<double>(s.gpu_milli_per_gang(s.min_members)) / kMilliPerGpu;
  };
  // The LP over the jobs by id (so that its answer is a function of the job set), solved only
  // when the set changed.
  std::vector<size_t> by_id(jobs.size());
  std::iota(by_id.begin(), by_id.end(), 0);
  std::sort(by_id.begin(), by_id.end(),
            [&](size_t a, size_t b) { return jobs[a].id < jobs[b].id; });
  bool same = ids_.size() == jobs.size();
  for (size_t i = 0; same && i < by_id.size(); ++i) same = ids_[i] == jobs[by_id[i]].id;
  if (!same) {
    TypeShareInput in;
    in.capacity = capacity;
    ids_.clear();
    for (size_t k : by_id) {
      const JobSpec& s = *jobs[k].spec;
      std::vector<double> row;
      for (GpuTypeId t : types) {
        double speed = 0;
        if (type_allowed(s.allowed_types, t) && fits_type(c, jobs[k].id, s, t)) {
          speed = aware ? type_throughput(c, s, t) : 1.0;
        }
        row.push_back(speed);
      }
      in.throughput.push_back(std::move(row));
      in.gpus.push_back(gpus_of(s));
      ids_.push_back(jobs[k].id);
    }
    share_ = solve_type_shares(in, TypeShareObjective::kMaxMinFairness).x;
    ++solves_;
  }
  // The plan, least attained service first (its tie-break order).
  std::vector<size_t> position(jobs.size());  // index into jobs -> position in ids_
  for (size_t i = 0; i < by_id.size(); ++i) position[by_id[i]] = i;
  std::vector<size_t> order(jobs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return jobs[a].attained < jobs[b].attained; });
  std::vector<RoundJob> round(jobs.size());
  for (size_t i = 0; i < order.size(); ++i) {
    const GavelCandidate& g = jobs[order[i]];
    RoundJob& r = round[i];
    r.gpus = gpus_of(*g.spec);
    r.share = share_[position[order[i]]];
    for (size_t k = 0; k < types.size(); ++k) {
      const GpuTypeId t = types[k];
      r.received.push_back(g.rounds > 0 && t < g.rounds_on.size() ? g.rounds_on[t] / g.rounds
                                                                  : 0.0);
      if (g.running_on == t) r.running_on = static_cast<int32_t>(k);
    }
  }
  const std::vector<int32_t> plan = plan_round(round, capacity, stay_factor);
  for (size_t i = 0; i < order.size(); ++i) {
    if (plan[i] >= 0) out[order[i]] = types[static_cast<size_t>(plan[i])];
  }
  return out;
}

}  // namespace tessera
