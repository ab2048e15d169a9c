// The discrete-event simulator: replays a workload on a cluster through the engine.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "engine/decisions.h"
#include "engine/goodput_allocation.h"
#include "engine/policy.h"
#include "engine/power_budget.h"
#include "insight/power_model.h"
#include "model/carbon_intensity.h"
#include "model/cluster.h"
#include "model/job.h"
#include "model/progress.h"
#include "model/queue_tree.h"
#include "sim/data_staging.h"
#include "sim/execution_model.h"
#include "sim/failure_model.h"
#include "sim/fairness_tracker.h"
#include "sim/pollux_profile.h"
#include "sim/recovery_policy.h"
#include "sim/restart_model.h"

namespace tessera {

class RuntimePredictor;  // insight/runtime_predictor.h

// Power and energy (docs/energy.md): what is counted besides the GPUs, and the power policies.
struct EnergySettings {
  double node_base_w = 0;      // each node's draw besides its GPUs (CPU, memory, fans), always on
  double pue = 1;              // facility energy = IT energy x PUE
  double cap_w = kNoPowerCap;  // cap on the cluster's estimated IT draw
  std::vector<double> rack_cap_w;  // by RackId; kNoPowerCap where none (empty: none)
  // By NodeId: the most a node may draw above idle (thermal headroom); < 0 where unconstrained
  // (empty: none).
  std::vector<double> node_headroom_w;
  double energy_weight = 0;  // Zeus's eta for queues that set none (0: full power)
  double price_per_kwh = 0;  // for the result's cost (facility energy x price)
  // Node sleep (consolidation): a node with nothing on it for `sleep_after_s` powers down
  // (draws nothing) and a job placed on it begins `wake_s` later, once it has booted. < 0: off.
  // Placement is what consolidates: bin-packing scorers (bestfit, topology) fill busy nodes
  // first, so whole nodes go idle.
  double sleep_after_s = -1;
  double wake_s = 0;
  bool policies() const {
    return cap_w < kNoPowerCap || energy_weight > 0 || !node_headroom_w.empty() ||
           std::any_of(rack_cap_w.begin(), rack_cap_w.end(),
                       [](double c) { return c < kNoPowerCap; });
  }
};

struct SimOptions {
  // Orders whose ranking changes with time (las) are re-evaluated this often while work waits.
  double tick_seconds = 60;
  std::ostream* events = nullptr;  // JSON-lines event log, or none
  // The queue tree, bound to the workload's tenants; null: one equal queue per tenant.
  const QueueTree* queues = nullptr;
  // A preempted job is asked to checkpoint: it stops at once, but its GPUs reach the job that
  // preempted it only after this long (that job starts then), and it waits again only after
  // its checkpoint is written. Jobs that checkpoint on request (checkpoint_interval 0) lose
  // nothing; others lose the work since their last periodic checkpoint.
  double checkpoint_grace = 30;
  // What a restart after a preemption costs besides the job's own restart_cost (re-initialising,
  // reading the checkpoint back; sim/restart_model.h). Off by default.
  RestartModel restart;
  // Buckets of the share-vs-entitlement time series; <= 0: none.
  double series_interval = 3600;
  // Jobs whose history (submit, each change of pending reason, start, preemption, finish) is
  // recorded in SimResult::histories: the "why is my job pending" of a replay.
  std::vector<JobId> explain;
  // Hold GPUs back for inference-critical arrivals, from a Holt-Winters forecast of their
  // arrivals (sim/inference_reserve.h).
  bool reserve_inference = false;
  // Node failures (sim/failure_model.h), sorted by time, and what happens to the jobs they
  // stop (sim/recovery_policy.h; not owned, it may learn; null: requeue).
  std::vector<NodeFailure> failures;
  RecoveryPolicy* recovery = nullptr;
  // Duration prediction (docs/prediction.md), or none (the trace's estimates, as given). With
  // one, each job's duration_estimate (what sjf/qssf order by and EASY backfill plans with) is
  // set at submission to the prediction from the jobs finished so far, and every finished job
  // is observed with the time it ran. keep_trace_estimates: jobs whose trace gives an estimate
  // keep it (a user's own estimate), only the others are predicted. A running job past its
  // predicted end is expected to run as long again as it has run (docs/prediction.md).
  // Not owned; it learns.
  RuntimePredictor* predictor = nullptr;
  bool keep_trace_estimates = false;
  // Told now and then how many jobs have finished and how far simulated time has come (for a
  // progress line); it changes nothing in the run. Null: never.
  ProgressFn progress;
  // The reference the incremental cycle is tested against: every cycle sorts a plain snapshot
  // of the pending jobs and walks all of them (no PendingQueue). The schedule is the same;
  // only the time it takes differs (tests/simulator_test.cc, IncrementalCycles).
  bool full_cycles = false;
  // The power model (not owned): with one, every job's, tenant's and the cluster's energy is
  // estimated (SimResult::energy), and the power settings apply. Null: no energy figures.
  const PowerModel* power = nullptr;
  EnergySettings energy;
  // Carbon intensity on the trace's clock (CarbonIntensity::TimeBase::kRelative; not owned):
  // carbon per job, tenant and the cluster (with `power`), and deferral of best-effort jobs in
  // queues that set carbon_defer. Null: none.
  const CarbonIntensity* carbon = nullptr;
  // Round-based scheduling (Gavel's mechanism; sim/gavel_rounds.h): > 0: every this many
  // seconds the jobs that want to run get time shares of each GPU type from a max-min
  // fairness LP, and the round's plan decides who runs where until the next round (running jobs
  // it moves are preempted: checkpoint grace, then restarted where it puts them). Jobs start
  // only at round boundaries. With Policy::heterogeneity the LP weighs each job's throughput on
  // each type; without, every type counts the same (Gavel's heterogeneity-agnostic baseline).
  double round_seconds = 0;
  // How much a running job's claim on its type is multiplied by before the plan moves it
  // (engine/round_plan.h; 1: Gavel's rule as published). A move costs the checkpoint grace and
  // a restart: 4 halves the mean JCT lost to moves on the Philly/Gavel setup
  // (docs/heterogeneity.md).
  double round_stay_factor = 4;
  // At most this many jobs enter a round's LP (every running job, then the waiting ones with
  // the least attained service; the others wait that round); 0: all.
  size_t round_lp_jobs = 0;
  // Goodput-aware elastic scheduling (Policy::goodput; sim/goodput_rounds.h), at every round:
  // the application profiles that are the truth of how adaptive jobs train (not owned; jobs
  // whose application has no profile are rigid gangs), and how GPUs are shared out.
  const PolluxProfiles* adaptive_profiles = nullptr;
  GoodputAllocationOptions goodput;
  // Data staging (docs/data.md; sim/data_staging.h), when the cluster declares storage tiers
  // and jobs name datasets: how caches evict; locality-aware placement (a job is placed on
  // nodes holding its dataset when it fits there, and waits up to locality_wait for them);
  // pre-staging (after each cycle the first prestage_jobs waiting jobs with a dataset have it
  // copied towards the nodes they are expected to get, with at most prestage_gbs of the object
  // store's bandwidth in all).
  CacheEviction data_eviction = CacheEviction::kLru;
  bool data_locality = false;
  double locality_wait = 0;
  bool prestage = false;
  double prestage_gbs = 0;
  int prestage_jobs = 4;
  // Residency (with pre-staging's bandwidth): every node gets a home dataset, each dataset
  // wanted by waiting and running jobs as many nodes as its share of their GPUs; a node keeps
  // its home's copy against eviction, and an idle one is given it ahead.
  bool residency = false;
};

struct HistoryEntry {
  double t = 0;
  std::string what;
};
struct JobHistory {
  JobId job = 0;
  std::vector<HistoryEntry> entries;
};

struct JobOutcome {
  double submit = 0;
  double first_start = -1;
  double finish = -1;
  int32_t preemptions = 0;
  double gpu_seconds = 0;            // allocated GPU time (whole-GPU equivalents x seconds)
  double effective_gpu_seconds = 0;  // allocated time weighted by the progress rate achieved
  double lost_work_seconds = 0;      // reference-seconds of work lost to preemption
  double lost_gpu_seconds = 0;       // GPU-seconds of allocated time whose work was lost
  // Preemption's other costs: GPU-seconds it held its GPUs checkpointing (the grace), and spent
  // restarting after one (its restart_cost and the restart model's), making no progress.
  double grace_gpu_seconds = 0;
  double restart_gpu_seconds = 0;
  double gpu_energy_j = 0;  // its GPUs' estimated draw over the time it held them
  double gpu_carbon_g = 0;  // ... and its carbon (SimOptions::carbon)
  bool has_first_reason = false;
  PendingCode first_reason = PendingCode::kInsufficientGpus;
};

struct TenantSeries {
  double gpu_seconds = 0;  // allocated GPU-seconds over the run
  // Accounting (tessera usage --result): the same by GPU type (GpuTypeId), CPU core-seconds
  // held, the preemptions this tenant's jobs caused, and its leaf queue's path.
  std::vector<double> gpu_seconds_by_type;
  double cpu_seconds = 0;
  double gpu_energy_j = 0;  // its jobs' GPU energy (SimOptions::power)
  double gpu_carbon_g = 0;  // ... and its carbon (SimOptions::carbon)
  uint64_t preemptor = 0;
  std::string queue;
};

// Node failures and how the cluster recovered from them.
struct FailureStats {
  uint64_t failures = 0;     // node failures that happened (a node already down does not fail)
  uint64_t jobs_hit = 0;     // job runs they stopped
  std::vector<double> frt;   // per failure that hit jobs: seconds until every one runs again
  uint64_t unrecovered = 0;  // failures whose jobs had not all run again when the run ended
  uint64_t restarted_in_place = 0;  // hit jobs the recovery policy restarted at once
  double lost_gpu_seconds = 0;      // allocated GPU time whose work the failures lost
  std::vector<double> times;        // when each node failure happened (the report's timeline)
};

// The cluster's energy (SimOptions::power): IT = node base + every GPU, busy or idle.
struct EnergyStats {
  bool modelled = false;
  double it_j = 0;  // the cluster's estimated IT energy over the run
  double gpu_busy_j = 0;
  bool carbon = false;       // SimOptions::carbon was given
  double it_carbon_g = 0;    // the IT energy's carbon
  double busy_carbon_g = 0;  // the jobs' GPUs' share of it  // the part the jobs' GPUs drew (their
                             // shares of the GPUs they held)
  double idle_w = 0;         // the cluster's draw with nothing running
  double peak_w = 0;         // highest estimated IT draw
  double pue = 1;            // as configured (EnergySettings), for the report
  double price_per_kwh = 0;
  double cap_w = kNoPowerCap;
  uint64_t limit_changes = 0;  // running jobs' power limits changed (lowered or raised back)
  double slept_j = 0;          // energy not drawn because nodes slept (node base + idle GPUs)
  double asleep_node_seconds = 0;
  uint64_t wakes = 0;            // nodes woken for a job
  double wake_wait_seconds = 0;  // job starts' delay waiting for nodes to wake (summed)
  // Per bucket of `series_interval` seconds from the first submit: IT energy, the part jobs'
  // GPUs drew, and the energy sleeping nodes did not draw (J).
  double series_interval = 3600;
  std::vector<double> it_series_j, busy_series_j, slept_series_j;
  double throttled_gpu_seconds = 0;  // GPU time run below the preferred power limit
};

struct SimResult {
  std::vector<JobOutcome> jobs;  // by JobId (Workload::jobs order)
  std::vector<TenantSeries> tenants;
  double first_submit = 0;
  double last_finish = 0;
  double allocated_gpu_seconds = 0;
  double effective_gpu_seconds = 0;
  // Jain's index over leaf queues of received/entitled share, integrated over the time every
  // queue with jobs had demand, and that time.
  double jain_integral = 0;
  double jain_time = 0;
  ShareSeries series;
  std::vector<JobHistory> histories;  // one per SimOptions::explain job, in that order
  uint64_t resizes = 0;               // elastic gangs grown or shrunk
  FailureStats failure;
  uint64_t cycles = 0;
  uint64_t events = 0;
  uint64_t preemptions = 0;
  uint64_t rounds = 0;           // round boundaries played (SimOptions::round_seconds)
  uint64_t round_lp_solves = 0;  // of which the job set changed, so the LP was solved
  std::array<uint64_t, kPreemptionCauses> preemptions_by_cause{};  // by PreemptionCause
  // GPU time victims held while checkpointing (each preemption: its GPUs x the grace), the
  // cost of a preemption even when no work is lost.
  double preemption_grace_gpu_seconds = 0;
  std::vector<double> preemption_times;  // one per preemption, in order (the report's timeline)
  EnergyStats energy;
  DataStats data;  // SimOptions' data staging (zeros without storage tiers)
  bool data_modelled = false;
};

// Runs every job of `w` to completion. Jobs must have passed admission (infeasible_reason);
// throws std::invalid_argument naming the first job that did not.
SimResult simulate(const Workload& w, const Cluster& c, const Policy& policy,
                   const ExecutionModel& model, const SimOptions& opt);

}  // namespace tessera
