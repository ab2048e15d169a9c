// What both servers show of their jobs, and to whom: the caller, the job as the read API shows
// it, the filter a listing takes, the errors the API maps to HTTP statuses, and an adaptive
// job's report. `tessera serve` and `tessera kube` build these; the API layer renders them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "control/dashboard_samples.h"
#include "control/views.h"
#include "engine/goodput_model.h"
#include "model/job.h"
#include "store/store.h"

namespace tessera {

// Who is asking: the admin, a tenant (its own token), or a user inside a tenant (theirs).
// A tenant's token and a tenant admin manage the tenant: all its jobs and its users; a
// member acts on the jobs they submitted and sees the tenant's.
struct Caller {
  Caller() = default;
  Caller(bool is_admin, std::string of_tenant, std::string as_user = "",
         bool is_tenant_admin = false)
      : admin(is_admin),
        tenant(std::move(of_tenant)),
        user(std::move(as_user)),
        tenant_admin(is_tenant_admin) {}
  bool admin = false;
  std::string tenant;
  std::string user;           // "" = the admin or the tenant's own token
  bool tenant_admin = false;  // a user of role admin
  // "admin", "team-a", or "alice@team-a": the audit log's actor, the events' "by".
  std::string actor() const {
    return admin ? "admin" : user.empty() ? tenant : user + "@" + tenant;
  }
  bool manages(const std::string& t) const {
    return admin || (tenant == t && (user.empty() || tenant_admin));
  }
  // May cancel, hold, release, requeue, update a job of tenant `t` submitted by `by`.
  bool acts_on(const std::string& t, const std::string& by) const {
    return manages(t) || (tenant == t && user == by);
  }
};

// What replacing the queue tree changed: its queues (the root left out), the leaves it adds
// and removes, by path.
struct QueueTreeChange {
  size_t queues = 0;
  std::vector<std::string> added;
  std::vector<std::string> removed;
};

// What an API call is, for the audit log.
struct RequestContext {
  Caller caller;
  std::string method;
  std::string path;
};

// A refused request. The API maps kinds to HTTP statuses.
class ServiceError : public std::runtime_error {
 public:
  // kUnavailable: the database refused the write (a full disk); nothing changed, retry later.
  enum Kind {
    kInvalid,
    kUnauthorized,
    kForbidden,
    kNotFound,
    kConflict,
    kInfeasible,
    kTooMany,  // a tenant's limit (pending jobs, submission rate): 429, retry later
    kUnavailable
  };
  ServiceError(Kind kind, std::string field, const std::string& message)
      : std::runtime_error(message), kind_(kind), field_(std::move(field)) {}
  Kind kind() const { return kind_; }
  const std::string& field() const { return field_; }

 private:
  Kind kind_;
  std::string field_;
};

// One member's place, for the API.
struct MemberPlacement {
  int32_t rank = 0;
  std::string node;
  std::vector<int32_t> gpus;  // host GPU indices
  int32_t gpu_milli = 1000;
};

// A job as the API shows it.
struct JobView {
  JobRow row;
  std::string pending_reason;  // in words; "" when not pending
  // The same, as a short code for tables (as Slurm's squeue REASON): Resources, GangFit,
  // Reservation, HeadOfLine, Quota, FairShare, InferenceReserve, TenantLimit, ArrayLimit,
  // Preempting, Unrunnable, Held, Dependency, GoodputRound, Staging; "" when not pending or not yet
  // decided.
  std::string reason_code;
  std::string queue;           // its leaf queue's path
  std::string priority_class;  // the class it runs at (its own, else its queue's default)
  std::vector<MemberPlacement> placement;
  // tessera kube: how kubectl finds its pods (a label selector where its convention has one,
  // else their names), so a page can say which command shows their events and logs.
  struct KubePods {
    std::string ns, selector;
    std::vector<std::string> names;
  };
  std::optional<KubePods> kube;
};

// What a goodput-adaptive job reports while it runs (POST /v1/jobs/ID/report; docs/goodput.md):
// any of its step time on a placement, its gradient statistics, its progress.
struct JobReport {
  std::optional<StepReport> step;
  std::optional<GradientStats> gradient;
  // Progress in steps at the job's initial batch (adaptive.batch): done so far, and in all.
  std::optional<std::pair<double, double>> progress;
};

// What the scheduler makes of an adaptive job, as the report's answer: where it runs now, what
// the last goodput round gave it, and, from everything it reported, the batch it should train
// with on its GPUs and how fast that is.
struct JobReportView {
  int64_t job = 0;
  int32_t gpus = 0;                   // it runs on now
  int32_t nodes = 0;                  // over this many nodes
  int32_t round_gpus = -1;            // the last round's decision (-1: none yet)
  bool profiled = false;              // it has reported a step time and gradient statistics
  BatchSplit batch;                   // the best split on its GPUs now
  int64_t global_batch = 0;           // batch.batch(gpus)
  double speedup = 0;                 // over one GPU, at that batch
  double remaining_gpu_seconds = -1;  // one GPU's time for the rest (-1: unknown)
};

struct JobFilter {
  std::vector<JobState> states;  // any of these; empty = every state
  std::string tenant;            // "" = all the caller may see
  int64_t array = 0;             // only this array's tasks; 0 = any job
  std::string queue;             // jobs of tenants whose queue is this path or below it
  std::string priority_class;    // "" = any
  std::string reason;            // pending jobs waiting for this reason code; "" = any
  // Ascending: ids greater than `after`; descending (newest first): ids less than `before`
  // (0 = from the newest).
  bool newest_first = false;
  int64_t after = 0;
  int64_t before = 0;
  size_t limit = 500;
  // Whether a job in the queue at `path` is wanted: the queue or one below it (a name that
  // merely starts the same is not below it).
  bool in_queue(std::string_view path) const {
    return queue.empty() || path == queue ||
           (path.size() > queue.size() && path.starts_with(queue) && path[queue.size()] == '/');
  }
  bool wants(JobState s) const {
    return states.empty() || std::find(states.begin(), states.end(), s) != states.end();
  }
};

// Who reads: everything (serve's admin; kube's open API or a reader of every namespace), or only
// the jobs of these owners (serve: the caller's tenant; kube: the namespaces whose pods RBAC lets
// the caller list).
struct Reader {
  bool everything = false;
  std::set<std::string> owners;
};

// What the read API shows, implemented by both servers (`tessera serve`'s Service and `tessera
// kube`'s scheduler); api/read_routes registers each read route once over it. Every method
// shows only what `r` may see.
class ReadModel {
 public:
  virtual ~ReadModel() = default;
  // A page of the jobs `f` wants.
  virtual std::vector<JobView> jobs(const Reader& r, const JobFilter& f) const = 0;
  // One job; ServiceError kNotFound for a job that does not exist, and for another owner's job
  // either kForbidden (serve: a tenant is told the job is not its own) or kNotFound (kube: a
  // namespace's jobs are not for a reader who may not list its pods to know of).
  virtual JobView job(const Reader& r, int64_t id) const = 0;
  // A job's history, oldest first (serve: from its store; kube: what the scheduler told its
  // pods). The same errors as job().
  virtual std::vector<JobEvent> job_events(const Reader& r, int64_t id) const = 0;
  virtual std::vector<QueueView> queues(const Reader& r) const = 0;
  virtual std::vector<NodeView> nodes(const Reader& r) const = 0;
  // The dashboard's samples in [since, until], averaged into buckets of `step` seconds.
  virtual std::vector<HistorySample> history(const Reader& r, double since, double until,
                                             double step) const = 0;
  virtual double clock_now() const = 0;         // Unix seconds, on the server's clock
  virtual double history_interval() const = 0;  // seconds between samples
  virtual double history_window() const = 0;    // seconds of samples kept
};

}  // namespace tessera
