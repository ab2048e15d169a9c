// Accounting (like Slurm's sacct / sreport): what each tenant and queue used over a time
// window, from the record of every run of every job. A pure function of those records, so the
// service, its client and tests compute it one way.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tessera {

// One run (attempt) of a job: from its start until its processes were gone. A run still going
// is passed with ended = the time the report is made and outcome "running".
struct RunRecord {
  int64_t job = 0;
  int32_t attempt = 0;
  std::string tenant;
  std::string queue;  // the queue tree path of the tenant's leaf when it ran
  double started = 0;
  double ended = 0;
  // succeeded | failed | timeout | cancelled | preempted | requeued | running
  std::string outcome;
  std::map<std::string, int64_t> gpu_milli;  // held, by GPU type name
  int64_t cpu_milli = 0;                     // held (all members)
  int64_t mem_mib = 0;
  int64_t preempted_by = -1;        // the job it gave way to (outcome preempted), else -1
  std::string preempted_by_tenant;  // ... and its tenant
};

// A job as accounting sees it.
struct JobRecord {
  int64_t id = 0;
  std::string tenant;
  std::string queue;
  std::string state;  // its state now
  double submitted = 0;
  double finished = -1;  // -1: not finished
};

struct UsageRow {
  std::string tenant;
  std::string queue;
  std::map<std::string, double> gpu_hours;  // by GPU type, within the window
  double cpu_hours = 0;
  std::map<std::string, int64_t> jobs;  // finished within the window, by final state
  int64_t started = 0;                  // jobs whose first run started within the window
  double wait_hours_sum = 0;            // ... their total wait from submission to first start
  int64_t preempted = 0;                // runs of its jobs preempted within the window (suffered)
  int64_t preemptor = 0;                // runs of others' jobs preempted for its jobs (caused)
  double mean_wait_hours() const { return started > 0 ? wait_hours_sum / started : 0; }
  double total_gpu_hours() const;
};

// Per (tenant, queue), sorted by tenant then queue: usage within [since, until) (a run counts
// the part of it inside the window). Tenants with nothing in the window are left out.
std::vector<UsageRow> usage_report(const std::vector<RunRecord>& runs,
                                   const std::vector<JobRecord>& jobs, double since, double until);

// Prices per GPU-hour by GPU type, and per CPU-hour: a YAML map, e.g.
//   V100: 2.48
//   A100-80G: 4.10
//   cpu_hour: 0.04
// Throws std::invalid_argument naming the file and the key for anything else.
struct PriceTable {
  std::map<std::string, double> gpu_hour;
  double cpu_hour = 0;
};
PriceTable load_prices(const std::string& path);
// The cost of a row; the GPU types it used that have no price are added to `unpriced`.
double cost_of(const UsageRow& row, const PriceTable& prices, std::vector<std::string>& unpriced);

}  // namespace tessera
