// tessera bench: how fast one scheduling cycle is on a large synthetic cluster.
#include <fmt/format.h>

#include <chrono>
#include <iostream>

#include "apps/commands.h"
#include "engine/cycle.h"
#include "engine/policy.h"
#include "sim/engine_fixture.h"

namespace tessera {

CLI::App* add_bench_command(CLI::App& app, BenchArgs& a) {
  CLI::App* b = app.add_subcommand("bench", "Time one scheduling cycle on a synthetic cluster");
  b->add_option("--nodes", a.nodes, "nodes");
  b->add_option("--gpus-per-node", a.gpus_per_node, "GPUs per node");
  b->add_option("--pending", a.pending, "pending jobs");
  b->add_option("--gang", a.gang, "GPUs (members) per job");
  b->add_option("--policy", a.policy, "policy, e.g. fifo+bestfit or fifo+topology");
  b->add_option("--repeat", a.repeat, "cycles to time (the best is reported)");
  return b;
}

int run_bench(const BenchArgs& a) {
  const Policy policy = make_policy(a.policy, 1);
  for (double fill : {0.0, 1.0}) {
    EngineFixtureSpec spec;
    spec.nodes = a.nodes;
    spec.gpus_per_node = a.gpus_per_node;
    spec.pending = a.pending;
    spec.gang = a.gang;
    spec.fill = fill;
    const EngineFixture fx(spec);
    double best = 1e300;
    size_t starts = 0;
    for (int i = 0; i < a.repeat; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      const Decisions d = schedule_cycle(fx.snapshot(), policy);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      best = std::min(best, s);
      starts = d.starts.size();
    }
    std::cout << fmt::format(
        "{} nodes x {} GPUs, {} pending {}-GPU jobs, cluster {} full, {}: cycle {:.1f} ms, "
        "{} placed, {:.0f} placements/s\n",
        a.nodes, a.gpus_per_node, a.pending, a.gang, fill > 0 ? "100%" : "0%", policy.name(),
        best * 1e3, starts, starts > 0 ? static_cast<double>(starts) / best : 0.0);
  }
  return 0;
}

}  // namespace tessera
