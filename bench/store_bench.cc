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

}  // namespace
}  // namespace tessera
