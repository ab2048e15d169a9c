// Goodput rounds (docs/goodput.md): what a round costs the scheduler. The speedup curves of N
// jobs from their fitted goodput models (GoodputModel::best for 1..64 GPUs on 4-GPU nodes), then
// the allocation of 64 or 512 GPUs among them (allocate_goodput).
#include <benchmark/benchmark.h>

#include <vector>

#include "engine/goodput_allocation.h"
#include "engine/goodput_model.h"
#include "engine/rng.h"

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

}  // namespace
}  // namespace tessera
