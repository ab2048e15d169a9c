// The FGD capacity experiment: one full run (one trace, one policy, one seed) on Alibaba's
// default trace, 1,213 nodes / 6,212 GPUs, ~10,800 arrivals to 130 % demand. The FGD
// authors' Go simulator takes about 10 minutes for the same run.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <string>

#include "sim/alibaba_reader.h"
#include "sim/frag_experiment.h"

namespace tessera {
namespace {

const std::string kDir = std::string(TESSERA_SHARED_DATA) + "/alibaba-gpu-2023";

void run_policy(benchmark::State& st, const char* policy) {
  if (!std::filesystem::exists(kDir + "/openb_pod_list_default.csv")) {
    st.SkipWithError("no shared data");
    return;
  }
  const AlibabaCluster cluster = read_alibaba_nodes(kDir + "/openb_node_list_gpu_node.csv");
  const AlibabaPods pods = read_alibaba_pods(kDir + "/openb_pod_list_default.csv", cluster);
  const auto target = frag::target_workload(pods.pods);
  size_t arrivals = 0;
  for (auto _ : st) {
    // A fresh memo each time: the timed run pays for every fragment it computes.
    frag::FragMemo memo(&target);
    const FragRun r = run_frag_once(cluster.nodes, pods.pods, memo, policy, 42, 1.3);
    arrivals += r.pods_arrived;
    benchmark::DoNotOptimize(r.curve.data());
  }
  st.counters["arrivals/s"] =
      benchmark::Counter(static_cast<double>(arrivals), benchmark::Counter::kIsRate);
}

void BM_FragRunRandom(benchmark::State& st) {
  run_policy(st, "random");
}
void BM_FragRunBestFit(benchmark::State& st) {
  run_policy(st, "bestfit");
}
void BM_FragRunFgd(benchmark::State& st) {
  run_policy(st, "fgd");
}
void BM_FragRunTesseraPack(benchmark::State& st) {
  run_policy(st, "tessera-pack");
}
BENCHMARK(BM_FragRunRandom)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_FragRunBestFit)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_FragRunFgd)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_FragRunTesseraPack)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace tessera
