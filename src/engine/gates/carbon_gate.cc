#include "engine/gates/carbon_gate.h"

#include "model/carbon_intensity.h"

namespace tessera {

bool CarbonGate::admit(const GateInput& in, const JobSpec& job, QueueId leaf,
                       PendingReason& reason) const {
  constexpr double kCarbonMinSaving = 0.1;
  if (job.priority != PriorityClass::kBestEffort || leaf >= in.tree.size()) return true;
  const double bound = in.tree.queue(leaf).carbon_defer_seconds;
  if (!(bound > 0)) return true;
  const double now = in.snap.now;
  const double until = job.submit_time + bound;
  if (now >= until) return true;
  const CarbonIntensity& ci = *in.snap.carbon;
  const double d = job.duration_estimate > 0 ? job.duration_estimate : 0.0;
  auto cost = [&](double t) { return d > 0 ? ci.mean(t, t + d) : ci.at(t); };
  const double now_cost = cost(now);
  double best = now_cost, best_at = now;
  int steps = 0;
  for (double t = ci.next_change(now); t <= until && steps < 10000;
       t = ci.next_change(t), ++steps) {
    const double c = cost(t);
    if (c < best) best = c, best_at = t;
  }
  if (best > now_cost * (1 - kCarbonMinSaving)) return true;
  reason.code = PendingCode::kCarbonDeferred;
  reason.carbon_now = now_cost;
  reason.carbon_then = best;
  reason.carbon_at = best_at;
  reason.carbon_until = until;
  return false;
}

}  // namespace tessera
