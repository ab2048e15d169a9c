#include "engine/goodput_placement.h"

#include <algorithm>

namespace tessera {

std::vector<double> member_speedup_curve(const GoodputModel& m, int max_gpus, int gpus_per_node,
                                         int gpus_per_member, int min_gpus) {
  std::vector<double> out = m.speedup_curve(max_gpus, gpus_per_node);
  const int step = std::max(1, gpus_per_member);
  for (size_t k = 1; k < out.size(); ++k) {
    const int whole = static_cast<int>(k) / step * step;
    out[k] = whole < std::max(1, min_gpus) ? 0.0 : out[static_cast<size_t>(whole)];
  }
  return out;
}

int nodes_of(const Allocation& a) {
  return static_cast<int>(a.nodes().size());
}

bool place_best_size(ClusterState& state, const JobSpec& s, int min_members, int max_members,
                     const PlacementScorer& scorer, Rng& rng, const SpeedupOf& speedup,
                     Allocation& out) {
  out = Allocation{};
  double best = 0;
  Allocation a;
  for (int m = max_members; m >= std::max(1, min_members); --m) {
    if (!scorer.place(state, s, m, rng, a)) continue;
    state.release(a);
    const int gpus = a.members() * std::max(1, a.gpus_per_member);
    const double v = speedup(nodes_of(a), gpus);
    if (v > best * (1 + 1e-9)) best = v, out = a;
  }
  return out.members() > 0;
}

}  // namespace tessera
