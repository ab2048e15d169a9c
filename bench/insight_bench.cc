// The job recommendation service: recommendation latency by queue length, k-means and the elbow
// curve on a knowledge-base-sized feature set, and one co-location run.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "insight/interference_model.h"
#include "insight/kmeans.h"
#include "insight/recommender.h"
#include "sim/colocation_experiment.h"

namespace tessera {
namespace {

InterferenceModel model(size_t k, std::mt19937_64& rng) {
  InterferenceModel m(k);
  for (uint32_t a = 0; a < k; ++a) {
    for (uint32_t b = a; b < k; ++b) {
      m.observe_speeds(a, b, 0.4 + 0.6 * uniform01(rng), 0.4 + 0.6 * uniform01(rng));
    }
  }
  return m;
}

std::vector<Candidate> queue(size_t n, size_t k, std::mt19937_64& rng) {
  std::vector<Candidate> q(n);
  for (Candidate& c : q) {
    c.cluster = static_cast<uint32_t>(uniform_below(rng, k));
    c.uncertainty = 10 * uniform01(rng);
    c.features = {100 * uniform01(rng), 100 * uniform01(rng), 60 * uniform01(rng)};
    c.estimate = c.remaining = 120 + 1080 * uniform01(rng);
  }
  return q;
}

void BM_Recommend(benchmark::State& state) {
  std::mt19937_64 rng(1);
  const InterferenceModel m = model(3, rng);
  const auto q = queue(static_cast<size_t>(state.range(0)), 3, rng);
  const std::vector<Candidate> residents = {q.front()};
  RecommendOptions o;
  o.objective = Objective::kMaxPacSav;
  o.packing = Packing::kMemory;
  o.strict_packing = false;
  o.opportunity_cost = state.range(1) != 0;
  o.epsilon = 0.1;
  for (auto _ : state) benchmark::DoNotOptimize(recommend(residents, q, m, o, rng));
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_Recommend)->ArgsProduct({{10, 100, 1000, 10000}, {0, 1}});

// The duration-aware PacSav objective (queue-aware); with the opportunity cost each candidate
// is compared with up to 32 other queued jobs.
void BM_RecommendDuration(benchmark::State& state) {
  std::mt19937_64 rng(1);
  const InterferenceModel m = model(3, rng);
  const auto q = queue(static_cast<size_t>(state.range(0)), 3, rng);
  const std::vector<Candidate> residents = {q.front()};
  RecommendOptions o;
  o.objective = Objective::kMaxPacSavDuration;
  o.queue_aware = true;
  o.opportunity_cost = state.range(1) != 0;
  for (auto _ : state) benchmark::DoNotOptimize(recommend(residents, q, m, o, rng));
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_RecommendDuration)->ArgsProduct({{10, 100, 1000, 10000}, {0, 1}});

std::vector<FeatureVec> points(size_t n) {
  std::mt19937_64 rng(2);
  std::vector<FeatureVec> p(n);
  for (FeatureVec& x : p) {
    const double c = 30.0 * static_cast<double>(uniform_below(rng, 3));
    for (double& v : x) v = c + 20 * uniform01(rng);
  }
  return p;
}

void BM_KMeans(benchmark::State& state) {
  const auto p = points(static_cast<size_t>(state.range(0)));
  std::mt19937_64 rng(3);
  for (auto _ : state) benchmark::DoNotOptimize(kmeans(p, 3, rng));
}
BENCHMARK(BM_KMeans)->Arg(224)->Arg(10000);

void BM_ElbowCurve(benchmark::State& state) {
  const auto p = points(224);  // the size of the alnair training set
  std::mt19937_64 rng(3);
  for (auto _ : state) benchmark::DoNotOptimize(elbow_k(distortion_curve(p, 10, rng)));
}
BENCHMARK(BM_ElbowCurve);

void BM_ColocationRun(benchmark::State& state) {
  std::mt19937_64 rng(4);
  ColocWorld w;
  w.seeded = model(3, rng);
  w.jobs = queue(60, 3, rng);
  w.alone_seconds.assign(60, 0);
  ColocOptions o;
  o.jobs = static_cast<size_t>(state.range(0));
  const auto jobs = make_colocation_workload(w, o, 1);
  const auto policy =
      *find_colocation_policy(state.range(1) != 0 ? "max-pacsav-dur" : "min-indsd", 0.1);
  for (auto _ : state) benchmark::DoNotOptimize(run_colocation(w, jobs, policy, o, 1));
}
BENCHMARK(BM_ColocationRun)->ArgsProduct({{200, 2000}, {0, 1}});

}  // namespace
}  // namespace tessera
