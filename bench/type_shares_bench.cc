// Gavel's heterogeneity LP (engine/type_shares.h): one solve over N jobs on three GPU types
// (K80 / P100 / V100, 36 GPUs each as Gavel's simulated cluster), throughputs drawn around
// Gavel's measured speed-ups (V100 1.5-10x a K80), gangs of 1-8 GPUs.
#include <benchmark/benchmark.h>

#include "engine/rng.h"
#include "engine/type_shares.h"

namespace tessera {
namespace {

TypeShareInput problem(int jobs) {
  Rng rng(1);
  TypeShareInput in;
  in.capacity = {36, 36, 36};
  for (int j = 0; j < jobs; ++j) {
    const double v100 = 1.5 + 8.5 * static_cast<double>(rng.below(1000)) / 1000;
    const double p100 = 1 + (v100 - 1) * (0.3 + 0.4 * static_cast<double>(rng.below(100)) / 100);
    in.throughput.push_back({1.0, p100, v100});
    in.gpus.push_back(static_cast<double>(1 << rng.below(4)));
  }
  return in;
}

void solve(benchmark::State& st, TypeShareObjective objective) {
  const TypeShareInput in = problem(static_cast<int>(st.range(0)));
  for (auto _ : st) {
    const TypeShares s = solve_type_shares(in, objective);
    benchmark::DoNotOptimize(s.x.data());
  }
}

void BM_TypeSharesMaxMin(benchmark::State& st) {
  solve(st, TypeShareObjective::kMaxMinFairness);
}
void BM_TypeSharesThroughput(benchmark::State& st) {
  solve(st, TypeShareObjective::kMaxThroughput);
}
BENCHMARK(BM_TypeSharesMaxMin)->Arg(100)->Arg(500)->Arg(2000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TypeSharesThroughput)->Arg(100)->Arg(500)->Arg(2000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace tessera
