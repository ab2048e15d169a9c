// Retention: finished jobs past the retention leave the server's memory, so that a
// server with millions of jobs in its history holds only the live ones and the recent past;
// the API reads the others from the database (its partial indexes keep those pages fast).
// Archiving then moves the oldest out of the live tables into JSON-lines files.
//
// Invariant: every job is either in jobs_ or marked evicted in the database, never both, so a
// listing is the union of the two without duplicates.
#include <iostream>
#include <set>

#include "control/serve/job.h"
#include "control/serve/service.h"

namespace tessera {
namespace {

constexpr double kEvictionEvery = 60;     // seconds of the service's clock
constexpr double kArchiveEvery = 3600;    // seconds
constexpr size_t kArchiveBatch = 10'000;  // jobs per archive file

}  // namespace

void Service::evict_finished_locked(double t) {
  if (opt_.retain_finished_seconds < 0) return;
  if (last_eviction_ > 0 && t - last_eviction_ < kEvictionEvery) return;
  last_eviction_ = t;
  const double cutoff = t - opt_.retain_finished_seconds;
  // A waiting job's dependencies are read from memory: the jobs it names stay.
  std::set<int64_t> pinned;
  for (const Job* j : pending_) {
    pinned.insert(j->row.spec.after_ok.begin(), j->row.spec.after_ok.end());
    pinned.insert(j->row.spec.after_any.begin(), j->row.spec.after_any.end());
  }
  std::vector<int64_t> ids;
  for (const auto& [id, jp] : jobs_) {
    const JobRow& r = jp->row;
    if (!is_terminal(r.state) || r.finished_at < 0 || r.finished_at >= cutoff) continue;
    if (active_.count(id) != 0 || unsaved_.count(id) != 0 || pinned.count(id) != 0) continue;
    ids.push_back(id);
  }
  if (ids.empty()) return;
  try {
    store_->mark_evicted(ids);
  } catch (const StoreError& e) {
    note_write_failure(e);  // kept in memory; the next pass tries again
    return;
  }
  std::set<int64_t> arrays;
  for (const int64_t id : ids) {
    const auto it = jobs_.find(id);
    const JobRow& r = it->second->row;
    if (!r.idempotency_key.empty()) idempotency_.erase({r.tenant, r.idempotency_key});
    if (r.array_id != 0) arrays.insert(r.array_id);
    reasons_.erase(id);
    unqueue_locked(id);  // cancelled since the last cycle: its spec goes with it
    jobs_.erase(it);
  }
  for (const int64_t a : arrays) {
    std::vector<int64_t>& tasks = array_tasks_[a];
    std::erase_if(tasks, [&](int64_t id) { return !jobs_.contains(id); });
    if (tasks.empty()) array_tasks_.erase(a);
  }
  counters_.jobs_evicted += ids.size();
}

void Service::archive_if_due() {
  if (opt_.archive_after_seconds < 0) return;
  const double t = now();
  if (last_archive_ > 0 && t - last_archive_ < kArchiveEvery) return;
  last_archive_ = t;
  try {
    for (;;) {
      const ArchiveResult r =
          store_->archive(t - opt_.archive_after_seconds, opt_.archive_dir, kArchiveBatch);
      if (r.jobs < kArchiveBatch) break;
    }
  } catch (const StoreError& e) {
    // The rows stay where they are; the next hour tries again.
    std::cerr << "tessera serve: archiving failed: " << e.what() << "\n";
  }
}

ArchiveResult Service::archive(const RequestContext& ctx, double older_than_seconds) {
  if (!ctx.caller.admin) {
    throw ServiceError(ServiceError::kForbidden, "", "only the admin archives jobs");
  }
  if (opt_.retain_finished_seconds >= 0 && older_than_seconds < opt_.retain_finished_seconds) {
    throw ServiceError(ServiceError::kInvalid, "older_than",
                       "jobs are archived once out of memory: older_than must be at least the "
                       "retention (--retain-finished, " +
                           std::to_string(static_cast<int64_t>(opt_.retain_finished_seconds)) +
                           " s)");
  }
  const double t = now();
  ArchiveResult out;
  try {
    for (;;) {
      ArchiveResult r = store_->archive(t - older_than_seconds, opt_.archive_dir, kArchiveBatch);
      out.jobs += r.jobs;
      for (std::string& f : r.files) out.files.push_back(std::move(f));
      if (r.jobs < kArchiveBatch) break;
    }
  } catch (const StoreError& e) {
    throw ServiceError(ServiceError::kUnavailable, "",
                       std::string("archiving stopped (") + e.what() + "); " +
                           std::to_string(out.jobs) + " jobs were archived before it");
  }
  const AuditEntry audit{0,
                         t,
                         ctx.caller.actor(),
                         ctx.method,
                         ctx.path,
                         200,
                         std::to_string(out.jobs) + " jobs archived"};
  api_write([&] { store_->add_audit(audit); });
  return out;
}

JobRow Service::visible_row_locked(const Caller& caller, int64_t id) const {
  if (jobs_.contains(id)) return visible_job_locked(caller, id).row;
  std::optional<JobRow> row = store_->job(id);
  if (!row) {
    throw ServiceError(ServiceError::kNotFound, "",
                       "job " + std::to_string(id) + " not found" +
                           (opt_.archive_after_seconds >= 0 ? " (or archived)" : ""));
  }
  if (!caller.admin && row->tenant != caller.tenant) {
    throw ServiceError(ServiceError::kForbidden, "",
                       "job " + std::to_string(id) + " belongs to another tenant");
  }
  return std::move(*row);
}

JobView Service::view_of_row_locked(const JobRow& row) const {
  JobView v;
  v.row = row;
  const std::optional<TenantId> t = tenants_.find(row.tenant);
  v.queue = t ? leaf_path_locked(*t) : "";
  PriorityClass p = PriorityClass::kResearch;
  if (row.spec.priority_class.empty()) {
    // Its queue's default, as for a job in memory (a class filter must find it either way).
    JobSpec s;
    const QueueId leaf = t && tree_ ? tree_->leaf_of(*t) : kNoId;
    if (tree_) apply_queue_defaults(tree_->queue(leaf == kNoId ? kRootQueue : leaf), s);
    v.priority_class = std::string(to_string(s.priority));
  } else {
    v.priority_class = parse_priority_class(row.spec.priority_class, p) ? std::string(to_string(p))
                                                                        : row.spec.priority_class;
  }
  return v;
}

}  // namespace tessera
