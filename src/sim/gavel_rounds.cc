#include "sim/gavel_rounds.h"

#include <algorithm>
#include <numeric>

#include "engine/round_plan.h"
#include "engine/type_shares.h"

namespace tessera {

std::vector<GpuTypeId> plan_gavel_round(const Cluster& c, const std::vector<GavelCandidate>& jobs,
                                        double stay_factor) {
  std::vector<GpuTypeId> out(jobs.size(), kNoGpuType);
  if (jobs.empty()) return out;
  // The LP's types: those the cluster has.
  std::vector<GpuTypeId> types;
  for (GpuTypeId t = 0; t < c.gpu_types().size(); ++t) {
    if (c.num_gpus_of_type(t) > 0) types.push_back(t);
  }
  // Least attained service first: the plan's tie-break order.
  std::vector<size_t> order(jobs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return jobs[a].attained < jobs[b].attained; });
  TypeShareInput in;
  for (GpuTypeId t : types) in.capacity.push_back(c.num_gpus_of_type(t));
  for (size_t k : order) {
    const JobSpec& s = *jobs[k].spec;
    std::vector<double> row;
    for (GpuTypeId t : types) {
      double speed = 0;
      if (type_allowed(s.allowed_types, t)) {
        speed = t < s.type_speed.size() ? s.type_speed[t] : c.gpu_types().at(t).relative_speed;
      }
      row.push_back(speed);
    }
    in.throughput.push_back(std::move(row));
    in.gpus.push_back(static_cast<double>(s.gpu_milli_per_gang(s.min_members)) / kMilliPerGpu);
  }
  const TypeShares shares = solve_type_shares(in, TypeShareObjective::kMaxMinFairness);
  std::vector<RoundJob> round(jobs.size());
  for (size_t i = 0; i < order.size(); ++i) {
    const GavelCandidate& g = jobs[order[i]];
    RoundJob& r = round[i];
    r.gpus = in.gpus[i];
    r.share = shares.x[i];
    for (size_t k = 0; k < types.size(); ++k) {
      const GpuTypeId t = types[k];
      r.received.push_back(g.rounds > 0 && t < g.rounds_on.size() ? g.rounds_on[t] / g.rounds
                                                                  : 0.0);
      if (g.running_on == t) r.running_on = static_cast<int32_t>(k);
    }
  }
  const std::vector<int32_t> plan = plan_round(round, in.capacity, stay_factor);
  for (size_t i = 0; i < order.size(); ++i) {
    if (plan[i] >= 0) out[order[i]] = types[static_cast<size_t>(plan[i])];
  }
  return out;
}

}  // namespace tessera
