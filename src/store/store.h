// What `tessera serve` keeps on disk: jobs and their state transitions, tenants and their
// token hashes, the audit log and a few settings, in one SQLite file in WAL mode.
//
// Durability: every method is one transaction, so a crash (kill -9) at any moment leaves each
// job either wholly before or wholly after a transition, never half-way. With the default
// synchronous=NORMAL a process crash loses nothing committed; only a power loss or OS crash
// may lose the last transactions before the WAL is synced (Options::sync_full syncs every
// commit instead, at a cost in submissions per second).
//
// Thread safety: all methods may be called from any thread; they are serialised internally.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/accounting.h"
#include "store/job_request.h"
#include "store/sqlite_db.h"

namespace tessera {

// A service job's life: pending -> running -> succeeded | failed, with cancelled reachable from
// pending and running, and preempted while a preempted gang is being stopped (it returns to
// pending once its processes are gone).
// kTimeout: stopped at its time limit (terminal, like kFailed).
enum class JobState : uint8_t {
  kPending,
  kRunning,
  kSucceeded,
  kFailed,
  kCancelled,
  kPreempted,
  kTimeout
};
std::string_view to_string(JobState s);
bool parse_job_state(std::string_view s, JobState& out);
// Every state's name, in order; joined ("pending, running, ...") for messages and help.
std::vector<std::string> job_state_list();
std::string job_state_names();
// A comma-separated list of states ("pending,running") into `out`; false, with the word that
// names no state in `bad`, when one does not.
bool parse_job_states(std::string_view list, std::vector<JobState>& out, std::string& bad);
inline bool is_terminal(JobState s) {
  return s == JobState::kSucceeded || s == JobState::kFailed || s == JobState::kCancelled ||
         s == JobState::kTimeout;
}

struct JobRow {
  int64_t id = 0;  // assigned by insert_job
  std::string tenant;
  std::string user;  // the user of `tenant` who submitted it; "" = the tenant's token, the admin
  JobRequest spec;
  JobState state = JobState::kPending;
  double submitted_at = 0;  // unix seconds
  double started_at = -1;   // last start; -1 = never
  double finished_at = -1;  // -1 = not finished
  int32_t attempts = 0;     // launches so far
  int32_t preemptions = 0;
  std::optional<int32_t> exit_code;
  std::string message;          // why it failed, was cancelled or preempted, in words
  std::string allocation;       // the control layer's JSON of where it runs; "" = nowhere
  std::string processes;        // the backend's JSON of its member processes; "" = none
  std::string idempotency_key;  // unique per tenant when not empty
  bool held = false;            // pending, but not to be started until released
  // A task of a job array: the array's id (its first task's job id; 0 = not an array, and
  // kNewArray in rows handed to insert_jobs) and its index.
  int64_t array_id = 0;
  int32_t array_index = 0;
  // The kind the workload classifier predicted for a job that named no priority class (the
  // class in `spec` is then the kind's); "" = the class, if any, is the user's.
  std::string classified;
  // The GPU power limit its current run has (W; serve's power policies); 0: its
  // GPUs' default (the TDP).
  double power_limit_w = 0;
};
inline constexpr int64_t kNewArray = -1;

struct AuditEntry {
  int64_t id = 0;      // assigned by the store
  double at = 0;       // unix seconds
  std::string actor;   // "admin" or the tenant
  std::string method;  // "POST"
  std::string path;    // "/v1/jobs/12/cancel"
  int32_t status = 0;  // the HTTP status answered
  std::string target;  // what it acted on ("job 12", "tenant team-a"), "" if nothing
};

// One entry of a job's history. `type` is one word (Submitted, Pending, Started, Preempted,
// Requeued, Held, Released, Updated, Succeeded, Failed, Cancelled, TimedOut, PowerLimit); `message`
// the details in words. An event the same as the job's last (type and message) is not written.
struct JobEvent {
  int64_t id = 0;      // assigned by the store, increasing: the history's order
  int64_t job_id = 0;  // 0 in insert_job's events: the job being inserted
  double at = 0;       // unix seconds
  std::string type;
  std::string message;
};

// Which evicted jobs to read (Store::evicted_jobs): the filters of GET /v1/jobs.
struct EvictedQuery {
  std::vector<JobState> states;         // any of these; empty = every state
  std::string tenant;                   // "" = all
  std::vector<std::string> tenants_in;  // any of these; empty = no such condition
  int64_t array_id = 0;                 // 0 = any
  bool newest_first = false;
  int64_t after = 0;   // ascending: ids greater than this
  int64_t before = 0;  // descending: ids less than this (0 = from the newest)
  size_t limit = 500;
};

// What an archive step did.
struct ArchiveResult {
  size_t jobs = 0;
  std::vector<std::string> files;  // written, in order (none when nothing was archived)
};

struct TenantRow {
  std::string name;
  std::string token_sha256;  // hex; the token itself is never stored
  double created_at = 0;
};

// A person inside a tenant, with a token of their own. A member acts on the jobs they
// submitted; a tenant admin on all the tenant's jobs, and adds and removes its users.
enum class UserRole { kMember, kAdmin };
std::string_view to_string(UserRole r);
bool parse_user_role(std::string_view s, UserRole& out);

struct UserRow {
  std::string tenant;
  std::string name;
  std::string token_sha256;  // hex
  UserRole role = UserRole::kMember;
  double created_at = 0;
};

// Which audit entries to read; empty fields match all.
struct AuditFilter {
  std::string actor;
  std::string target;         // exactly ("job 12")
  double since = -1;          // at >= since (unix seconds)
  double until = -1;          // at < until
  bool refused_only = false;  // status >= 400
};

class Store {
 public:
  struct Options {
    bool sync_full = false;  // PRAGMA synchronous=FULL (fsync every commit)
  };
  // Opens or creates the database at `path` and applies pending schema migrations. Throws
  // StoreError naming the path (also for a database written by a newer Tessera, and for one
  // that another process holds open: one database, one server).
  explicit Store(const std::string& path) : Store(path, Options{}) {}
  Store(const std::string& path, Options opt);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  int schema_version();

  // Inserts a new job (sets row.id) and, in the same transaction, the audit entry if given and
  // its first events (their job_id set to the new id).
  int64_t insert_job(JobRow& row, const AuditEntry* audit = nullptr,
                     std::span<const JobEvent> events = {});
  // The same for several jobs at once (a job array's tasks): one transaction, one audit entry
  // (naming the first job), `events` written for each job; rows with array_id kNewArray get
  // the first row's id as theirs. Returns the first id.
  int64_t insert_jobs(std::span<JobRow> rows, const AuditEntry* audit = nullptr,
                      std::span<const JobEvent> events = {});
  // Writes the mutable fields (state, times, counters, exit code, message, allocation,
  // processes) of every row in one transaction, with the audit entry if given, the runs
  // that ended (accounting; a run written twice keeps its first record) and the jobs' events.
  void update_jobs(std::span<const JobRow* const> rows, const AuditEntry* audit = nullptr,
                   std::span<const RunRecord> ended_runs = {},
                   std::span<const JobEvent> events = {});
  // The runs that ended at or after `since` and started before `until`, by end time.
  std::vector<RunRecord> runs(double since, double until);
  // Per tenant, the estimated GPU energy (J) of every run written: gpu_watts x its length.
  std::map<std::string, double> run_energy_joules();
  void update_job(const JobRow& row, const AuditEntry* audit = nullptr,
                  std::span<const JobEvent> events = {});
  // A job's history, oldest first.
  std::vector<JobEvent> job_events(int64_t job_id);
  // Every job the server keeps in memory (not evicted), by id.
  std::vector<JobRow> load_jobs();
  // Retention: these finished jobs leave the server's memory; read with the calls below.
  void mark_evicted(std::span<const int64_t> ids);
  std::vector<JobRow> evicted_jobs(const EvictedQuery& q);
  // Accounting's view of the evicted and archived jobs that finished at or after `since`
  // (queue left empty: the caller knows the tenants' queues).
  std::vector<JobRecord> evicted_records(double since);
  // Any stored job, by id / by its tenant's idempotency key.
  std::optional<JobRow> job(int64_t id);
  std::optional<JobRow> job_by_key(const std::string& tenant, const std::string& key);
  // Moves evicted jobs that finished before `finished_before` (unix seconds), with their
  // events, out of the live tables into a new JSON-lines file in `dir` (one job a line, its
  // events with it), synced before the rows are deleted: a crash between the two leaves them
  // in both, never in neither. Their runs stay in job_runs, and what accounting needs of the
  // job itself (tenant, final state, times) in archived_jobs. At most `max_jobs`
  // per call. Throws StoreError naming the file when it cannot be written.
  ArchiveResult archive(double finished_before, const std::string& dir, size_t max_jobs);

  void add_audit(const AuditEntry& e);
  // The newest `limit` entries, newest first.
  // Newest first, at most `limit`, of those that match `f`.
  std::vector<AuditEntry> audit_log(size_t limit, const AuditFilter& f = {});

  // False (and nothing written) if a tenant of that name exists.
  bool add_tenant(const TenantRow& t, const AuditEntry* audit = nullptr);
  std::vector<TenantRow> tenants();
  // Deletes a tenant: its token row goes, its name is listed as deleted (until add_tenant
  // creates it again), with the audit entry, in one transaction.
  void delete_tenant(const std::string& name, double at, const AuditEntry* audit);
  std::vector<std::string> deleted_tenants();
  // A tenant's token hash replaced (rotate) or its row removed (revoke: the tenant keeps its
  // jobs and can be given a token again); false when it has no token row.
  bool set_tenant_token(const std::string& name, const std::string& token_sha256,
                        const AuditEntry* audit);
  bool remove_tenant_token(const std::string& name, const AuditEntry* audit);

  // Users (store_users.cc). add_user: false (nothing written) if the tenant has a user of that
  // name. users(""): every tenant's, by tenant then name. remove_user / set_user_token: false
  // when there is no such user. delete_tenant removes the tenant's users too.
  bool add_user(const UserRow& u, const AuditEntry* audit);
  std::vector<UserRow> users(const std::string& tenant);
  bool remove_user(const std::string& tenant, const std::string& name, const AuditEntry* audit);
  bool set_user_token(const std::string& tenant, const std::string& name,
                      const std::string& token_sha256, const AuditEntry* audit);

  // The dashboard's history: appends one sample (JSON text) at time t and drops those older
  // than `drop_before`, in one transaction; and reads back the samples from `since` on, oldest
  // first, as (t, JSON text).
  void append_history(double t, std::string_view sample, double drop_before);
  std::vector<std::pair<double, std::string>> history(double since);
  // The same for the hourly samples kept longer (history_hourly); history_hourly reads those in
  // [since, until].
  void append_history_hourly(double t, std::string_view sample, double drop_before);
  std::vector<std::pair<double, std::string>> history_hourly(double since, double until);

  std::optional<std::string> setting(std::string_view key);
  void set_setting(std::string_view key, std::string_view value, const AuditEntry* audit = nullptr);

  const std::string& path() const { return path_; }
  // This database's random identity (32 hex digits), made when it was created.
  std::string database_id();

 private:
  void write_audit(const AuditEntry& e);
  void write_update(const JobRow& row);
  void write_run(const RunRecord& r);
  void write_event(const JobEvent& e, int64_t job_id);
  JobRow read_row(const Statement& s) const;  // the columns kRowColumns lists

  std::string path_;
  // flock(2) on <path>.lock, held while this Store lives: a second server on the same database
  // would run the same jobs again. The kernel drops it when the process dies, however it dies.
  int lock_fd_ = -1;
  std::mutex mu_;
  std::unique_ptr<Db> db_;
  std::optional<Statement> insert_job_, update_job_, insert_audit_, insert_run_, insert_event_;
};

}  // namespace tessera
