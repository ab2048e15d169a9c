// Accounting (like Slurm's sacct / sreport): what each tenant and queue used over a time
// window, from the record of every run of every job. A pure function of those records, so the
// service, its client and tests compute it one way.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "model/carbon_intensity.h"

namespace tessera {

// One run (attempt) of a job: from its start until its processes were gone. A run still going
// is passed with ended = the time the report is made and outcome "running".
struct RunRecord {
  int64_t job = 0;
  int32_t attempt = 0;
  std::string tenant;
  std::string user;   // who of the tenant submitted the job; "" = the tenant's token, the admin
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
  // Its estimated GPU draw (W) while it ran, all GPUs together: per GPU type held, the
  // GPUs' share x the power model's median curve at that type's TDP (control/energy.h); 0
  // where unknown (a GPU type without power figures, a run recorded before energy was).
  double gpu_watts = 0;
};

// A job as accounting sees it.
struct JobRecord {
  int64_t id = 0;
  std::string tenant;
  std::string queue;
  std::string state;  // its state now
  double submitted = 0;
  double finished = -1;  // -1: not finished
  std::string user;      // who of the tenant submitted it; "" = the tenant's token, the admin
};

struct UsageRow {
  std::string tenant;
  std::string queue;
  // By user (usage_report's by_user): who of the tenant submitted the jobs; "" for the
  // tenant's own token and the admin. Not by user: "".
  std::string user;
  std::map<std::string, double> gpu_hours;  // by GPU type, within the window
  double cpu_hours = 0;
  std::map<std::string, int64_t> jobs;  // finished within the window, by final state
  int64_t started = 0;                  // jobs whose first run started within the window
  double wait_hours_sum = 0;            // ... their total wait from submission to first start
  int64_t preempted = 0;                // runs of its jobs preempted within the window (suffered)
  int64_t preemptor = 0;                // runs of others' jobs preempted for its jobs (caused)
  // Estimated GPU energy (kWh) of its runs within the window (no node base power, no PUE; a
  // simulation's result gives its own figure); -1 = unknown (shown as "-", not 0).
  double energy_kwh = -1;
  // The carbon of that energy (kg CO2) under the carbon-intensity series; -1 = no series.
  double carbon_kg = -1;
  double mean_wait_hours() const { return started > 0 ? wait_hours_sum / started : 0; }
  double total_gpu_hours() const;
};

// Per (tenant, queue), sorted by tenant then queue (with `by_user`, per (tenant, queue, user),
// as Slurm's sreport by user): usage within [since, until) (a run counts
// the part of it inside the window). Tenants with nothing in the window are left out. Energy is
// each run's gpu_watts over its part of the window; with `carbon` (an absolute-time series,
// Unix seconds) each row's carbon_kg is that energy under the series' hourly intensity.
std::vector<UsageRow> usage_report(const std::vector<RunRecord>& runs,
                                   const std::vector<JobRecord>& jobs, double since, double until,
                                   const CarbonIntensity* carbon = nullptr, bool by_user = false);

// Prices per GPU-hour by GPU type, per CPU-hour and per kWh of energy: a YAML map, e.g.
//   V100: 2.48
//   A100-80G: 4.10
//   cpu_hour: 0.04
//   kwh: 0.15
// Throws std::invalid_argument naming the file and the key for anything else.
struct PriceTable {
  std::map<std::string, double> gpu_hour;
  double cpu_hour = 0;
  double kwh = 0;  // per kWh of the row's energy_kwh (nothing where energy is unknown)
};
PriceTable load_prices(const std::string& path);
// The cost of a row (GPU-hours, CPU-hours and energy); the GPU types it used that have no price
// are added to `unpriced`.
double cost_of(const UsageRow& row, const PriceTable& prices, std::vector<std::string>& unpriced);

}  // namespace tessera
