// The long-running scheduler service behind `tessera serve`: it holds the jobs, tenants and
// cluster, runs the engine's scheduling cycle on events and on a timer, dispatches the
// decisions to the local backend, watches the processes, and persists every state transition
// (store/). After a restart it reloads the jobs and reconciles the running ones with their
// processes: still running (adopted), finished while it was down (their exit files say how),
// or gone (requeued).
//
// Threads: API threads call the public methods; one scheduler thread (start()) polls the
// processes and runs cycles. One mutex guards the jobs; the engine's cycle runs outside it on
// a snapshot (job specs never change after submission and only the scheduler thread changes
// the ledger, so the cycle can read both unlocked) and its decisions are re-checked against
// what changed meanwhile (a job cancelled during the cycle does not start).
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "backend/cgroups.h"
#include "backend/gpu_power_limits.h"
#include "control/cycle_driver.h"
#include "control/dashboard_samples.h"
#include "control/energy.h"
#include "control/read_model.h"
#include "control/serve/dataset_cache.h"
#include "control/serve/store_health.h"
#include "control/serve/tenant_limits.h"
#include "control/serve/uid_range.h"
#include "control/views.h"
#include "engine/decayed_usage.h"
#include "engine/decisions.h"
#include "engine/goodput_allocation.h"
#include "engine/goodput_model.h"
#include "engine/pending_queue.h"
#include "engine/policy.h"
#include "engine/power_budget.h"
#include "insight/workload_classifier.h"
#include "model/carbon_intensity.h"
#include "model/cluster.h"
#include "model/cluster_state.h"
#include "model/gpu_reservation.h"
#include "model/interner.h"
#include "model/job.h"
#include "model/queue_tree.h"
#include "model/token_bucket.h"
#include "store/store.h"

namespace tessera {

// Why `name` names no GPU type of cluster `c` (ambiguous, or not there), listing those it has.
std::string unknown_gpu_type(const Cluster& c, const std::string& name);

struct ServiceOptions {
  std::string db_path = "tessera.db";
  std::string work_dir = "tessera-jobs";  // the local backend's root (logs, working dirs)
  // GPUs to schedule: > 0 = this many virtual GPUs (no device behind them); 0 = discover with
  // nvidia-smi, and fall back to kDefaultVirtualGpus when there is none.
  int virtual_gpus = 0;
  std::string nvidia_smi = "nvidia-smi";
  std::string queues_path;  // queue tree YAML; empty = one queue per tenant, equal weights
  std::string policy = "fair";
  uint64_t seed = 0;
  double checkpoint_grace_seconds = 30;  // SIGTERM .. SIGKILL, for jobs that name none
  // The longest grace any job gets (its own, the queue tree's or the default): a job that asks
  // for more is refused, so a stopping job cannot hold its GPUs for ever.
  double max_checkpoint_grace_seconds = 3600;
  double cycle_interval_seconds = 1.0;  // a cycle at least this often (besides events)
  double poll_interval_seconds = 0.05;  // how often processes are checked
  // Every this often a cycle gives every waiting job its reason anew (a walk of the whole
  // queue); between, only jobs without a reason get one. 0: every cycle.
  double reason_refresh_seconds = 30;
  bool sync_full = false;  // Store::Options::sync_full
  TenantLimits limits;
  // Memory per member for jobs that ask for none (their cgroup's limit and their demand in
  // placement), and the most one may ask for, where no queue sets them; -1 = not set.
  int64_t default_memory_mib = -1;
  int64_t max_memory_mib = -1;
  // Whose uid jobs run as: their tenant's own (a server running as root: each tenant gets a
  // uid from tenant_uid_base up, kept in the database) or the server's.
  bool tenant_uids = false;
  // The first of them; -1: the one this database used before, else one derived from its id
  // (control/serve/uid_range.h). uid_claims_dir holds each running server's claim on its range.
  int64_t tenant_uid_base = -1;
  std::string uid_claims_dir = "/run/tessera/uid-ranges";
  std::vector<std::string> pass_env;  // server environment variables jobs also see
  Cgroups cgroups;                    // confinement of each member (none unless detected)
  int64_t pids_per_member = 4096;
  // Unix seconds now; empty = the system clock (tests inject their own).
  std::function<double()> clock;
  // Retention: a job that finished longer ago than this leaves memory (the database keeps it,
  // and the API reads it there); < 0 = kept in memory for ever.
  double retain_finished_seconds = 86400;
  // Archive: jobs that finished longer ago than this leave the live tables for a JSON-lines
  // file in archive_dir (accounting keeps their runs); < 0 = never. At least the retention.
  double archive_after_seconds = -1;
  std::string archive_dir;  // "" = <db_path>.archive
  // The dashboard's history (GET /v1/history): a sample this often (<= 0: none), kept this
  // long in memory and in the database.
  double history_interval_seconds = 10;
  double history_window_seconds = 86400;
  // And an hourly average of them kept this long in the database (the dashboard's last week
  // and month); 0: none.
  double history_hourly_seconds = 90 * 86400.0;
  // serve --classify: a job that names no priority class gets the class (and, naming none,
  // the checkpoint grace) of the kind this workload classifier predicts ("logistic",
  // "threshold", "majority"; docs/classifier.md); "" = none. It learns from the jobs whose
  // class their user set, as they finish.
  std::string classifier;
  // Energy (control/energy.h). The power model (serve loads it from the data dir;
  // null = one without measurements: flat curves at each type's TDP); the type name virtual
  // GPUs get ("virtual" has no power figures: it draws 0); this host's base power (CPU,
  // memory, fans; W, counted once in tessera_power_watts; 0 = not counted); the PUE (>= 1);
  // an hourly carbon-intensity series on Unix time (usage's carbon_kg; null = none).
  std::shared_ptr<const PowerModel> power_model;
  std::string virtual_gpu_type = "virtual";
  double node_power_w = 0;
  double pue = 1;
  std::shared_ptr<const CarbonIntensity> carbon;
  // How often (service clock) a server on real GPUs reads their power draw with nvidia-smi.
  double power_read_interval_seconds = 10;
  // Power policies (docs/energy.md). A cap on this host's estimated IT draw:
  // "KW", or "N%" of its peak draw (node_power_w plus every GPU at its TDP); "" = none. Under a
  // cap, power_shifting lowers jobs' GPU power limits to fit more work (else jobs wait until
  // power frees). energy_weight: Zeus's energy knob (0..1) for queues that set no
  // energy_weight. With a cap or any energy weight above 0, the engine chooses each job's
  // power limit (else nothing about power changes).
  std::string power_cap;
  bool power_shifting = false;
  double energy_weight = 0;
  // Apply the limits to the GPUs (`nvidia-smi -i INDEX -pl WATTS`, and the default back when
  // the job ends): real GPUs (found by nvidia-smi) and root only. Without it the limits are
  // advisory: recorded, reported, and used in the energy estimates. `root`: whether the server
  // runs as root (serve sets it from geteuid()). `run_command`: how those commands run (empty:
  // run_command(); tests inject a fake).
  bool apply_power_limits = false;
  bool root = false;
  CommandRunner run_command;
  // Thermal headroom (insight/thermal_headroom.h): with a limit (°C, > 0), each power reading
  // also reads the GPUs' temperatures, and the engine starts a job only if the host's GPUs can
  // carry its draw without passing the limit, given the inlet air's temperature. Real GPUs only.
  double thermal_limit_c = 0;
  double inlet_temp_c = 25;
  // --policy goodput (docs/goodput.md): how often a round re-plans the adaptive jobs' GPUs (a
  // round also runs at the next cycle when an adaptive job waits that no round has seen), and
  // how it weighs them (engine/goodput_allocation.h).
  double goodput_round_seconds = 60;
  GoodputAllocationOptions goodput;
  // The API's address as jobs reach it ("http://127.0.0.1:8080"): an adaptive job is told
  // TESSERA_REPORT_URL from it; "" = not told (it cannot report, so it is planned as scaling
  // perfectly).
  std::string api_url;
  // Each gang in a network namespace of its own (backend/job_network.h; needs root): it
  // reaches 127.0.0.1 inside it, its TESSERA_REPORT_URL (the API on the same port, inside),
  // and nothing else of the host's network.
  bool isolate_job_network = false;
  // Datasets (docs/data.md, "In tessera serve"): the dataset cache's directory ("" = none: a
  // job's `dataset` is only told to it, TESSERA_DATASET), the command that stages one there
  // (control/serve/dataset_cache.h), the cache's capacity in GB (0 = no bound), and how many
  // datasets may be staged at once ahead of the waiting jobs that read them (0 = none; such
  // staging only uses free room, it never evicts; -1 = not given: 1 with a cache). The cache
  // options without a cache are refused.
  std::string dataset_dir;
  std::string stage_command;
  double dataset_cache_gb = 0;
  int prestage_datasets = -1;
};
inline constexpr int kDefaultVirtualGpus = 8;

// The longest Idempotency-Key a submission may carry (as the service contract says).
inline constexpr size_t kMaxIdempotencyKeyChars = 255;
// The settings key of the queue tree last applied (tessera queues apply), as its YAML text.
inline constexpr const char* kAppliedTreeSetting = "queue_tree_applied";

// What `tessera update` changes; unset fields stay as they are.
struct JobUpdate {
  std::optional<std::string> priority_class;
  std::optional<double> time_limit_seconds;
};

// The part of a member's log a caller asked for: `length` bytes of `file` from `offset`.
struct LogSlice {
  LogFile file;
  int64_t offset = 0;
  int64_t length = 0;
  uint32_t attempt = 0;  // whose log it is (a requeued job starts a new one)
};

class Service final : public ReadModel {
 public:
  // Opens the store, builds the cluster (virtual GPUs or nvidia-smi), loads the queue tree and
  // the jobs, and reconciles running jobs with their processes. Throws (StoreError,
  // InputError, std::runtime_error) naming what is wrong.
  // `backend`: where jobs run; null = a LocalBackend under opt.work_dir.
  explicit Service(ServiceOptions opt, std::unique_ptr<Backend> backend = nullptr);
  ~Service();
  Service(const Service&) = delete;
  Service& operator=(const Service&) = delete;

  // Where jobs reach the API (ServiceOptions::api_url), once it is listening; before start().
  void set_api_url(std::string url);
  // Who serves the listening sockets made inside jobs' network namespaces (the API server):
  // `add` when a job's namespace is made or adopted, `remove` when its run ends. Before start().
  struct JobListeners {
    std::function<void(int fd)> add;
    std::function<void(int fd)> remove;
  };
  void set_job_listeners(JobListeners l);
  void start();  // the scheduler thread
  void stop();   // stops it; running jobs keep running (adopted again after a restart)

  // Authentication: the caller a bearer token stands for, or nullopt.
  std::optional<Caller> authenticate(const std::string& token) const;
  // Replaces the admin token (its hash is stored).
  void set_admin_token(const std::string& token);
  bool has_admin_token() const;

  // Each mutating call writes its audit entry in the same transaction as its change.
  // A repeated idempotency key (1-255 printable ASCII characters) returns the job it made,
  // if the spec is the same (else kConflict).
  JobView submit(const RequestContext& ctx, JobRequest req, const std::string& idempotency_key,
                 bool* created);
  // Cancels a job: SIGTERM, then SIGKILL after its checkpoint grace. A job already cancelled
  // whose processes are still stopping may be cancelled again (answered, not refused);
  // `force` sends SIGKILL now, for its owner or the admin. kConflict once it has ended.
  JobView cancel(const RequestContext& ctx, int64_t id, bool force = false);
  // Cancels every task of the array job `id` belongs to that has not ended (as `scancel` of an
  // array), in one write; returns how many. kInvalid when it is not an array's task,
  // kConflict when every task has ended.
  size_t cancel_array(const RequestContext& ctx, int64_t id, bool force = false);
  // Job control (as Slurm's scontrol hold/release/requeue), by the job's tenant or the admin:
  // a held job stays pending and is not started until released (kConflict unless it is
  // pending and not already starting); requeue stops a running job (SIGTERM, the grace,
  // SIGKILL) and queues it again, in its place from its submission.
  JobView hold(const RequestContext& ctx, int64_t id);
  JobView release(const RequestContext& ctx, int64_t id);
  JobView requeue(const RequestContext& ctx, int64_t id);
  // A waiting job's priority class (one its queue allows); a waiting or running job's time
  // limit (within its queue's maximum; only the admin may raise it, as in Slurm).
  JobView update(const RequestContext& ctx, int64_t id, const JobUpdate& u);
  // An adaptive job's report (by the job itself, its tenant or the admin), while it runs; the
  // next goodput round plans with it. Not audited: a job reports every few seconds, and a
  // report changes no decision by itself. kInvalid for a job that is not adaptive or a report
  // that cannot be true (naming the field), kConflict when it is not running.
  JobReportView report(const Caller& caller, int64_t id, const JobReport& r);
  // The caller a job's own report token (TESSERA_REPORT_TOKEN) stands for: the job's tenant,
  // for reporting on that job only; nullopt when it is not that job's token.
  std::optional<Caller> authenticate_report(const std::string& token, int64_t id) const;
  // Returns the new tenant's token (shown once).
  std::string create_tenant(const RequestContext& ctx, const std::string& name);
  // The admin replaces a tenant's token (the old one stops working at once; the new one is
  // returned, shown once) or revokes it (no token works for the tenant; its jobs stay).
  std::string rotate_token(const RequestContext& ctx, const std::string& name);
  void revoke_token(const RequestContext& ctx, const std::string& name);
  // The admin deletes a tenant with no job waiting or running (kConflict otherwise, saying how
  // many): its token stops working, it leaves the tenant list, and submissions for it are
  // refused until it is created again; its finished jobs and their usage stay.
  void delete_tenant(const RequestContext& ctx, const std::string& name);
  // A refused mutating request still leaves a trace.
  void audit_refusal(const RequestContext& ctx, int32_t status, const std::string& target);

  JobView job(const Caller& caller, int64_t id) const;
  // The job's history, oldest first (as stored; what the scheduler thread has not yet written
  // follows at its next write).
  std::vector<JobEvent> job_events(const Caller& caller, int64_t id) const;
  std::vector<JobView> jobs(const Caller& caller, const JobFilter& f) const;
  // The last `tail_bytes` of a member's log (all of it for 0), opened but not read: the caller
  // streams it in pieces. A log the job replaced with a link or a FIFO is kForbidden.
  // With `from_offset` >= 0 instead: from that byte on, at most `tail_bytes` of it (following
  // a log: `tessera logs --follow`).
  LogSlice logs(const Caller& caller, int64_t id, int32_t rank, int64_t tail_bytes,
                int64_t from_offset = -1) const;
  // Every queue for the admin; a tenant's own leaf queue only for a tenant.
  std::vector<QueueView> queues(const Caller& caller) const;
  std::vector<NodeView> nodes() const;
  // The same as `caller` may see it: other tenants' shares without their tenant's name.
  std::vector<NodeView> nodes(const Caller& caller) const;
  // Every tenant, with a token or not, by name.
  std::vector<TenantView> tenants() const;
  // The admin replaces the running queue tree with `text` (the --queues format; `origin`
  // names it in errors), checked whole first: a bad tree is kInvalid, naming the file, line
  // and field; one without a leaf for a tenant the server knows is kConflict, naming the
  // tenant and its waiting and running jobs. Running jobs keep running; waiting ones are
  // ordered by the new tree from the next cycle; long-term usage follows queues by path.
  // Stored: a server started without --queues comes back with it. `dry_run`: checked only.
  // (queue_tree_apply.cc)
  QueueTreeChange apply_queue_tree(const RequestContext& ctx, const std::string& text,
                                   const std::string& origin, bool dry_run);
  // SIGHUP: the --queues file read again and applied (as the admin); nullopt without one.
  std::optional<QueueTreeChange> reload_queue_tree();
  // People inside tenants (users.cc). The admin or a manager of the tenant (its own token, a
  // tenant admin) adds a user (returns their token, shown once), lists, removes one (their
  // token stops working; their jobs stay), or rotates a user's token (a user may rotate
  // their own). Names as tenants' (1-63 letters, digits, '-', '_', '.').
  std::string add_user(const RequestContext& ctx, const std::string& tenant,
                       const std::string& name, UserRole role);
  std::vector<UserRow> users(const Caller& caller, const std::string& tenant) const;
  void remove_user(const RequestContext& ctx, const std::string& tenant, const std::string& name);
  std::string rotate_user_token(const RequestContext& ctx, const std::string& tenant,
                                const std::string& name);
  // Reservations (reservations.cc): the admin sets GPUs aside for a tenant, or one of its
  // users, over [start, end) (unix seconds; a start in the past is now). The GPUs are chosen
  // now, packed on as few nodes as possible, of `gpu_type` and on `node` where given, among
  // those no reservation overlapping the window holds and (unless `ignore_jobs`) that no other
  // tenant's job holds past the start (one without a time limit ending by then). Refused,
  // saying what stands in the way, when there are too few. Kept in the database; audited.
  struct ReservationRequest {
    std::string name, tenant, user, gpu_type, node;
    int32_t gpus = 0;
    double start = 0, end = 0;
    bool ignore_jobs = false;
  };
  ReservationView create_reservation(const RequestContext& ctx, const ReservationRequest& req);
  // Every reservation, by start; a tenant sees other tenants' without their names.
  std::vector<ReservationView> reservations(const Caller& caller) const;
  void delete_reservation(const RequestContext& ctx, const std::string& name);
  std::vector<AuditEntry> audit_log(size_t limit, const AuditFilter& f = {}) const;
  // Accounting over [since, until) (unix seconds): per tenant and queue, from every run that
  // ended (the database) and every run still going (counted up to now). A tenant sees its own.
  // `by_user`: a row per user of each tenant (their submitted jobs' runs), as sreport by user.
  std::vector<UsageRow> usage(const Caller& caller, double since, double until,
                              bool by_user = false) const;
  // The admin archives the jobs that finished more than `older_than_seconds` ago (see
  // ServiceOptions::archive_after_seconds); only jobs already out of memory are archived.
  ArchiveResult archive(const RequestContext& ctx, double older_than_seconds);
  // The admin drains a node (its GPUs take no new work; jobs on it run to their end) or
  // resumes it. Kept in the database across restarts; takes effect at the next cycle.
  void drain_node(const RequestContext& ctx, const std::string& name, bool drain);
  // The service's clock (unix seconds; ServiceOptions::clock in tests).
  double clock_now() const override { return now(); }
  ServiceMetrics metrics() const;
  // The history samples in [since, until] averaged into buckets of `step` seconds; a tenant
  // sees the cluster's totals, its own entry and its own queue's.
  std::vector<HistorySample> history(const Caller& caller, double since, double until,
                                     double step) const;
  double history_interval() const override { return opt_.history_interval_seconds; }
  double history_window() const override { return opt_.history_window_seconds; }
  // The read API's view (ReadModel): everything is the admin's, one owner a tenant's (a reader
  // of several owners is not one serve makes, and is refused).
  std::vector<JobView> jobs(const Reader& r, const JobFilter& f) const override;
  JobView job(const Reader& r, int64_t id) const override;
  std::vector<JobEvent> job_events(const Reader& r, int64_t id) const override;
  std::vector<QueueView> queues(const Reader& r) const override;
  std::vector<NodeView> nodes(const Reader& r) const override;
  std::vector<HistorySample> history(const Reader& r, double since, double until,
                                     double step) const override;
  static Reader reader_of(const Caller& c);
  // Why the service is degraded (its database refuses writes), or nullopt when healthy.
  std::optional<std::string> degraded() const { return health_.problem(); }

  // The dataset cache's entries (empty without --dataset-dir), its capacity (0: no bound) and
  // what it holds, GB.
  std::vector<DatasetCache::Entry> datasets(double* capacity_gb = nullptr,
                                            double* used_gb = nullptr) const;
  const Cluster& cluster() const { return cluster_; }
  // Dependents looked at by the cascade that cancels jobs whose after_ok can no longer be met
  // (its cost: each dependent once).
  uint64_t dependency_visits() const {
    std::lock_guard lock(mu_);
    return dependency_visits_;
  }
  // Runs one poll + cycle now (tests; the scheduler thread does this on its own).
  void tick();
  // Reads the GPUs' power draw with nvidia-smi now, if this server found real GPUs (tick() and
  // the scheduler thread do, every power_read_interval_seconds).
  void read_gpu_power();

 private:
  struct Job;
  class Transaction;  // control/serve/transaction.h
  void rebind_locked();
  // Interns a new tenant and rebinds the tree; ServiceError (naming `field`) when a loaded
  // queue tree has no leaf for it, with nothing changed.
  void add_tenant_locked(const std::string& name, const std::string& field);
  std::vector<PendingJob> pending_snapshot_locked() const;
  // The spec a cycle schedules a waiting job by, once nothing holds it (its round_spec for an
  // adaptive job).
  const JobSpec& cycle_spec_locked(const Job& j) const;
  // What holds a waiting job out of the cycle (kEligible: nothing; the tenant and array limits
  // are the queue's sync's), in why_pending_locked's order: a change of it is what may change
  // the job's reason code apart from the engine's reasons.
  enum class Standing : uint8_t {
    kNotSeen,
    kEligible,
    kHeld,
    kDependency,
    kUnrunnable,
    kTenantLimit,
    kArrayLimit,
    kGoodputRound,
  };
  // Held, dependencies unmet, unrunnable here, no goodput round yet, or kEligible.
  Standing standing_locked(const Job& j) const;
  // The server's limits, with those the tenant's queues set (tenant_limits) in their place.
  TenantLimits limits_for_locked(TenantId t) const;
  // Refuses a submission past the tenant's limits (gang size, waiting jobs, rate).
  // `jobs`: how many the request makes (an array's tasks).
  void check_limits_locked(const Caller& caller, const JobRequest& req, TenantId t, double now_s,
                           size_t jobs = 1);
  // The job's time limit from its queue: the default when it names none; more than the
  // queue's maximum is refused (ServiceError on field time_limit).
  void apply_time_limit_locked(JobRequest& req, TenantId t) const;
  // Gives a job that asks for no memory its queue's (else the server's) default, and refuses
  // one that asks for more than the maximum (ServiceError on field resources.memory).
  void apply_memory_limit_locked(JobRequest& req, TenantId t) const;
  // The path of tenant t's leaf queue as the queue list names it ("/" for the root), "" when
  // it has none.
  std::string leaf_path_locked(TenantId t) const;
  // Where a job's dependencies (after_ok, after_any) stand: all met, still waiting (why, in
  // words), or never to be met (why).
  struct DependencyState {
    enum { kMet, kWaiting, kNever } state = kMet;
    std::string why;
  };
  DependencyState dependencies_locked(const JobRow& row) const;
  // Cancels the waiting jobs whose dependencies can never be met, saying which and why: those
  // whose after_ok job ended otherwise than succeeded, then their dependents through
  // dependents_, each looked at once (a 10,000-job chain cancelled from its head is linear).
  void cancel_unmet_dependencies_locked(double t);
  // Records `j` as a dependent of each job its after_ok names.
  void index_dependencies_locked(const Job& j);
  // Processes (members) each tenant's jobs run or are about to run, by tenant id.
  std::vector<int64_t> running_members_locked() const;
  // Each tenant's process limit, by tenant id.
  std::vector<int64_t> process_caps_locked() const;
  // Whether a cancel applies: the job has not ended, or it was cancelled (or preempted) and its
  // processes are still stopping (a second cancel is answered; `force` ends the grace).
  bool cancellable_locked(const Job& j) const;
  // Cancels `jobs` (cancellable ones) in one write with one audit entry naming `target`.
  void cancel_locked(const std::vector<Job*>& jobs, const RequestContext& ctx, bool force,
                     const std::string& target);
  // Where each member of `a` sits, by host GPU index.
  std::vector<MemberPlacement> placement_locked(const Allocation& a) const;
  void advance_decayed_locked(double t);
  void restore_decayed_locked();
  void recover();
  // Throws ServiceError when the request cannot run here; with `unrunnable`, problems of this
  // cluster's configuration (not of the request) are written there instead, the spec built as
  // well as it can be (a job accepted before the configuration changed).
  JobSpec to_spec_locked(const JobRequest& req, TenantId tenant, const std::string& where,
                         std::string* unrunnable = nullptr);
  JobView view_locked(const Job& j) const;
  // Why a pending job waits: the short code (JobView::reason_code) and, with `text`, the
  // sentence; {"", ""} when not pending or not yet decided.
  std::pair<std::string, std::string> why_pending_locked(const Job& j, bool text) const;
  // History: the events the rows' changes since their last write make (each row once), to be
  // written with them; once written, mark_recorded_locked makes them the new baseline.
  std::vector<JobEvent> row_events_locked(std::span<const JobRow* const> rows, double t) const;
  void mark_recorded_locked(std::span<const JobRow* const> rows);
  // An API call's write of a job's next row, with its audit entry and events (those of the
  // change, then `extra`); ServiceError kUnavailable, nothing changed, when the database refuses.
  void write_job_locked(const JobRow& next, const AuditEntry& audit,
                        std::optional<JobEvent> extra = {}, const std::string& released_by = "");
  // After a cycle: a Pending event for each waiting job whose reason code changed; of the jobs
  // in `only` where given (those a cycle that changed nothing else gave a reason).
  void record_reason_changes_locked(double t, const std::vector<Job*>* only = nullptr);
  // The job, if `caller` may see it (ServiceError kNotFound / kForbidden otherwise). Jobs are
  // owned through unique_ptr, so a const service still hands out the job for mutation by
  // callers that hold the lock.
  Job& visible_job_locked(const Caller& caller, int64_t id) const;
  // The same, if `caller` may also act on it (Caller::acts_on; kForbidden naming who
  // submitted it otherwise).
  Job& owned_job_locked(const Caller& caller, int64_t id) const;
  // kForbidden unless `caller` manages `tenant`; kNotFound for a deleted or unknown tenant.
  void check_manages_locked(const Caller& caller, const std::string& tenant) const;
  // The row of a job `caller` may see, in memory or (evicted) in the database.
  JobRow visible_row_locked(const Caller& caller, int64_t id) const;
  // A view of a row no longer in memory: finished, placed nowhere.
  JobView view_of_row_locked(const JobRow& row) const;
  // Retention: evicts finished jobs past retain_finished_seconds (not while a waiting job
  // depends on them or their row is unsaved); at most once a minute of the service's clock.
  void evict_finished_locked(double t);
  double last_eviction_ = 0;
  double last_archive_ = 0;
  void archive_if_due();
  // History: a sample when one is due (scheduler thread), and the stored ones after a restart.
  void record_history_if_due();
  void restore_history();
  std::unique_ptr<HistoryLog> history_;
  std::unique_ptr<HistorySampler> history_sampler_;
  // Hours before this (unix seconds, a whole hour) are rolled up into history_hourly.
  double rolled_until_ = 0;
  void roll_up_history(double t);
  std::vector<HistorySample> hourly_history(double since, double until) const;
  bool history_write_failing_ = false;  // said once per run of failures
  // Energy (serve/energy_readings.cc): nvidia-smi's power readings when due; the energy and power
  // gauges of `m` as of `t`; the nodes as the API shows them, unfiltered.
  void read_gpu_power_if_due();
  void energy_metrics_locked(ServiceMetrics& m, double t) const;
  std::vector<NodeView> nodes_locked() const;
  std::shared_ptr<const PowerModel> power_;
  mutable EnergyCounters energy_;  // read by metrics(): never goes down
  bool real_gpus_ = false;  // the GPUs came from nvidia-smi (set with cluster_, declared later)
  std::map<int32_t, double> measured_w_;  // power.draw by host GPU index (the last reading)
  std::map<int32_t, double> measured_c_;  // temperature.gpu by host GPU index (the last reading)
  // With --thermal-limit: the host's thermal headroom from the last reading (W above idle);
  // -1 before the first reading (unconstrained until then).
  double thermal_headroom_w_ = -1;
  double thermal_headroom_locked() const;  // from measured_w_ and measured_c_
  double last_power_read_ = -1;
  bool power_read_failing_ = false;  // said once per run of failures
  // Power policies (serve/power.cc): the engine's view (bound to the cluster's GPU types;
  // fixed after construction, so the unlocked cycle may read it) and whether cycles see it.
  void setup_power();  // validates the options; throws std::invalid_argument naming the flag
  std::optional<BoundPowerModel> bound_power_;
  PowerView power_view_;
  bool power_policies_ = false;
  // The energy knob of tenant t's queue (its own or inherited energy_weight, else the option).
  double energy_weight_locked(TenantId t) const;
  // The TDP of the GPUs `a` runs on (its first member's type).
  double tdp_of(const Allocation& a) const;
  // The job's limit becomes `limit_w` (W; 0 or the TDP: the default) at `t`, for `why`: its run's
  // energy so far is kept at the old draw; what follows draws at the new one.
  void set_power_limit_locked(Job& j, double limit_w, double t, std::string why);
  // Why a job runs at `limit_w` (a start's limit): "power cap", "energy weight 0.5" or "".
  std::string start_limit_why_locked(const Job& j, double limit_w) const;
  // The estimated GPU energy (J) of the job's current run up to `t`.
  double run_joules_locked(const Job& j, double t) const;
  // --apply-power-limits: each GPU's limits as nvidia-smi reported them (in force, default,
  // range), and which GPUs' last change failed (said once until one succeeds).
  std::map<int, GpuPowerLimits> gpu_limits_;
  std::set<int> gpu_limit_failing_;
  // Sets every GPU's limit to the lowest its holders run at (the default where none), where it
  // differs from what is in force.
  void apply_gpu_power_limits_locked();
  // Datasets (serve/datasets.cc; serve --dataset-dir). Whether a job placed now must wait
  // for its dataset to be staged (the cache does not hold it ready).
  bool needs_staging_locked(const Job& j) const;
  enum class DataState : uint8_t { kReady, kWaiting, kFailed };
  // Holds the job's dataset and has it staged if it is not ready: kReady to launch, kWaiting,
  // or kFailed (its staging failed: the job is failed, its row in `dirty`).
  DataState stage_for_locked(Job& j, std::vector<const JobRow*>& dirty);
  // Lets go of the job's dataset (release_locked).
  void release_dataset_locked(Job& j);
  // Stages ahead the datasets of the waiting jobs next in line (at most prestage_datasets at
  // once, in free room only).
  void stage_ahead_locked(double t);
  // Goodput rounds (serve/goodput.cc; --policy goodput).
  bool adaptive_locked(const Job& j) const;
  GoodputModel& goodput_model_locked(Job& j);
  // Whether a round is due at `t`: its interval passed, or an adaptive job waits that no round
  // has planned.
  bool goodput_round_due_locked(double t) const;
  // Plans every adaptive job's GPUs (running and eligible waiting ones): a running job given
  // another count is stopped (checkpoint grace) and queued again for it, a waiting one is let
  // into the cycle with it (or held out with none).
  void goodput_round_locked(double t);
  // The report token of job `id`: HMAC-SHA256 of the id under this database's report secret.
  std::string report_token_locked(int64_t id) const;
  // What an adaptive job is told at launch: its GPUs, batch split and where to report.
  void add_goodput_env_locked(Job& j, std::vector<std::pair<std::string, std::string>>& env);
  std::string report_secret_;  // as stored in the setting "report_secret"
  void run_loop();
  void poll_processes();
  void run_cycle();
  void launch_ready();
  void begin_run_locked(Job& j, double t);
  RunRecord run_record_locked(const Job& j) const;
  void end_run_locked(Job& j, double ended, const std::string& outcome);
  // SIGTERM to every member now, SIGKILL once its checkpoint grace has passed.
  // Whether the jobs `j` preempted (Job::waits_for) have no process left on its GPUs.
  bool victims_gone_locked(const Job& j) const;
  // How long a job asked to stop may take before SIGKILL: its own grace, else the queue
  // tree's, else the server's, at most --max-checkpoint-grace.
  double stop_grace_locked(const JobRequest& spec) const;
  void ask_to_stop_locked(Job& j, double t);
  void launch_locked(Job& j, std::vector<const JobRow*>& dirty);
  // Writes rows the scheduler thread changed, with those an earlier failure left unsaved.
  // Never throws: what happened to processes happened, so memory keeps it, and a row the
  // database refused is written again on the next try. Returns whether the write succeeded.
  bool save_rows_locked(const std::vector<const JobRow*>& rows);
  // Retries the unsaved rows, or, with none, probes whether the database takes writes again.
  bool retry_writes_locked();
  // An API call's write: a database failure becomes ServiceError kUnavailable (503).
  void api_write(const std::function<void()>& write);
  void note_write_failure(const std::exception& e);
  void note_write_success();
  // The uid (and gid) a tenant's jobs run as; a new tenant gets the next one, stored first.
  int64_t uid_for_tenant_locked(const std::string& tenant);
  // Isolated job networks (ServiceOptions::isolate_job_network; serve/job_network.cc): made for
  // a launch (its netns_fd set; throws saying why it cannot be), closed when the run's GPUs
  // are released, and found again for the running jobs a restarted server adopts.
  void open_job_network_locked(Job& j, LaunchSpec& ls);
  void close_job_network_locked(Job& j);
  void adopt_job_networks_locked();
  // The API's port on loopback, as jobs reach it (0: not listening).
  int api_port_locked() const;
  // The API's address as a job sees it ("http://127.0.0.1:8080"; "" when none).
  std::string api_url_for_jobs_locked() const;
  // Chooses this server's range of tenant uids and claims it on the host (uid_range.h);
  // throws when another running server holds a range the operator's base overlaps.
  void claim_uid_range_locked();
  // Returns its GPUs to the ledger. Scheduler thread only: the cycle reads the ledger unlocked.
  void release_locked(Job& j);
  double now() const;

  ServiceOptions opt_;
  std::vector<int32_t> gpu_index_;  // host GPU index of each GpuId (filled with cluster_)
  Cluster cluster_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Backend> backend_;
  Policy policy_;
  // The kept queue, reason refreshes, long-term usage, cycle metrics and goodput rounds. The
  // queue is changed only by the scheduler thread (under the lock; the cycle reads it unlocked).
  CycleDriver driver_;
  std::unique_ptr<WorkloadClassifier> classifier_;  // serve --classify; null = none
  std::unique_ptr<DatasetCache> datasets_;          // serve --dataset-dir; null = none
  // The class (and grace) of the kind classifier_ predicts for `req`, when it names none and
  // its queue allows that class; returns the kind ("" when nothing was set).
  std::string classify_locked(JobRequest& req, TenantId tenant);
  // A job whose class its user set ended: the classifier learns its kind and run time.
  void learn_kind_locked(const JobRow& r);
  // After a restart: the jobs that ended before it teach the classifier.
  void restore_classifier_locked();

  StoreHealth health_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::set<int64_t> unsaved_;            // jobs whose row in memory is newer than the database's
  std::vector<RunRecord> unsaved_runs_;  // runs that ended, not yet in the database
  // Drained nodes (by name, as stored), and per drained node the allocation that holds what is
  // free on it in the ledger, so no cycle places there; applied by the loop thread, the only
  // one that changes the ledger (apply_drains_locked), and renewed as jobs there release.
  std::set<std::string> drained_;
  std::map<NodeId, Allocation> drain_holds_;
  // Reservations as stored (the setting "reservations"), by name; their GPUs by node name and
  // index on it, so that a restart on another cluster finds what is missing.
  struct StoredReservation {
    std::string name, tenant, user;
    double start = 0, end = 0;
    std::vector<std::pair<std::string, int32_t>> gpus;
    std::string created_by;
    double created_at = 0;
    // Those GPUs in this server's cluster, sorted (found once: the cluster is fixed while it
    // runs; after a restart on another host some may be missing).
    std::vector<GpuId> ids;
  };
  std::map<std::string, StoredReservation> reservations_;
  Interner user_ids_;  // "tenant/user" -> JobSpec::user, for reservations for one user
  uint32_t user_id_locked(const std::string& tenant, const std::string& user);
  // The reservations not over at `t`, for a cycle's snapshot.
  std::vector<GpuReservation> gpu_reservations_locked(double t);
  std::vector<GpuId> gpu_ids_locked(const StoredReservation& r) const;
  ReservationView reservation_view_locked(const StoredReservation& r, const Caller& caller) const;
  void load_reservations_locked();
  void save_reservations_locked(std::map<std::string, StoredReservation> next,
                                const AuditEntry& audit);
  // Marks the GPUs of `nodes` that a reservation in force holds (nodes_locked).
  void mark_reserved_gpus_locked(std::vector<NodeView>& nodes) const;
  void apply_drains_locked();
  void hold_drained_node_locked(NodeId n);
  // Refused calls without a token write at most this many audit rows (burst, then per minute).
  TokenBucket anonymous_audit_{60, 1.0};
  uint64_t anonymous_suppressed_ = 0;           // since the last anonymous row written
  std::map<std::string, int64_t> tenant_uids_;  // as stored in the setting "tenant_uids"
  // With tenant uids: the range this server's tenants get uids from, claimed on the host.
  UidRange uid_range_;
  UidRangeClaim uid_claim_;
  JobListeners job_listeners_;
  bool dirty_ = true;  // something happened that may change a decision
  ClusterState state_;
  Interner tenants_;
  std::map<std::string, std::string> token_tenant_;  // token sha256 -> tenant
  std::map<std::string, UserRow> token_user_;        // token sha256 -> user (as stored)
  std::set<std::string> deleted_tenants_;            // as stored (tessera tenant delete)
  std::string admin_hash_;
  QueueTree tree_template_;                // as loaded (unbound)
  std::string tree_origin_;                // where it came from, for errors
  std::shared_ptr<const QueueTree> tree_;  // bound to tenants_; replaced, never mutated
  bool flat_tree_ = true;
  std::map<int64_t, std::unique_ptr<Job>> jobs_;  // every job; entries are never erased
  TenantQueue<Job> pending_;                      // waiting for a cycle, in arrival order
  std::vector<TokenBucket> submissions_;          // by tenant: the submission rate limit
  std::vector<int64_t> spec_updates_;             // jobs whose next_spec waits for the next cycle
  std::set<int64_t> process_held_;  // waiting for their tenant's processes to end (last cycle)
  std::set<int64_t> array_held_;    // array tasks waiting for their array's throttle (last cycle)
  std::map<int64_t, std::vector<int64_t>> array_tasks_;  // array id -> its tasks' ids
  // Job id -> the jobs whose after_ok names it (entries may name jobs gone from memory).
  std::unordered_map<int64_t, std::vector<int64_t>> dependents_;
  // Dependents the cascade looked at (a counter, for tests of its cost).
  uint64_t dependency_visits_ = 0;
  // Jobs that hold GPUs or have processes (running, stopping, starting): what polls and
  // cycles walk, so their cost does not grow with the jobs ever submitted.
  std::map<int64_t, Job*> active_;
  // driver_.queue() holds the jobs a cycle may start (pending, not held, dependencies met,
  // within their tenant's and array's limits), so a cycle costs what can start rather than the
  // length of the queue. Invariant: every job in it is in pending_ or was taken out of pending_
  // since the last sync, and its spec (or round_spec) is unchanged since it was added.
  uint64_t queue_passes_ = 0;     // sync_queue_locked's passes (Job::queue_pass: the last it saw)
  std::vector<Job*> restanding_;  // the jobs whose Job::standing the last sync changed
  bool queue_stale_ = true;       // something may have changed which jobs may start
  bool reasons_only_ = false;     // this cycle's queue is the last one's: it changes only reasons
  void sync_queue_locked();
  void unqueue_locked(int64_t id);
  // Why each pending job waits, as of the cycle that last gave it a reason. A cycle gives one
  // only to jobs without one (new, or back in the queue) and, every reason_refresh_seconds, to
  // every job (a full walk): in between, a job that cannot start keeps its reason, as
  // kube-scheduler keeps an unschedulable pod's condition until it retries it. With it, for a
  // job kept from reserved GPUs, the reservation's name (the reason's index is its cycle's).
  struct KeptReason {
    PendingReason reason;
    std::string reservation;
  };
  std::unordered_map<int64_t, KeptReason> reasons_;
  std::map<std::pair<std::string, std::string>, int64_t> idempotency_;  // (tenant, key) -> id
  double last_decay_saved_ = 0;  // long-term usage is saved at most once a minute
  ServiceMetrics counters_;

  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace tessera
