// `tessera serve`'s scheduling tick with a long queue that cannot start (issue 20): four
// tenants each hold their fair share of the 8 GPUs and N one-GPU jobs of theirs wait; each
// timed tick polls the running jobs' processes and runs a cycle in which nothing changed.
// Local backend, virtual GPUs, a real `sleep` as each running job.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>

#include "control/service.h"
#include "store/job_request.h"

namespace tessera {
namespace {

void BM_ServiceTickLongQueue(benchmark::State& state) {
  const auto pending = static_cast<int>(state.range(0));
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() /
      ("tessera-service-bench-" + std::to_string(getpid()) + "-" + std::to_string(pending));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  double now = 1e9;
  {
    ServiceOptions o;
    o.db_path = (dir / "t.db").string();
    o.work_dir = (dir / "jobs").string();
    o.virtual_gpus = 8;
    o.history_interval_seconds = 0;
    o.clock = [&now] { return now; };
    o.limits.max_pending_jobs = 1'000'000;
    o.limits.submissions_per_second = 0;
    Service s(o);
    const RequestContext admin{Caller{true, ""}, "POST", "/v1/jobs"};
    // Each of the four tenants holds its fair share (2 of the 8 GPUs): no waiting job may
    // start, by its queue's share or by reclaim.
    for (int t = 0; t < 4; ++t) {
      s.submit(
          admin,
          parse_job_request("name: big" + std::to_string(t) + "\ntenant: t" + std::to_string(t) +
                            "\nresources: {gpus: 2}\ncommand: [sleep, '3600']\n"),
          "", nullptr);
    }
    s.tick();
    for (int i = 0; i < pending; ++i) {
      s.submit(admin,
               parse_job_request("name: w" + std::to_string(i) + "\ntenant: t" +
                                 std::to_string(i % 4) + "\nresources: {gpus: 1}\ncommand: [x]\n"),
               "", nullptr);
    }
    now += 1;
    s.tick();
    for (auto _ : state) {
      now += 1;
      s.tick();
    }
    if (s.metrics().starts != 4) state.SkipWithError("jobs of the long queue started");
    for (int64_t id = 1; id <= 4; ++id) s.cancel(admin, id, true);
    for (int i = 0; i < 100; ++i) s.tick();
  }
  std::filesystem::remove_all(dir);
  state.counters["pending"] = pending;
}
BENCHMARK(BM_ServiceTickLongQueue)
    ->Arg(10000)
    ->Arg(68000)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(20);

}  // namespace
}  // namespace tessera
