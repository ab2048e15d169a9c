#include "engine/round_plan.h"

#include <algorithm>
#include <tuple>

namespace tessera {

namespace {
// A job that never ran on a type it has a share of is first there: its priority is the share
// over this floor.
constexpr double kMinReceived = 1e-3;
}  // namespace

std::vector<int32_t> plan_round(const std::vector<RoundJob>& jobs,
                                const std::vector<double>& capacity, double stay_factor) {
  struct Pair {
    double priority;
    bool stays;  // the type it runs on now
    uint32_t job;
    int32_t type;
  };
  std::vector<Pair> pairs;
  for (uint32_t j = 0; j < jobs.size(); ++j) {
    const RoundJob& r = jobs[j];
    for (int32_t t = 0; t < static_cast<int32_t>(r.share.size()); ++t) {
      const double x = r.share[t];
      if (x <= 0) continue;
      const double got = t < static_cast<int32_t>(r.received.size()) ? r.received[t] : 0.0;
      const double stay = r.running_on == t ? stay_factor : 1.0;
      pairs.push_back({stay * x / std::max(got, kMinReceived), r.running_on == t, j, t});
    }
  }
  std::sort(pairs.begin(), pairs.end(), [](const Pair& a, const Pair& b) {
    return std::make_tuple(-a.priority, !a.stays, a.job, a.type) <
           std::make_tuple(-b.priority, !b.stays, b.job, b.type);
  });
  std::vector<double> left = capacity;
  std::vector<int32_t> out(jobs.size(), -1);
  for (const Pair& p : pairs) {
    if (out[p.job] >= 0) continue;
    const double g = jobs[p.job].gpus;
    if (left[p.type] < g) continue;
    left[p.type] -= g;
    out[p.job] = p.type;
  }
  return out;
}

}  // namespace tessera
