// The per-submission work of `tessera serve` beside HTTP: parsing a job spec and committing
// it (one SQLite transaction with its audit entry). scripts/api_load.sh measures the whole
// request path with wrk.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "store/job_request.h"
#include "store/store.h"

namespace tessera {
namespace {

constexpr const char* kJson =
    R"({"name":"train","tenant":"team-a","gang":{"min":2,"max":2},"resources":{"gpus":1,)"
    R"("cpu":4,"memory":"16Gi"},"command":["python","train.py","--epochs","10"],)"
    R"("env":{"BATCH":"64"}})";

constexpr const char* kYaml = R"(name: train
tenant: team-a
gang: {min: 2, max: 2}
resources: {gpus: 1, cpu: 4, memory: 16Gi}
command: ["python", "train.py", "--epochs", "10"]
env: {BATCH: "64"}
)";

void BM_ParseJobRequestJson(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(parse_job_request(kJson));
}
BENCHMARK(BM_ParseJobRequestJson);

void BM_ParseJobRequestYaml(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(parse_job_request(kYaml));
}
BENCHMARK(BM_ParseJobRequestYaml);

// One submission's transaction (job row + audit entry), WAL with synchronous=NORMAL (the
// default) or FULL (--sync-full).
void BM_StoreInsertJob(benchmark::State& state) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("tessera-bench-" + std::to_string(getpid()) + ".db"))
                               .string();
  {
    Store store(path, Store::Options{state.range(0) != 0});
    JobRow row;
    row.tenant = "team-a";
    row.spec = parse_job_request(kJson);
    const AuditEntry audit{0, 1, "team-a", "POST", "/v1/jobs", 201, ""};
    for (auto _ : state) {
      row.id = 0;
      store.insert_job(row, &audit);
    }
  }
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
}
BENCHMARK(BM_StoreInsertJob)->Arg(0)->Arg(1)->ArgName("sync_full");

// GET /v1/jobs over a history of finished jobs out of memory (retention): one page of 500 from
// a database of range(0) evicted jobs (8 tenants; one in 50 failed), newest first, by state,
// by tenant. The page's cost must not grow with the history (partial indexes).
void BM_ListEvictedJobs(benchmark::State& state) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("tessera-bench-list-" + std::to_string(getpid()) + ".db"))
                               .string();
  const auto n = static_cast<size_t>(state.range(0));
  {
    Store store(path);
    std::vector<JobRow> rows(10000);
    std::vector<int64_t> ids;
    for (size_t done = 0; done < n; done += rows.size()) {
      for (size_t k = 0; k < rows.size(); ++k) {
        JobRow& r = rows[k];
        r = JobRow{};
        r.tenant = "team-" + std::to_string((done + k) % 8);
        r.spec = parse_job_request(kJson);
        r.state = (done + k) % 50 == 0 ? JobState::kFailed : JobState::kSucceeded;
        r.submitted_at = static_cast<double>(done + k);
        r.finished_at = r.submitted_at + 60;
      }
      store.insert_jobs(rows);
      ids.clear();
      for (const JobRow& r : rows) ids.push_back(r.id);
      store.mark_evicted(ids);
    }
    const int which = static_cast<int>(state.range(1));
    EvictedQuery q;
    q.newest_first = true;
    q.limit = 500;
    if (which == 1) q.states = {JobState::kFailed};
    if (which == 2) q.tenant = "team-3";
    for (auto _ : state) benchmark::DoNotOptimize(store.evicted_jobs(q));
  }
  for (const char* suffix : {"", "-wal", "-shm", ".lock"}) std::filesystem::remove(path + suffix);
}
BENCHMARK(BM_ListEvictedJobs)
    ->ArgsProduct({{100'000, 1'000'000}, {0, 1, 2}})
    ->ArgNames({"jobs", "filter"})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(20);

}  // namespace
}  // namespace tessera
