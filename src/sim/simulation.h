// The simulation behind tessera::simulate() (sim/simulator.h): its per-job state and the class
// that replays a workload on a cluster. A private header of src/sim, not part of the public
// API: only the simulation's own files include it. The class is defined in parts, one
// responsibility per file:
//   simulator.cc            simulate(), construction and the event loop
//   simulation_jobs.cc      a job's life: submission, start, finish, preemption, requeue, and
//                           the accounting of its runs
//   simulation_cycle.cc     a scheduling cycle: the engine's snapshot and applying its
//                           decisions, elastic resizes
//   simulation_rounds.cc    round-based scheduling: Gavel rounds and goodput rounds
//   simulation_failures.cc  node failures and the recovery of the jobs they stop
//   simulation_power.cc     power and energy bookkeeping, node sleep and wake
//   simulation_log.cc       the event log and explained jobs' histories
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/admission.h"
#include "engine/cycle.h"
#include "engine/fair_share.h"
#include "engine/pending_queue.h"
#include "engine/rng.h"
#include "engine/running_set.h"
#include "insight/runtime_predictor.h"
#include "sim/event_queue.h"
#include "sim/gavel_rounds.h"
#include "sim/goodput_rounds.h"
#include "sim/inference_reserve.h"
#include "sim/simulator.h"

namespace tessera::sim_detail {

// kCheckpointing: preempted, writing its checkpoint during the grace; neither pending nor
// holding GPUs.
enum class Phase : uint8_t { kFuture, kPending, kRunning, kCheckpointing, kDone };

struct JobState {
  Phase phase = Phase::kFuture;
  double remaining = 0;     // reference-seconds of work left (as of run_start)
  double speed = 1;         // progress rate of the current run
  double run_start = 0;     // when the current run started
  double restart_cost = 0;  // no progress for this long after run_start
  // Of restart_cost, what a restart after a preemption costs and the run has not yet spent
  // (accounted as preemption's cost as it is spent); and whether it was preempted since it last
  // started (its next start is such a restart).
  double restart_overhead = 0;
  bool preempted = false;
  double attained = 0;  // GPU-seconds before the current run
  double ran = 0;       // productive seconds over all runs (what a predictor observes)
  double queued_since = 0;
  uint32_t generation = 0;
  Allocation alloc;
  bool begun = false;  // running and past its victims' grace (holds its GPUs in the metrics)
  double reclaim_protected_until = 0;
  // While checkpointing after a preemption: what it still holds in the metrics.
  double grace_gpus = 0;
  Amounts grace_amounts = kZeroAmounts;
  Allocation grace_alloc;  // where, for accounting by GPU type
  // Power (SimOptions::power): its GPU power limit (0: TDP), the speed factor that limit
  // gives, its GPUs' draw (W, whole) and the part above idle the cluster's draw counts while it
  // holds them (also through a checkpoint grace).
  double limit_w = 0;
  double power_speed = 1;
  // Data (docs/data.md): the speed factor of a run that streams its dataset from the object
  // store (its share of the store's bandwidth over what its GPUs read; 1 otherwise).
  double data_speed = 1;
  double draw_w = 0;
  double inc_w = 0;
  bool drawing = false;
  // For explained jobs (SimOptions::explain): index into SimResult::histories, and the pending
  // reason last recorded, so that the history lists changes, not every cycle.
  int32_t history = -1;
  // Restarting after a node failure: the index of that failure's record, else -1.
  int32_t recovering = -1;
  bool has_reason = false;
  PendingCode reason = PendingCode::kInsufficientGpus;
  uint32_t reason_queue = kNoId;
  JobId reason_blocker = kNoId;
  // Round-based scheduling: rounds it has wanted to run in, rounds it ran on each GPU type, and
  // the type this round's plan gives it (kNoGpuType: none).
  double rounds = 0;
  std::vector<double> rounds_on;
  GpuTypeId planned = kNoGpuType;
};

class Simulation {
 public:
  // `predicted` is `w` itself (a copy the caller owns) when o.predictor is set: the
  // simulation writes each job's predicted duration_estimate into it at submission.
  Simulation(const Workload& w, const Cluster& c, const Policy& p, const ExecutionModel& m,
             const SimOptions& o, Workload* predicted = nullptr);

  SimResult run();

 private:
  // ---- the event loop (simulator.cc) ----
  void advance_to(double t);

  // ---- a job's life (simulation_jobs.cc) ----
  void predict_duration(JobId j);
  void submit(JobId j);
  void add_pending(JobId j);
  // No GPU of node n is held: where pre-staging may copy without disturbing a run's reads.
  bool node_idle(NodeId n) const { return state_.node_free_whole(n) == c_.node(n).num_gpus; }
  double run_gpus(const JobState& js) const {
    return static_cast<double>(js.alloc.gpu_milli()) / kMilliPerGpu;
  }
  double account_run(JobId j);
  void account_held(JobId j, double gpu_seconds, const Allocation& alloc, double seconds);
  void stop_run(JobId j, bool keep_usage);
  void finish(JobId j);
  // why: what the reclaim cost and against what (describe_price), for the job's history.
  void preempt(JobId j, JobId for_job, PreemptionCause cause, const std::string& why = "");
  void requeue(JobId j);
  void start(JobId j, Allocation alloc, double delay, double limit_w);
  void begin(JobId j);

  // ---- a scheduling cycle and elastic resizes (simulation_cycle.cc) ----
  void cycle();
  bool any_growable() const;
  void resize(Resize& r, bool released = false);

  // ---- round-based scheduling (simulation_rounds.cc) ----
  void play_round();
  bool place_on_type(JobId j, GpuTypeId t, Rng& rng, Allocation& out);
  bool start_on_planned_type(JobId j, Rng& rng, double delay);
  double run_speed(JobId j);
  void play_goodput_round();
  bool place_up_to(JobId j, int members, Rng& rng, Allocation& out);

  // ---- node failures and recovery (simulation_failures.cc) ----
  bool node_fail(uint32_t i);
  void node_recover(NodeId n);
  void fail_job(JobId j, int32_t record, NodeId node);
  uint32_t racks_of(const Allocation& a) const;
  void recover(JobId j, const Allocation& before, NodeId failed);
  bool restart_in_place(const JobSpec& s, const Allocation& before, NodeId failed, bool anywhere,
                        Allocation& out);

  // ---- power and energy, node sleep (simulation_power.cc) ----
  void integrate_series(double from, double to, double draw);
  void setup_power();
  GpuTypeId type_of(const Allocation& a) const;
  void price_power(JobId j);
  void set_drawing(JobId j, bool on);
  double preferred_w(JobId j) const;
  void account_energy(JobId j, double joules, double grams);
  void set_limit(JobId j, double limit_w);
  bool sleeping() const { return bound_ && opt_.energy.sleep_after_s >= 0; }
  double node_idle_w(NodeId n) const;
  bool node_empty(NodeId n) const;
  void nodes_released(const Allocation& a);
  void node_sleep(NodeId n, uint32_t generation);
  bool wake_nodes(const Allocation& a);

  // ---- the event log and explained jobs' histories (simulation_log.cc) ----
  void write_event(std::string_view type, JobId j);
  // Appends to j's history when j is explained (SimOptions::explain).
  template <typename... Args>
  void note(JobId j, fmt::format_string<Args...> f, Args&&... args) {
    const int32_t h = jobs_[j].history;
    if (h < 0) return;
    result_.histories[static_cast<size_t>(h)].entries.push_back(
        HistoryEntry{now_, fmt::format(f, std::forward<Args>(args)...)});
  }
  void note_pending(const PendingReason& r);
  std::string describe_placement(const Allocation& a) const;

  Workload* predicted_;  // SimOptions::predictor: the copy whose estimates it sets
  FeatureEncoder encoder_;
  std::vector<JobFeatures> features_;
  const Workload& w_;
  const Cluster& c_;
  const Policy& policy_;
  const ExecutionModel& model_;
  const SimOptions& opt_;
  ClusterState state_;
  std::vector<JobState> jobs_;
  PendingQueue pending_;
  std::vector<RunningJob> snap_running_;  // SimOptions::full_cycles: the running jobs anew
  std::vector<JobId> preemptors_;         // jobs that preempted others in this cycle
  // Round-based scheduling: jobs the current round's plan gives a type.
  std::vector<JobId> planned_jobs_;
  GavelPlanner planner_;
  std::unique_ptr<GoodputPlanner> goodput_;  // with Policy::goodput
  // Data staging (simulation_data.cc; SimOptions::data_*): where datasets are; by dataset, how
  // many waiting or running jobs want it; the nodes each waiting job's dataset is on (the
  // cycle's locality preference).
  std::unique_ptr<DataStaging> data_;
  std::vector<int32_t> data_wanted_;
  std::unordered_map<JobId, std::shared_ptr<const NodeSet>> preferred_;
  // A run of j starts now on its allocation: the seconds it waits for its dataset.
  double stage_data(JobId j, double delay);
  void release_data(JobId j);
  void want_data(JobId j, int delta);
  // The cycle's locality preferences (SimOptions::data_locality), and pre-staging after it.
  void prefer_data_nodes(Snapshot& snap);
  void prestage_waiting();
  // Runs streaming their dataset from the object store share its bandwidth: a run joins
  // (returns its speed factor) or leaves, and the others' factors change with them.
  std::vector<JobId> streams_;
  double join_stream(JobId j);
  void leave_stream(JobId j);
  void share_streams(JobId except);
  // j's speed changes now (a power limit, a stream's share): the run so far counts at the old
  // speed and its finish moves. `change` sets the new speed.
  void rerate(JobId j, const std::function<void()>& change);
  void prestage_more();
  // Residency (SimOptions::residency): the nodes' home datasets, and their copies pre-staged.
  void keep_resident(int slots, double per_transfer);
  double prestage_tick_ = -1;  // the latest tick pushed for a pre-staging transfer's end
  // Node failures: which nodes are down, what holds each down node's capacity, and per failure
  // that hit jobs, when it happened and how many of them have not run again yet.
  struct FailureRecord {
    double time = 0;
    uint32_t waiting = 0;
  };
  std::unique_ptr<InferenceReserve> reserve_;  // SimOptions::reserve_inference
  // Power (SimOptions::power): the model bound to this cluster and workload, the view the
  // engine reads, what running jobs draw above idle in total, and the GPUs running throttled.
  std::optional<BoundPowerModel> bound_;
  PowerView view_;
  double holding_w_ = 0;
  double busy_w_ = 0;  // what the drawing jobs' GPUs draw in all (idle part included)
  double throttled_gpus_ = 0;
  // Node sleep: which nodes sleep, a generation per node (a sleep event is stale once the node
  // was used or released again), and what the sleeping nodes would otherwise draw.
  std::vector<bool> node_asleep_;
  std::vector<uint32_t> node_gen_;
  double asleep_w_ = 0;
  double asleep_nodes_ = 0;
  bool power_policies_ = false;    // a cap or an energy knob: the engine sees view_
  bool carbon_deferring_ = false;  // some best-effort job may wait for cleaner hours
  double carbon_tick_at_ = -1;     // the latest tick scheduled at a carbon change point
  struct RecoveryChoice {
    RecoveryState state;
    RecoveryAction action = RecoveryAction::kRequeue;
    double time = 0;
    uint32_t racks_before = 0;
  };
  std::unordered_map<JobId, RecoveryChoice> recovery_choice_;  // until the job runs again
  Rng recovery_rng_{0x5eed};
  std::vector<bool> down_;
  std::vector<Allocation> blockers_;
  std::vector<FailureRecord> failure_records_;
  size_t done_ = 0;  // jobs finished
  std::unique_ptr<QueueTree> own_tree_;
  const QueueTree& tree_;
  FairnessTracker fair_;
  // The running jobs, kept as the engine sees them: each entry is set when its run starts or
  // changes (running_entry), so a cycle neither rebuilds the list nor sums it per tenant.
  RunningSet running_;
  RunningJob running_entry(JobId j) const;
  EventQueue events_;
  bool tick_pending_ = false;
  double now_ = 0;
  SimResult result_;
};

}  // namespace tessera::sim_detail
