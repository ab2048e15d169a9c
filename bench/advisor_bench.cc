// Time for one `tessera advise` search: the GPT-3 175B example with the gang size
// chosen by the advisor (every gang size up to 4096 GPUs), and on a fixed gang of 1536.
#include <benchmark/benchmark.h>

#include "insight/parallelism_advisor.h"

namespace tessera {
namespace {

const ModelSpec kGpt3{175e9, 96, 12288, 96, 2048, 51200, 1536};

void BM_AdviseChoosingGang(benchmark::State& state) {
  const HardwareSpec hw = hardware_for("A100-80G", 8);
  AdvisorOptions o;
  o.max_zero = static_cast<int>(state.range(0));
  long evaluated = 0;
  for (auto _ : state) {
    const Advice a = advise(kGpt3, hw, o);
    evaluated = a.evaluated;
    benchmark::DoNotOptimize(a.plans.front().time.total);
  }
  state.counters["configurations"] = static_cast<double>(evaluated);
}
BENCHMARK(BM_AdviseChoosingGang)->Arg(0)->Arg(3)->Unit(benchmark::kMicrosecond);

void BM_AdviseFixedGang(benchmark::State& state) {
  const HardwareSpec hw = hardware_for("A100-80G", 8);
  AdvisorOptions o;
  o.gpus = 1536;
  for (auto _ : state) {
    const Advice a = advise(kGpt3, hw, o);
    benchmark::DoNotOptimize(a.plans.front().time.total);
  }
}
BENCHMARK(BM_AdviseFixedGang)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace tessera
