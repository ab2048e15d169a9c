// Goodput rounds (docs/goodput.md): what a round costs the scheduler. The speedup curves of N
// jobs from their fitted goodput models (GoodputModel::best for 1..64 GPUs on 4-GPU nodes), then
// the allocation of 64 or 512 GPUs among them (allocate_goodput); and a whole round over live
// jobs as serve and kube run it (plan_goodput_round: curves, allocation queue by queue, and each
// job's placement on the ledger).
#include <benchmark/benchmark.h>

#include <vector>

#include "engine/goodput_allocation.h"
#include "engine/goodput_model.h"
#include "engine/goodput_round.h"
#include "engine/placement.h"
#include "engine/rng.h"
#include "model/cluster_spec.h"
#include "model/interner.h"
#include "model/queue_tree.h"

namespace tessera {
namespace {

GoodputModel model(Rng& rng) {
  BatchLimits l;
  l.init_batch = 128;
  l.max_batch = 8192;
  l.min_local = 16;
  l.max_local = 256;
  GoodputModel m(l);
  const double compute = 0.005 + 0.01 * static_cast<double>(rng.below(100)) / 100;
  const double per_sample = 0.0005 + 0.002 * static_cast<double>(rng.below(100)) / 100;
  const auto report = [&](int nodes, int replicas, int atomic) {
    const double sync = nodes > 1 ? 0.1 : replicas > 1 ? 0.03 : 0.002;
    m.report(StepReport{nodes, replicas, atomic, compute + per_sample * atomic + sync, sync});
  };
  report(1, 1, 64);
  report(1, 1, 128);
  report(1, 4, 128);
  report(2, 8, 128);
  m.report(GradientStats{1.0, 50.0 + static_cast<double>(rng.below(1000))});
  m.report_progress(100, 1000 + static_cast<double>(rng.below(10000)));
  return m;
}

std::vector<GoodputDemand> demands(const std::vector<GoodputModel>& models, int max_gpus) {
  std::vector<GoodputDemand> out(models.size());
  for (size_t j = 0; j < models.size(); ++j) {
    out[j].speedup = models[j].speedup_curve(max_gpus, 4);
    out[j].remaining_gpu_seconds = models[j].remaining_gpu_seconds();
    out[j].current = static_cast<int>(j % 3);
    out[j].run_seconds = 600;
  }
  return out;
}

std::vector<GoodputModel> models(int jobs) {
  Rng rng(1);
  std::vector<GoodputModel> out;
  for (int j = 0; j < jobs; ++j) out.push_back(model(rng));
  return out;
}

// One round's curves: N jobs x 64 sizes.
void BM_GoodputCurves(benchmark::State& st) {
  const std::vector<GoodputModel> m = models(static_cast<int>(st.range(0)));
  for (auto _ : st) {
    const std::vector<GoodputDemand> d = demands(m, 64);
    benchmark::DoNotOptimize(d.data());
  }
}
BENCHMARK(BM_GoodputCurves)->Arg(100)->Arg(300)->Unit(benchmark::kMillisecond);

// One round's allocation: N jobs, range(1) GPUs.
void BM_GoodputAllocation(benchmark::State& st) {
  const std::vector<GoodputDemand> d = demands(models(static_cast<int>(st.range(0))), 64);
  const int gpus = static_cast<int>(st.range(1));
  for (auto _ : st) {
    const std::vector<int> n = allocate_goodput(d, gpus);
    benchmark::DoNotOptimize(n.data());
  }
}
BENCHMARK(BM_GoodputAllocation)
    ->Args({100, 64})
    ->Args({300, 64})
    ->Args({300, 512})
    ->Unit(benchmark::kMillisecond);

// A round over N adaptive gangs (1-8 one-GPU members, half of them running) of 4 tenants on
// range(1) 8-GPU nodes, under a flat queue tree.
void BM_GoodputRound(benchmark::State& st) {
  const int n = static_cast<int>(st.range(0));
  const Cluster c = make_uniform_cluster(1, static_cast<int>(st.range(1)) / 8, 8, 8);
  ClusterState ledger(c);
  Interner tenants;
  for (const char* t : {"a", "b", "c", "d"}) tenants.intern(t);
  QueueTree tree = QueueTree::flat(tenants);
  tree.bind(tenants, "bench");
  const std::vector<GoodputModel> m = models(n);
  std::vector<JobSpec> specs(static_cast<size_t>(n));
  std::vector<Allocation> allocs(static_cast<size_t>(n));
  std::vector<GoodputRoundJob> jobs(static_cast<size_t>(n));
  const auto bestfit = make_scorer("bestfit");
  Rng rng(2);
  for (size_t j = 0; j < specs.size(); ++j) {
    specs[j].name = "j" + std::to_string(j);
    specs[j].tenant = static_cast<TenantId>(j % 4);
    specs[j].demand.gpus = 1;
    specs[j].min_members = 1;
    specs[j].max_members = 8;
    jobs[j].model = &m[j];
    jobs[j].spec = &specs[j];
    if (j % 2 == 0 &&
        bestfit->place(ledger, specs[j], 1 + static_cast<int>(j % 4), rng, allocs[j])) {
      jobs[j].alloc = &allocs[j];
      jobs[j].run_seconds = 600;
    }
  }
  uint64_t seed = 0;
  for (auto _ : st) {
    const std::vector<int32_t> members =
        plan_goodput_round(jobs, ledger, *bestfit, {}, ++seed, &tree);
    benchmark::DoNotOptimize(members.data());
  }
}
BENCHMARK(BM_GoodputRound)->Args({100, 64})->Args({300, 512})->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace tessera
