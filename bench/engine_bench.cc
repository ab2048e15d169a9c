// Hot paths: one scheduling cycle on a large cluster, and the simulator's event loop.
#include <benchmark/benchmark.h>

#include "engine/cycle.h"
#include "engine/policy.h"
#include "model/cluster_spec.h"
#include "sim/engine_fixture.h"
#include "sim/execution_model.h"
#include "sim/generator.h"
#include "sim/simulator.h"

namespace tessera {
namespace {

// Args: pending jobs, GPUs per job (gang members), cluster fill percent. 5,000 nodes x 8 GPUs.
void run_cycle(benchmark::State& st, const char* policy_name, int tenants = 1) {
  EngineFixtureSpec spec;
  spec.tenants = tenants;
  spec.pending = static_cast<int>(st.range(0));
  spec.gang = static_cast<int>(st.range(1));
  spec.fill = static_cast<double>(st.range(2)) / 100.0;
  const EngineFixture fx(spec);
  const Policy policy = make_policy(policy_name, 1);
  size_t placed = 0;
  for (auto _ : st) {
    const Decisions d = schedule_cycle(fx.snapshot(), policy);
    placed += d.starts.size();
    benchmark::DoNotOptimize(d.starts.data());
  }
  st.counters["placements/s"] =
      benchmark::Counter(static_cast<double>(placed), benchmark::Counter::kIsRate);
}

void BM_CycleBestFit(benchmark::State& st) {
  run_cycle(st, "fifo+bestfit");
}
// The hierarchical fair order with reclaim, ten tenants sharing the queue.
void BM_CycleFair(benchmark::State& st) {
  run_cycle(st, "fair+bestfit", 10);
}
BENCHMARK(BM_CycleFair)->Args({10000, 1, 0})->Args({10000, 1, 100})->Unit(benchmark::kMillisecond);
void BM_CycleTopology(benchmark::State& st) {
  run_cycle(st, "fifo+topology");
}
BENCHMARK(BM_CycleBestFit)
    ->Args({10000, 1, 0})
    ->Args({10000, 1, 100})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_CycleTopology)
    ->Args({2000, 16, 0})
    ->Args({2000, 16, 100})
    ->Unit(benchmark::kMillisecond);

// Simulator throughput on the generated workload (scaled up) on 256 x 8 GPUs.
void BM_Simulate(benchmark::State& st) {
  GeneratorOptions g;
  g.seed = 1;
  g.jobs = static_cast<int>(st.range(0));
  g.mean_interarrival_s = 10;
  const Workload w = generate_workload(g);
  const Cluster c = make_uniform_cluster(1, 8, 32, 8);
  const auto model = make_measured_execution_model(TESSERA_SHARED_DATA);
  const Policy policy = make_policy("las+topology", 1);
  uint64_t events = 0;
  for (auto _ : st) {
    const SimResult r = simulate(w, c, policy, *model, SimOptions{});
    events += r.events;
  }
  st.counters["events/s"] =
      benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Simulate)->Arg(5000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace tessera
