// Runtime predictors: the cost of one predict() after a history of N observed jobs,
// and of one GBT refit on N rows.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "insight/gbt.h"
#include "insight/runtime_predictor.h"

namespace tessera {
namespace {

std::vector<JobFeatures> jobs(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<JobFeatures> out(n);
  for (size_t i = 0; i < n; ++i) {
    JobFeatures& f = out[i];
    f.tenant = static_cast<uint32_t>(rng() % 15);
    f.user = static_cast<uint32_t>(rng() % 300);
    f.name = static_cast<uint32_t>(rng() % 1000);
    f.gpus = static_cast<double>(1u << (rng() % 4));
    f.members = 1;
    f.submit_time = static_cast<double>(i) * 30;
  }
  return out;
}

void BM_Predict(benchmark::State& state, const char* name) {
  const size_t history = static_cast<size_t>(state.range(0));
  auto p = make_runtime_predictor(name);
  const auto js = jobs(history + 1024, 1);
  for (size_t i = 0; i < history; ++i) p->observe(js[i], 60.0 + static_cast<double>(i % 977));
  size_t k = history;
  for (auto _ : state) {
    const JobFeatures& f = js[history + (k++ % 1024)];
    benchmark::DoNotOptimize(p->predict(f));
  }
}
BENCHMARK_CAPTURE(BM_Predict, quantile, "quantile")->Arg(1000)->Arg(50000);
BENCHMARK_CAPTURE(BM_Predict, gbt, "gbt")->Arg(1000)->Arg(50000);

void BM_GbtFit(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  constexpr size_t kFeatures = 25;
  std::mt19937_64 rng(3);
  std::vector<double> x(n * kFeatures), y(n);
  for (double& v : x) v = static_cast<double>(rng() % 1000);
  for (size_t i = 0; i < n; ++i) y[i] = x[i * kFeatures] / 100 + (x[i * kFeatures + 1] > 500);
  GbtParams p;
  p.loss = GbtLoss::kAbsolute;
  p.max_depth = 3;
  p.min_leaf = 50;
  for (auto _ : state) {
    GradientBoostedTrees m;
    m.fit(x, kFeatures, y, p);
    benchmark::DoNotOptimize(m.num_trees());
  }
}
BENCHMARK(BM_GbtFit)->Arg(12000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace tessera
