// `tessera serve`'s scheduling tick with a long queue that cannot start: four
// tenants each hold their fair share of the 8 GPUs and N jobs of theirs wait; a tick in which
// nothing changed, and the tick after a running job ends. Local backend, virtual GPUs, a real
// `sleep` as each running job.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "control/serve/service.h"
#include "store/job_request.h"

namespace tessera {
namespace {

// A server with 8 virtual GPUs whose four tenants each run a 2-GPU `sleep` (their fair share)
// and have `pending` jobs of `gpus` GPUs waiting in all (round-robin), after the cycle that
// gave every waiting job its reason.
class LongQueue {
 public:
  LongQueue(int pending, int gpus, double& now)
      : dir_(std::filesystem::temp_directory_path() /
             ("tessera-service-bench-" + std::to_string(getpid()) + "-" + std::to_string(pending) +
              "-" + std::to_string(gpus))) {
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    ServiceOptions o;
    o.db_path = (dir_ / "t.db").string();
    o.work_dir = (dir_ / "jobs").string();
    o.virtual_gpus = 8;
    o.history_interval_seconds = 0;
    o.clock = [&now] { return now; };
    o.limits.max_pending_jobs = 1'000'000;
    o.limits.submissions_per_second = 0;
    service_ = std::make_unique<Service>(o);
    for (int t = 0; t < 4; ++t) running_.push_back(run_sleep(t));
    service_->tick();
    for (int i = 0; i < pending; ++i) {
      service_->submit(
          admin_,
          parse_job_request("name: w" + std::to_string(i) + "\ntenant: t" + std::to_string(i % 4) +
                            "\nresources: {gpus: " + std::to_string(gpus) + "}\ncommand: [x]\n"),
          "", nullptr);
    }
    now += 1;
    service_->tick();
  }
  ~LongQueue() {
    for (const int64_t id : running_) service_->cancel(admin_, id, true);
    for (int i = 0; i < 100; ++i) service_->tick();
    service_.reset();
    std::filesystem::remove_all(dir_);
  }
  Service& service() { return *service_; }
  // Tenant t's running job is killed (its process is gone when this returns).
  void kill(int t) {
    service_->cancel(admin_, running_[static_cast<size_t>(t)], true);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // Tenant t runs a new 2-GPU sleep, of a higher class than its waiting jobs (so it is not
  // held behind their reservation): it starts at the next tick.
  void replace(int t) { running_[static_cast<size_t>(t)] = run_sleep(t, "production"); }

 private:
  int64_t run_sleep(int t, const std::string& priority_class = "research") {
    return service_
        ->submit(admin_,
                 parse_job_request("name: big\ntenant: t" + std::to_string(t) +
                                   "\npriority_class: " + priority_class +
                                   "\nresources: {gpus: 2}\ncommand: [sleep, '3600']\n"),
                 "", nullptr)
        .row.id;
  }
  std::filesystem::path dir_;
  const RequestContext admin_{Caller{true, ""}, "POST", "/v1/jobs"};
  std::unique_ptr<Service> service_;
  std::vector<int64_t> running_;  // by tenant
};

// Each timed tick polls the running jobs' processes and runs a cycle in which nothing changed.
void BM_ServiceTickLongQueue(benchmark::State& state) {
  const auto pending = static_cast<int>(state.range(0));
  double now = 1e9;
  {
    LongQueue q(pending, 1, now);
    for (auto _ : state) {
      now += 1;
      q.service().tick();
    }
    if (q.service().metrics().starts != 4) state.SkipWithError("jobs of the long queue started");
  }
  state.counters["pending"] = pending;
}
BENCHMARK(BM_ServiceTickLongQueue)
    ->Arg(10000)
    ->Arg(68000)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(20);

// The tick after one tenant's running job ends, with its 2 GPUs free and the waiting jobs
// needing 3 each (none can use them): the poll that sees the end, the queue brought up to the
// change, and the cycle. (Untimed: the kill before it, and the replacement job after.)
void BM_ServiceTickAfterOneEnds(benchmark::State& state) {
  const auto pending = static_cast<int>(state.range(0));
  double now = 1e9;
  {
    LongQueue q(pending, 3, now);
    uint64_t starts = q.service().metrics().starts;
    int t = 0;
    for (auto _ : state) {
      state.PauseTiming();
      q.kill(t);
      now += 1;
      state.ResumeTiming();
      q.service().tick();
      state.PauseTiming();
      if (q.service().metrics().starts != starts) {
        state.SkipWithError("a waiting job started");
        break;
      }
      q.replace(t);
      now += 1;
      q.service().tick();
      starts = q.service().metrics().starts;
      t = (t + 1) % 4;
      state.ResumeTiming();
    }
  }
  state.counters["pending"] = pending;
}
BENCHMARK(BM_ServiceTickAfterOneEnds)
    ->Arg(10000)
    ->Arg(68000)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(20);

}  // namespace
}  // namespace tessera
