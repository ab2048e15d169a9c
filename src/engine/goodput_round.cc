#include "engine/goodput_round.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>

#include "engine/fair_share.h"
#include "engine/goodput_placement.h"
#include "engine/rng.h"

namespace tessera {

std::vector<int32_t> plan_goodput_round(std::span<const GoodputRoundJob> jobs,
                                        const ClusterState& ledger, const PlacementScorer& scorer,
                                        const GoodputAllocationOptions& o, uint64_t seed,
                                        const QueueTree* tree) {
  std::vector<int32_t> members(jobs.size(), 0);
  if (jobs.empty()) return members;
  // The ledger as it would be with no adaptive job running: what the round plans on.
  ClusterState plan = ledger;
  const auto running = [&](size_t k) {
    return jobs[k].alloc != nullptr && !jobs[k].alloc->empty();
  };
  for (size_t k = 0; k < jobs.size(); ++k) {
    if (running(k)) plan.release(*jobs[k].alloc);
  }
  const Cluster& c = plan.cluster();
  int gpus = 0, per_node = 1;
  for (GpuId g = 0; g < c.num_gpus(); ++g) gpus += plan.gpu_free(g) == 1000 ? 1 : 0;
  for (const Node& n : c.nodes()) per_node = std::max<int>(per_node, n.num_gpus);

  const auto per_member = [&](size_t k) { return std::max(1, jobs[k].spec->demand.gpus); };
  const auto current = [&](size_t k) { return running(k) ? jobs[k].alloc->members() : 0; };
  std::vector<GoodputDemand> demand(jobs.size());
  for (size_t k = 0; k < jobs.size(); ++k) {
    const GoodputRoundJob& j = jobs[k];
    const int g = per_member(k);
    const int min_gpus = j.spec->min_members * g;
    // Offered at most `exploration` times what it has reported from (and at least its minimum).
    const int explored =
        static_cast<int>(std::floor(o.exploration * std::max(g, j.model->max_profiled_replicas())));
    const int cap = std::min({j.spec->max_members * g, std::max(min_gpus, explored), gpus});
    GoodputDemand& d = demand[k];
    d.speedup = member_speedup_curve(*j.model, std::max(0, cap), per_node, g, min_gpus);
    d.rigid = j.spec->min_members == j.spec->max_members;
    d.current = current(k) * g;
    d.attained_gpu_seconds = j.attained_gpu_seconds;
    d.run_seconds = j.run_seconds;
    d.remaining_gpu_seconds = j.model->remaining_gpu_seconds();
  }
  // The queues' entitlements to these GPUs, over what their jobs could use.
  std::optional<GoodputGroups> groups;
  if (tree != nullptr && tree->size() > 0) {
    std::vector<Amounts> wants(tree->size(), kZeroAmounts);
    std::vector<QueueId> leaf(jobs.size());
    for (size_t k = 0; k < jobs.size(); ++k) {
      leaf[k] = tree->leaf_of(jobs[k].spec->tenant);
      if (leaf[k] != kNoId) wants[leaf[k]][kGpuDim] += 1000 * int64_t(demand[k].speedup.size() - 1);
    }
    Amounts capacity = kZeroAmounts;
    capacity[kGpuDim] = 1000 * int64_t{gpus};
    const std::vector<Amounts> entitled = water_fill(*tree, capacity, wants);
    groups.emplace();
    groups->entitled.resize(tree->size());
    for (QueueId q = 0; q < tree->size(); ++q) {
      groups->entitled[q] = static_cast<int>(entitled[q][kGpuDim] / 1000);
    }
    groups->groups_of.resize(jobs.size());
    for (size_t k = 0; k < jobs.size(); ++k) {
      for (QueueId q = leaf[k]; q != kNoId; q = tree->queue(q).parent) {
        groups->groups_of[k].push_back(static_cast<int>(q));
      }
    }
  }
  const std::vector<int> want = allocate_goodput(demand, gpus, o, groups ? &*groups : nullptr);

  std::vector<size_t> order(jobs.size());
  std::iota(order.begin(), order.end(), size_t{0});
  const auto wanted = [&](size_t k) { return want[k] / per_member(k); };
  const auto kept = [&](size_t k) { return running(k) && wanted(k) == current(k); };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (kept(a) != kept(b)) return kept(a);
    const bool sa = wanted(a) < current(a), sb = wanted(b) < current(b);
    if (sa != sb) return sa;
    return wanted(a) > wanted(b);
  });
  Rng rng(seed);
  for (const size_t k : order) {
    const GoodputRoundJob& j = jobs[k];
    if (kept(k)) {
      plan.allocate(*j.alloc);
      members[k] = current(k);
      continue;
    }
    if (wanted(k) < j.spec->min_members) continue;
    Allocation a;
    if (place_best_size(
            plan, *j.spec, j.spec->min_members, wanted(k), scorer, rng,
            [&](int nodes, int n) { return j.model->speedup(nodes, n); }, a)) {
      plan.allocate(a);
      members[k] = a.members();
    }
  }
  return members;
}

}  // namespace tessera
