// The API calls that change things: submissions, job control (cancel, hold, release, requeue,
// update, dependencies), tenants and their tokens, node drains, and the limits they check.
#include "control/serve/service.h"

#include <fmt/format.h>
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_set>

#include "control/serve/job.h"
#include "control/token.h"
#include "engine/admission.h"
#include "model/dataset_name.h"
#include "model/input_error.h"
#include "model/utf8.h"

namespace tessera {

namespace {

// The audit log names its actors "admin" and "anonymous": a tenant of either name could not be
// told apart from them.
void refuse_reserved_tenant(const std::string& name, const std::string& field) {
  if (name == "admin" || name == "anonymous") {
    throw ServiceError(ServiceError::kInvalid, field,
                       "tenant name " + name + " is reserved (the audit log's own actors)");
  }
}

}  // namespace

void Service::drain_node(const RequestContext& ctx, const std::string& name, bool drain) {
  if (!ctx.caller.admin) {
    throw ServiceError(ServiceError::kForbidden, "", "only the admin drains or resumes nodes");
  }
  std::lock_guard lock(mu_);
  const auto& nodes = cluster_.nodes();
  if (std::none_of(nodes.begin(), nodes.end(), [&](const Node& n) { return n.name == name; })) {
    std::string known;
    for (const Node& n : nodes) known += (known.empty() ? "" : ", ") + n.name;
    throw ServiceError(ServiceError::kNotFound, "node",
                       "no node " + name + " (nodes: " + known + ")");
  }
  std::set<std::string> next = drained_;
  if (drain) {
    next.insert(name);
  } else {
    next.erase(name);
  }
  const AuditEntry audit{0, now(), ctx.caller.actor(), ctx.method, ctx.path, 200, "node " + name};
  api_write([&] { store_->set_setting("drained_nodes", nlohmann::json(next).dump(), &audit); });
  drained_ = std::move(next);
  dirty_ = true;  // the loop applies it at its next cycle
}

void Service::apply_time_limit_locked(JobRequest& req, TenantId t) const {
  const QueueId leaf = tree_ ? tree_->leaf_of(t) : kNoId;
  if (leaf == kNoId) return;
  const QueueSpec& q = tree_->queue(leaf);
  if (req.time_limit_seconds < 0) {
    req.time_limit_seconds =
        q.default_time_limit_seconds >= 0 ? q.default_time_limit_seconds : q.max_time_limit_seconds;
  } else if (q.max_time_limit_seconds >= 0 && req.time_limit_seconds > q.max_time_limit_seconds) {
    char msg[200];
    std::snprintf(msg, sizeof msg, "%g s is more than queue %s allows (time_limit.max %g s)",
                  req.time_limit_seconds, q.path.c_str(), q.max_time_limit_seconds);
    throw ServiceError(ServiceError::kInvalid, "time_limit", msg);
  }
}

void Service::apply_memory_limit_locked(JobRequest& req, TenantId t) const {
  const QueueId leaf = tree_ ? tree_->leaf_of(t) : kNoId;
  const QueueSpec* q = leaf == kNoId ? nullptr : &tree_->queue(leaf);
  const int64_t def =
      q && q->default_memory_mib > 0 ? q->default_memory_mib : opt_.default_memory_mib;
  const int64_t max = q && q->max_memory_mib > 0 ? q->max_memory_mib : opt_.max_memory_mib;
  if (req.mem_mib == 0) {
    req.mem_mib = def > 0 ? def : std::max<int64_t>(0, max);
  } else if (max > 0 && req.mem_mib > max) {
    throw ServiceError(
        ServiceError::kInvalid, "resources.memory",
        std::to_string(req.mem_mib) + "Mi per member is more than " +
            (q && q->max_memory_mib > 0 ? "queue " + q->path + " allows (memory.max "
                                        : std::string("this server allows (--max-memory ")) +
            std::to_string(max) + "Mi)");
  }
}

TenantLimits Service::limits_for_locked(TenantId t) const {
  std::vector<QueueId> path;  // leaf first
  for (QueueId q = tree_->leaf_of(t); q != kNoId; q = tree_->queue(q).parent) {
    path.push_back(q);
    if (q == kRootQueue) break;
  }
  // From the root down, each queue that sets a limit replaces what is above it (the server's
  // flags first): the queue nearest the tenant's leaf wins.
  TenantLimits lim = opt_.limits;
  for (auto it = path.rbegin(); it != path.rend(); ++it) {
    const QueueSpec& s = tree_->queue(*it);
    if (s.max_pending_jobs >= 0) lim.max_pending_jobs = s.max_pending_jobs;
    if (s.max_pending_jobs_per_user >= 0) lim.max_pending_per_user = s.max_pending_jobs_per_user;
    if (s.max_gang_size >= 0) lim.max_gang_members = static_cast<int32_t>(s.max_gang_size);
    if (s.max_processes >= 0) lim.max_running_members = s.max_processes;
    if (s.submissions_per_second >= 0) lim.submissions_per_second = s.submissions_per_second;
  }
  return lim;
}

void Service::check_limits_locked(const Caller& caller, const JobRequest& req, TenantId t,
                                  double now_s, size_t jobs) {
  const TenantLimits lim = limits_for_locked(t);
  if (req.max_members > lim.max_gang_members) {
    throw ServiceError(ServiceError::kInvalid, "gang.max",
                       "a gang of " + std::to_string(req.max_members) +
                           " members is more than this server runs as one job (" +
                           std::to_string(lim.max_gang_members) +
                           ", --max-gang-size or the queue's tenant_limits)");
  }
  const auto max_pending = static_cast<size_t>(std::max<int64_t>(0, lim.max_pending_jobs));
  if (pending_.count(t) + jobs > max_pending) {
    // An array bigger than the limit could never be queued: a request to change, not to retry.
    if (jobs > max_pending) {
      throw ServiceError(ServiceError::kInvalid, "array",
                         "an array of " + std::to_string(jobs) +
                             " tasks is more than this server queues for one tenant (" +
                             std::to_string(lim.max_pending_jobs) +
                             ", --max-pending-per-tenant or the queue's tenant_limits)");
    }
    throw ServiceError(
        ServiceError::kTooMany, "",
        "tenant " + req.tenant + " has " + std::to_string(pending_.count(t)) + " jobs waiting" +
            (jobs > 1 ? " and this array adds " + std::to_string(jobs) : std::string()) +
            ", past the most this server queues for one tenant (" +
            std::to_string(lim.max_pending_jobs) +
            ", --max-pending-per-tenant or the queue's tenant_limits); submit more as they "
            "start");
  }
  // A user's own share of the tenant's queue (the tenant's token and the admin are not users).
  if (!caller.user.empty() && lim.max_pending_per_user > 0) {
    if (static_cast<int64_t>(jobs) > lim.max_pending_per_user) {
      throw ServiceError(ServiceError::kInvalid, "array",
                         "an array of " + std::to_string(jobs) +
                             " tasks is more than this server queues for one user (" +
                             std::to_string(lim.max_pending_per_user) +
                             ", --max-pending-per-user or the queue's "
                             "tenant_limits.max_pending_jobs_per_user)");
    }
    const int64_t mine = pending_.count_user(user_id_locked(caller.tenant, caller.user));
    if (mine + static_cast<int64_t>(jobs) > lim.max_pending_per_user) {
      throw ServiceError(
          ServiceError::kTooMany, "",
          caller.actor() + " has " + std::to_string(mine) + " jobs waiting" +
              (jobs > 1 ? " and this array adds " + std::to_string(jobs) : std::string()) +
              ", past the most this server queues for one user (" +
              std::to_string(lim.max_pending_per_user) +
              ", --max-pending-per-user or the queue's tenant_limits."
              "max_pending_jobs_per_user); submit more as they start");
    }
  }
  // The admin is the operator, not a tenant racing others: only tenants' tokens are metered.
  // Each task of an array is a submission: an array costs its size, and one larger than the
  // burst could never be taken, so it is a request to change rather than to retry.
  if (!caller.admin && lim.submissions_per_second > 0) {
    if (static_cast<double>(jobs) > lim.submission_burst) {
      throw ServiceError(ServiceError::kInvalid, "array",
                         "an array of " + std::to_string(jobs) +
                             " tasks is more than a tenant may submit at once (" +
                             fmt::format("{:g}", lim.submission_burst) +
                             ", --submission-burst or the queue's tenant_limits)");
    }
    if (t >= submissions_.size()) {
      submissions_.resize(t + 1, TokenBucket(lim.submission_burst, lim.submissions_per_second));
    }
    if (!submissions_[t].take(now_s, static_cast<double>(jobs))) {
      throw ServiceError(ServiceError::kTooMany, "",
                         "tenant " + req.tenant + " submits faster than " +
                             fmt::format("{:g}", lim.submissions_per_second) +
                             " jobs a second (--max-submissions-per-second); retry later");
    }
  }
}

std::optional<Caller> Service::authenticate(const std::string& token) const {
  if (token.empty()) return std::nullopt;
  const std::string h = sha256_hex(token);
  std::lock_guard lock(mu_);
  if (!admin_hash_.empty() && h == admin_hash_) return Caller{true, ""};
  if (auto it = token_tenant_.find(h); it != token_tenant_.end()) return Caller{false, it->second};
  if (auto it = token_user_.find(h); it != token_user_.end()) {
    const UserRow& u = it->second;
    return Caller{false, u.tenant, u.name, u.role == UserRole::kAdmin};
  }
  return std::nullopt;
}

void Service::set_admin_token(const std::string& token) {
  const std::string h = sha256_hex(token);
  std::lock_guard lock(mu_);
  // Unchanged at every restart: no write, so a server whose disk is full still starts.
  if (h == admin_hash_) return;
  store_->set_setting("admin_token_sha256", h);
  admin_hash_ = h;
}

bool Service::has_admin_token() const {
  std::lock_guard lock(mu_);
  return !admin_hash_.empty();
}

JobView Service::submit(const RequestContext& ctx, JobRequest req,
                        const std::string& idempotency_key, bool* created) {
  if (created != nullptr) *created = false;
  std::lock_guard lock(mu_);
  if (ctx.caller.admin) {
    if (req.tenant.empty()) {
      throw ServiceError(ServiceError::kInvalid, "tenant",
                         "the admin submits on behalf of a tenant: name it in `tenant`");
    }
  } else if (req.tenant.empty()) {
    req.tenant = ctx.caller.tenant;
  } else if (req.tenant != ctx.caller.tenant) {
    throw ServiceError(
        ServiceError::kForbidden, "tenant",
        "token of tenant " + ctx.caller.tenant + " cannot submit for tenant " + req.tenant);
  }
  if (!idempotency_key.empty()) {
    if (idempotency_key.size() > kMaxIdempotencyKeyChars ||
        !std::all_of(idempotency_key.begin(), idempotency_key.end(),
                     [](char c) { return c > ' ' && c < 127; })) {
      throw ServiceError(ServiceError::kInvalid, "Idempotency-Key",
                         "an idempotency key is 1-" + std::to_string(kMaxIdempotencyKeyChars) +
                             " printable ASCII characters");
    }
    auto it = idempotency_.find({req.tenant, idempotency_key});
    // A job retention moved out of memory keeps its key in the database.
    const std::optional<JobRow> stored =
        it == idempotency_.end() ? store_->job_by_key(req.tenant, idempotency_key) : std::nullopt;
    if (it != idempotency_.end() || stored) {
      const JobRow& first = stored ? *stored : jobs_.at(it->second)->row;
      // Keys are the tenant's, but a retry is its sender's: another user's job is not handed
      // out as this one's submission (it could not even act on it).
      if (first.user != ctx.caller.user && !ctx.caller.admin) {
        throw ServiceError(
            ServiceError::kConflict, "Idempotency-Key",
            "idempotency key already used for job " + std::to_string(first.id) + " by " +
                (first.user.empty() ? first.tenant : first.user + "@" + first.tenant));
      }
      // A retry repeats its request; the same key with another spec is a client's mistake, and
      // answering with the first job would hide it.
      // A class the classifier chose (serve --classify) is the server's, not the retry's.
      JobRequest asked = req;
      if (!first.classified.empty() && asked.priority_class.empty()) {
        asked.priority_class = first.spec.priority_class;
        if (asked.checkpoint_grace_seconds < 0) {
          asked.checkpoint_grace_seconds = first.spec.checkpoint_grace_seconds;
        }
      }
      if (!(first.spec == asked)) {
        throw ServiceError(ServiceError::kConflict, "Idempotency-Key",
                           "idempotency key already used for job " + std::to_string(first.id) +
                               " with a different spec");
      }
      return stored ? view_of_row_locked(*stored) : view_locked(*jobs_.at(it->second));
    }
  }
  if (deleted_tenants_.contains(req.tenant)) {
    throw ServiceError(ServiceError::kInvalid, "tenant",
                       "tenant " + req.tenant + " was deleted; `tessera tenant create " +
                           req.tenant + "` makes it again");
  }
  if (!tenants_.find(req.tenant)) {
    if (!is_valid_name(req.tenant) && flat_tree_) {
      throw ServiceError(ServiceError::kInvalid, "tenant",
                         "tenant names are 1-63 characters of letters, digits, '-', '_', '.'");
    }
    refuse_reserved_tenant(req.tenant, "tenant");
    // A tenant without a token (the admin submits for it): it gets a queue like any other.
    add_tenant_locked(req.tenant, "tenant");
  }
  if (req.checkpoint_grace_seconds > opt_.max_checkpoint_grace_seconds) {
    char msg[160];
    std::snprintf(msg, sizeof msg,
                  "%g s is more than this server allows (%g s, --max-checkpoint-grace)",
                  req.checkpoint_grace_seconds, opt_.max_checkpoint_grace_seconds);
    throw ServiceError(ServiceError::kInvalid, "checkpoint_grace", msg);
  }
  const TenantId tid = *tenants_.find(req.tenant);
  const double t = now();
  check_limits_locked(ctx.caller, req, tid, t, std::max<size_t>(1, req.array_indices.size()));
  apply_time_limit_locked(req, tid);
  apply_memory_limit_locked(req, tid);
  // A private dataset ("TENANT/NAME") is its tenant's alone.
  if (const std::string_view owner = dataset_owner(req.dataset);
      !owner.empty() && owner != req.tenant) {
    throw ServiceError(ServiceError::kInvalid, "dataset.name",
                       "dataset " + req.dataset + " is private to tenant " + std::string(owner) +
                           "; this job's tenant is " + req.tenant);
  }
  // Dependencies name jobs the caller can see (another tenant's ids are not found).
  for (const auto* list : {&req.after_ok, &req.after_any}) {
    for (size_t i = 0; i < list->size(); ++i) {
      const int64_t dep = (*list)[i];
      const std::string field = std::string(list == &req.after_ok ? "after_ok" : "after_any") +
                                "[" + std::to_string(i) + "]";
      const auto it = jobs_.find(dep);
      // A job out of memory (retention) has ended: after_any is met, and after_ok is met only if
      // it succeeded (a waiting job reads a dependency it cannot find as met).
      const std::optional<JobRow> stored =
          it == jobs_.end() ? store_->job(dep) : std::optional<JobRow>();
      const std::string owner = stored              ? stored->tenant
                                : it != jobs_.end() ? it->second->row.tenant
                                                    : std::string();
      if ((it == jobs_.end() && !stored) || (!ctx.caller.admin && owner != ctx.caller.tenant)) {
        throw ServiceError(ServiceError::kInvalid, field,
                           "job " + std::to_string(dep) + " not found");
      }
      if (stored && list == &req.after_ok && stored->state != JobState::kSucceeded) {
        throw ServiceError(ServiceError::kInvalid, field,
                           "job " + std::to_string(dep) + " ended " +
                               std::string(to_string(stored->state)) +
                               ": after_ok can never be met");
      }
    }
  }
  // One job, or one per index of an array, each with the same spec (the array's tasks are
  // jobs like any other, in index order, so the queue serves the lowest index first).
  const std::string kind = classify_locked(req, tid);
  const JobSpec spec = to_spec_locked(req, tid, "submitted job");
  const std::vector<int32_t>& indices = req.array_indices.get();
  const size_t tasks = std::max<size_t>(1, indices.size());
  std::vector<JobRow> rows(tasks);
  for (size_t k = 0; k < tasks; ++k) {
    JobRow& row = rows[k];
    row.tenant = req.tenant;
    row.user = ctx.caller.user;
    row.spec = req;
    row.classified = kind;
    row.submitted_at = t;
    if (k == 0) row.idempotency_key = idempotency_key;
    if (!indices.empty()) {
      row.array_id = kNewArray;
      row.array_index = indices[k];
    }
  }
  const AuditEntry audit{0, t, ctx.caller.actor(), ctx.method, ctx.path, 201, ""};
  std::string queue = leaf_path_locked(tid);
  const JobEvent submitted{
      0, 0, t, "Submitted",
      "by " + ctx.caller.actor() + (queue.empty() ? "" : " to queue " + queue)};
  api_write([&] { store_->insert_jobs(rows, &audit, {&submitted, 1}); });
  Job* first = nullptr;
  for (JobRow& row : rows) {
    auto j = std::make_unique<Job>();
    j->spec = spec;
    j->spec.submit_time = t;  // arrival order and SLA deadlines count from it
    j->spec.source = "job " + std::to_string(row.id);
    j->spec.user = user_id_locked(row.tenant, row.user);
    j->row = std::move(row);
    j->queued_since = t;
    j->recorded = RecordedState::of(j->row);
    pending_.push_back(j.get());
    if (j->row.array_id != 0) array_tasks_[j->row.array_id].push_back(j->row.id);
    index_dependencies_locked(*j);
    if (first == nullptr) first = j.get();
    const int64_t id = j->row.id;
    jobs_.emplace(id, std::move(j));
  }
  if (!idempotency_key.empty()) idempotency_[{first->row.tenant, idempotency_key}] = first->row.id;
  dirty_ = true;
  wake_.notify_one();
  if (created != nullptr) *created = true;
  return view_locked(*first);
}

Service::Job& Service::visible_job_locked(const Caller& caller, int64_t id) const {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) {
    // Out of memory (retention): it finished long ago, so nothing can be done to it any more.
    const JobRow row = visible_row_locked(caller, id);
    throw ServiceError(
        ServiceError::kConflict, "",
        "job " + std::to_string(id) + " already " + std::string(to_string(row.state)));
  }
  if (!caller.admin && it->second->row.tenant != caller.tenant) {
    throw ServiceError(ServiceError::kForbidden, "",
                       "job " + std::to_string(id) + " belongs to another tenant");
  }
  return *it->second;
}

Service::Job& Service::owned_job_locked(const Caller& caller, int64_t id) const {
  Job& j = visible_job_locked(caller, id);
  if (!caller.acts_on(j.row.tenant, j.row.user)) {
    const std::string by =
        j.row.user.empty() ? "the tenant's token or the admin" : j.row.user + "@" + j.row.tenant;
    throw ServiceError(ServiceError::kForbidden, "",
                       "job " + std::to_string(id) + " was submitted by " + by +
                           ": a member acts on their own jobs (a tenant admin on all of its "
                           "tenant's)");
  }
  return j;
}

JobView Service::cancel(const RequestContext& ctx, int64_t id, bool force) {
  std::lock_guard lock(mu_);
  Job& j = owned_job_locked(ctx.caller, id);
  if (!cancellable_locked(j)) {
    throw ServiceError(
        ServiceError::kConflict, "",
        "job " + std::to_string(id) + " already " + std::string(to_string(j.row.state)));
  }
  cancel_locked({&j}, ctx, force, "job " + std::to_string(id) + (force ? " (force)" : ""));
  return view_locked(j);
}

size_t Service::cancel_array(const RequestContext& ctx, int64_t id, bool force) {
  std::lock_guard lock(mu_);
  const Job& named = owned_job_locked(ctx.caller, id);
  const int64_t array = named.row.array_id;
  if (array == 0) {
    throw ServiceError(ServiceError::kInvalid, "array",
                       "job " + std::to_string(id) + " is not a task of an array");
  }
  std::vector<Job*> tasks;
  for (const int64_t task : array_tasks_[array]) {
    const auto it = jobs_.find(task);
    if (it != jobs_.end() && cancellable_locked(*it->second)) tasks.push_back(it->second.get());
  }
  if (tasks.empty()) {
    throw ServiceError(ServiceError::kConflict, "",
                       "every task of array " + std::to_string(array) + " has ended");
  }
  cancel_locked(tasks, ctx, force,
                "array " + std::to_string(array) + " (" + std::to_string(tasks.size()) + " tasks)" +
                    (force ? " (force)" : ""));
  return tasks.size();
}

bool Service::cancellable_locked(const Job& j) const {
  // Cancelled (or preempted) and still waiting for its processes to exit: a second cancel
  // is answered, not refused, and `force` ends the grace (a job that ignores SIGTERM would
  // otherwise keep its GPUs until the grace runs out).
  const bool stopping = j.stopping && !j.members.empty() &&
                        (j.row.state == JobState::kCancelled || !is_terminal(j.row.state));
  return !is_terminal(j.row.state) || stopping;
}

void Service::cancel_locked(const std::vector<Job*>& jobs, const RequestContext& ctx, bool force,
                            const std::string& target) {
  const double t = now();
  const AuditEntry audit{0, t, ctx.caller.actor(), ctx.method, ctx.path, 200, target};
  // The rows are written first and memory follows only once they are committed: a failed
  // write (a full disk) leaves the jobs as they were, in memory and on disk alike.
  std::vector<JobRow> next;
  next.reserve(jobs.size());
  for (const Job* j : jobs) {
    JobRow n = j->row;
    if (n.state != JobState::kCancelled) {
      n.state = JobState::kCancelled;
      n.message = "cancelled by " + ctx.caller.actor();
      if (j->members.empty()) n.finished_at = t;
    }
    if (force) n.message += " (force: killed without waiting for its grace)";
    next.push_back(std::move(n));
  }
  std::vector<const JobRow*> rows;
  for (const JobRow& n : next) rows.push_back(&n);
  const std::vector<JobEvent> events = row_events_locked(rows, t);
  api_write([&] { store_->update_jobs(rows, &audit, {}, events); });
  mark_recorded_locked(rows);
  for (size_t k = 0; k < jobs.size(); ++k) {
    Job& j = *jobs[k];
    const JobState was = j.row.state;
    j.row = std::move(next[k]);
    if (was == JobState::kPending) pending_.erase(&j);
    if (j.members.empty()) {
      // Nothing runs. GPUs it holds (placed, waiting for its victims to exit) are released by
      // the scheduler thread once those victims are gone (poll_processes): the ledger changes
      // only there, as the unlocked cycle requires.
    } else if (force) {
      j.stopping = true;
      j.kill_at = -1;  // sent now
      j.signal(*backend_, SIGKILL);
    } else if (!j.stopping) {
      ask_to_stop_locked(j, t);
    }
  }
  dirty_ = true;
  wake_.notify_one();
}

Service::DependencyState Service::dependencies_locked(const JobRow& row) const {
  DependencyState out;
  std::string waiting;
  const auto check = [&](const std::vector<int64_t>& ids, bool must_succeed) {
    for (const int64_t dep : ids) {
      const auto it = jobs_.find(dep);
      if (it == jobs_.end()) continue;  // checked at submission; never erased
      const JobState s = it->second->row.state;
      const std::string name = "job " + std::to_string(dep);
      if (!is_terminal(s)) {
        waiting += (waiting.empty() ? "" : ", ") + name + " (" + std::string(to_string(s)) + ")";
      } else if (must_succeed && s != JobState::kSucceeded &&
                 out.state != DependencyState::kNever) {
        out.state = DependencyState::kNever;
        out.why = "dependency never satisfied: " + name + " ended " + std::string(to_string(s)) +
                  " (after_ok)";
      }
    }
  };
  check(row.spec.after_ok, true);
  check(row.spec.after_any, false);
  if (out.state == DependencyState::kNever) return out;
  if (!waiting.empty()) {
    out.state = DependencyState::kWaiting;
    out.why = "waits for " + waiting + " to end (after_ok / after_any)";
  }
  return out;
}

void Service::index_dependencies_locked(const Job& j) {
  for (const int64_t dep : j.row.spec.after_ok) dependents_[dep].push_back(j.row.id);
}

void Service::cancel_unmet_dependencies_locked(double t) {
  // Whether an after_ok job of `row` ended otherwise than succeeded.
  const auto never = [&](const JobRow& row) {
    return std::any_of(row.spec.after_ok.begin(), row.spec.after_ok.end(), [&](int64_t dep) {
      const auto it = jobs_.find(dep);
      return it != jobs_.end() && is_terminal(it->second->row.state) &&
             it->second->row.state != JobState::kSucceeded;
    });
  };
  std::vector<Job*> work;
  for (Job* j : pending_) {
    if (!j->row.spec.after_ok.empty() && j->waits_for.empty() && never(j->row)) work.push_back(j);
  }
  if (work.empty()) return;
  std::vector<const JobRow*> dirty;
  for (size_t i = 0; i < work.size(); ++i) {
    Job* j = work[i];
    if (j->row.state != JobState::kPending) continue;  // reached twice
    j->row.message = dependencies_locked(j->row).why;
    j->row.state = JobState::kCancelled;
    j->row.finished_at = t;
    dirty.push_back(&j->row);
    // Its dependents can never start now either.
    const auto deps = dependents_.find(j->row.id);
    if (deps == dependents_.end()) continue;
    for (const int64_t id : deps->second) {
      ++dependency_visits_;
      const auto it = jobs_.find(id);
      if (it != jobs_.end() && it->second->row.state == JobState::kPending &&
          it->second->waits_for.empty()) {
        work.push_back(it->second.get());
      }
    }
  }
  // One pass over the queue for them all (an erase each would make a chain quadratic).
  const std::unordered_set<const JobRow*> cancelled(dirty.begin(), dirty.end());
  pending_.erase_if([&](const Job* j) { return cancelled.contains(&j->row); });
  save_rows_locked(dirty);
}

void Service::write_job_locked(const JobRow& next, const AuditEntry& audit,
                               std::optional<JobEvent> extra, const std::string& released_by) {
  const JobRow* row = &next;
  std::vector<JobEvent> events = row_events_locked({&row, 1}, audit.at);
  for (JobEvent& e : events) {
    if (e.type == "Released" && e.message.empty()) e.message = released_by;
  }
  if (extra) events.push_back(std::move(*extra));
  api_write([&] { store_->update_job(next, &audit, events); });
  mark_recorded_locked({&row, 1});
}

JobView Service::hold(const RequestContext& ctx, int64_t id) {
  std::lock_guard lock(mu_);
  Job& j = owned_job_locked(ctx.caller, id);
  const std::string what = "job " + std::to_string(id);
  if (j.row.state != JobState::kPending || !j.waits_for.empty() || !j.alloc.empty()) {
    throw ServiceError(
        ServiceError::kConflict, "",
        what + " is " +
            (j.row.state == JobState::kPending ? std::string("starting")
                                               : std::string(to_string(j.row.state))) +
            ": only a waiting job can be held (tessera requeue stops a running one)");
  }
  if (j.row.held) return view_locked(j);
  JobRow next = j.row;
  next.held = true;
  next.message = "held by " + ctx.caller.actor();
  const AuditEntry audit{0, now(), ctx.caller.actor(), ctx.method, ctx.path, 200, what};
  write_job_locked(next, audit);
  j.row = std::move(next);
  dirty_ = true;
  return view_locked(j);
}

JobView Service::release(const RequestContext& ctx, int64_t id) {
  std::lock_guard lock(mu_);
  Job& j = owned_job_locked(ctx.caller, id);
  const std::string what = "job " + std::to_string(id);
  if (!j.row.held) {
    throw ServiceError(ServiceError::kConflict, "", what + " is not held");
  }
  JobRow next = j.row;
  next.held = false;
  next.message.clear();
  const AuditEntry audit{0, now(), ctx.caller.actor(), ctx.method, ctx.path, 200, what};
  write_job_locked(next, audit, {}, "by " + ctx.caller.actor());
  j.row = std::move(next);
  dirty_ = true;
  wake_.notify_one();
  return view_locked(j);
}

JobView Service::requeue(const RequestContext& ctx, int64_t id) {
  std::lock_guard lock(mu_);
  Job& j = owned_job_locked(ctx.caller, id);
  const std::string what = "job " + std::to_string(id);
  if (j.row.state != JobState::kRunning || j.members.empty()) {
    throw ServiceError(ServiceError::kConflict, "",
                       what + " is " + std::string(to_string(j.row.state)) +
                           ": only a running job can be requeued");
  }
  if (j.stopping) {
    throw ServiceError(ServiceError::kConflict, "", what + " is already stopping");
  }
  const double t = now();
  const AuditEntry audit{0, t, ctx.caller.actor(), ctx.method, ctx.path, 200, what};
  api_write([&] { store_->add_audit(audit); });
  j.requeued_by = ctx.caller.actor();
  ask_to_stop_locked(j, t);
  dirty_ = true;
  return view_locked(j);
}

JobView Service::update(const RequestContext& ctx, int64_t id, const JobUpdate& u) {
  std::lock_guard lock(mu_);
  Job& j = owned_job_locked(ctx.caller, id);
  const std::string what = "job " + std::to_string(id);
  if (is_terminal(j.row.state)) {
    throw ServiceError(ServiceError::kConflict, "",
                       what + " already " + std::string(to_string(j.row.state)));
  }
  JobRow next = j.row;
  if (u.priority_class) {
    if (j.row.state != JobState::kPending || !j.alloc.empty()) {
      throw ServiceError(ServiceError::kConflict, "priority_class",
                         what + " is " + std::string(to_string(j.row.state)) +
                             ": only a waiting job's class can change");
    }
    next.spec.priority_class = *u.priority_class;
  }
  if (u.time_limit_seconds) {
    const double was = j.row.spec.time_limit_seconds;
    if (!ctx.caller.admin && was >= 0 && *u.time_limit_seconds > was) {
      throw ServiceError(ServiceError::kForbidden, "time_limit",
                         "only the admin may raise a job's time limit");
    }
    next.spec.time_limit_seconds = *u.time_limit_seconds;
    apply_time_limit_locked(next.spec, j.spec.tenant);  // the queue's maximum holds
  }
  // The class must be one the queue allows: the spec is built again, refusing otherwise.
  JobSpec spec = to_spec_locked(next.spec, j.spec.tenant, what);
  spec.submit_time = j.spec.submit_time;
  spec.source = j.spec.source;
  spec.user = j.spec.user;
  const AuditEntry audit{0, now(), ctx.caller.actor(), ctx.method, ctx.path, 200, what};
  std::string changes;
  if (u.priority_class) changes = "priority class " + *u.priority_class;
  if (u.time_limit_seconds) {
    changes += std::string(changes.empty() ? "" : ", ") + "time limit " +
               fmt::format("{:g} s", next.spec.time_limit_seconds);
  }
  write_job_locked(next, audit,
                   JobEvent{0, id, audit.at, "Updated", changes + " by " + ctx.caller.actor()});
  j.row = std::move(next);
  // What the scheduler reads of it changed: its class, or its time limit (reservations).
  if (u.priority_class || u.time_limit_seconds) {
    j.next_spec = std::move(spec);
    spec_updates_.push_back(id);
  }
  dirty_ = true;
  wake_.notify_one();
  return view_locked(j);
}

std::string Service::create_tenant(const RequestContext& ctx, const std::string& name) {
  if (!ctx.caller.admin) {
    throw ServiceError(ServiceError::kForbidden, "", "only the admin creates tenants");
  }
  if (!is_valid_name(name)) {
    throw ServiceError(ServiceError::kInvalid, "name",
                       "tenant names are 1-63 characters of letters, digits, '-', '_', '.'");
  }
  refuse_reserved_tenant(name, "name");
  std::lock_guard lock(mu_);
  for (const auto& [h, t] : token_tenant_) {
    if (t == name) {
      throw ServiceError(ServiceError::kConflict, "name", "tenant " + name + " exists");
    }
  }
  if (!tenants_.find(name)) add_tenant_locked(name, "name");
  const std::string token = new_token();
  const double t = now();
  const TenantRow row{name, sha256_hex(token), t};
  const AuditEntry audit{0, t, ctx.caller.actor(), ctx.method, ctx.path, 201, "tenant " + name};
  bool added = false;
  api_write([&] { added = store_->add_tenant(row, &audit); });
  if (!added) {
    throw ServiceError(ServiceError::kConflict, "name", "tenant " + name + " exists");
  }
  token_tenant_[row.token_sha256] = name;
  deleted_tenants_.erase(name);
  return token;
}

void Service::delete_tenant(const RequestContext& ctx, const std::string& name) {
  if (!ctx.caller.admin) {
    throw ServiceError(ServiceError::kForbidden, "", "only the admin deletes tenants");
  }
  std::lock_guard lock(mu_);
  const std::optional<TenantId> t = tenants_.find(name);
  if (!t || deleted_tenants_.contains(name)) {
    throw ServiceError(ServiceError::kNotFound, "", "no tenant " + name);
  }
  int64_t live = static_cast<int64_t>(pending_.count(*t));
  for (const auto& [id, jp] : active_) {
    if (jp->spec.tenant == *t && !is_terminal(jp->row.state)) ++live;
  }
  if (live > 0) {
    throw ServiceError(ServiceError::kConflict, "",
                       "tenant " + name + " has " + std::to_string(live) +
                           " jobs waiting or running; cancel them first (tessera cancel ID)");
  }
  const double at = now();
  const AuditEntry audit{0, at, ctx.caller.actor(), ctx.method, ctx.path, 200, "tenant " + name};
  api_write([&] { store_->delete_tenant(name, at, &audit); });
  std::erase_if(token_tenant_, [&](const auto& e) { return e.second == name; });
  std::erase_if(token_user_, [&](const auto& e) { return e.second.tenant == name; });
  deleted_tenants_.insert(name);
}

std::string Service::rotate_token(const RequestContext& ctx, const std::string& name) {
  if (!ctx.caller.admin) {
    throw ServiceError(ServiceError::kForbidden, "", "only the admin rotates tokens");
  }
  std::lock_guard lock(mu_);
  const std::string token = new_token();
  const std::string hash = sha256_hex(token);
  const AuditEntry audit{0, now(), ctx.caller.actor(), ctx.method, ctx.path, 200, "tenant " + name};
  bool changed = false;
  api_write([&] { changed = store_->set_tenant_token(name, hash, &audit); });
  if (!changed) {
    throw ServiceError(ServiceError::kNotFound, "", "tenant " + name + " has no token");
  }
  std::erase_if(token_tenant_, [&](const auto& e) { return e.second == name; });
  token_tenant_[hash] = name;
  return token;
}

void Service::revoke_token(const RequestContext& ctx, const std::string& name) {
  if (!ctx.caller.admin) {
    throw ServiceError(ServiceError::kForbidden, "", "only the admin revokes tokens");
  }
  std::lock_guard lock(mu_);
  const AuditEntry audit{0, now(), ctx.caller.actor(), ctx.method, ctx.path, 200, "tenant " + name};
  bool removed = false;
  api_write([&] { removed = store_->remove_tenant_token(name, &audit); });
  if (!removed) {
    throw ServiceError(ServiceError::kNotFound, "", "tenant " + name + " has no token");
  }
  std::erase_if(token_tenant_, [&](const auto& e) { return e.second == name; });
}

void Service::audit_refusal(const RequestContext& ctx, int32_t status, const std::string& target) {
  const double t = now();
  // A refused request's path may be anything a client sent: kept, made valid UTF-8.
  AuditEntry e{0,
               t,
               ctx.caller.actor().empty() ? "anonymous" : ctx.caller.actor(),
               to_valid_utf8(ctx.method),
               to_valid_utf8(ctx.path),
               status,
               to_valid_utf8(target)};
  if (ctx.caller.actor().empty()) {
    // Anyone can send refused calls without a token, and each would be a row: a budget keeps
    // what they can write bounded; the rest are counted and the count is written with the
    // next row that fits the budget.
    std::lock_guard lock(mu_);
    if (!anonymous_audit_.take(t)) {
      ++counters_.audit_suppressed;
      ++anonymous_suppressed_;
      return;
    }
    if (anonymous_suppressed_ > 0) {
      e.target += (e.target.empty() ? "" : "; ") + std::string("and ") +
                  std::to_string(anonymous_suppressed_) +
                  " more refused anonymous calls, not recorded one by one";
      anonymous_suppressed_ = 0;
    }
  }
  api_write([&] { store_->add_audit(e); });
}

}  // namespace tessera
