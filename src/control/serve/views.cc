// What the API reads: jobs, logs, queues, nodes, tenants, the audit log, usage and metrics,
// each under the service's lock, shaped for the caller.
#include "control/serve/service.h"

#include <fmt/format.h>
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "control/serve/job.h"
#include "control/token.h"
#include "engine/admission.h"
#include "model/input_error.h"
#include "model/utf8.h"

namespace tessera {

JobView Service::view_locked(const Job& j) const {
  JobView v;
  v.row = j.row;
  v.queue = leaf_path_locked(j.spec.tenant);
  v.priority_class = std::string(to_string(j.next_spec ? j.next_spec->priority : j.spec.priority));
  std::tie(v.reason_code, v.pending_reason) = why_pending_locked(j, true);
  v.placement = placement_locked(j.alloc);
  return v;
}

std::pair<std::string, std::string> Service::why_pending_locked(const Job& j, bool text) const {
  if (j.row.state != JobState::kPending) return {};
  const std::string id = std::to_string(j.row.id);
  if (j.row.held) {
    if (!text) return {"Held", ""};
    return {"Held", j.row.message + "; it starts only after `tessera release " + id + "`"};
  }
  if (!j.row.spec.after_ok.empty() || !j.row.spec.after_any.empty()) {
    DependencyState deps = dependencies_locked(j.row);
    if (deps.state == DependencyState::kWaiting) return {"Dependency", std::move(deps.why)};
  }
  if (!j.unrunnable.empty()) {
    if (!text) return {"Unrunnable", ""};
    return {"Unrunnable", "cannot run on this server as configured now (" + j.unrunnable +
                              "); it waits for a restart with what it needs, or a cancel"};
  }
  if (process_held_.count(j.row.id) != 0) {
    if (!text) return {"TenantLimit", ""};
    return {"TenantLimit",
            "waits for tenant " + j.row.tenant + "'s running jobs: it would take the tenant past " +
                std::to_string(limits_for_locked(j.spec.tenant).max_running_members) +
                " processes (--max-processes-per-tenant, or its queue's "
                "tenant_limits.max_processes)"};
  }
  if (array_held_.count(j.row.id) != 0) {
    if (!text) return {"ArrayLimit", ""};
    return {"ArrayLimit", "array " + std::to_string(j.row.array_id) + " runs " +
                              std::to_string(j.row.spec.array_throttle) +
                              " tasks at once, the most it allows (array: ...%" +
                              std::to_string(j.row.spec.array_throttle) + ")"};
  }
  if (!j.waits_for.empty()) {
    if (!text) return {"Preempting", ""};
    std::string ids;
    for (int64_t w : j.waits_for) ids += (ids.empty() ? "" : ", ") + std::to_string(w);
    return {"Preempting",
            "starting: placed, waiting for preempted job " + ids + " to exit (checkpoint grace)"};
  }
  if (j.staging) {
    if (!text) return {"Staging", ""};
    const DatasetCache::Entry* e = datasets_ ? datasets_->find(j.row.spec.dataset) : nullptr;
    if (!j.staging_why.empty()) {
      return {"Staging", "starting: placed, waiting for room to stage dataset " +
                             j.row.spec.dataset + ": " + j.staging_why};
    }
    return {"Staging",
            fmt::format("starting: placed, waiting for dataset {} to be staged into the cache "
                        "({:.0f} s so far)",
                        j.row.spec.dataset,
                        e != nullptr && e->state == DatasetCache::State::kStaging
                            ? std::max(0.0, now() - e->stage_started)
                            : 0.0)};
  }
  if (adaptive_locked(j) && j.round_members == 0) {
    if (!text) return {"GoodputRound", ""};
    return {"GoodputRound",
            fmt::format("waits for a goodput round to give it GPUs (every {:g} s; the last gave "
                        "its GPUs to jobs that gain more from them, or had none its gang fits)",
                        opt_.goodput_round_seconds)};
  }
  const auto it = reasons_.find(j.row.id);
  if (it == reasons_.end()) return {};
  const PendingReason& r = it->second.reason;
  if (!text) return {reason_code(r.code), ""};
  const std::string blocker = r.code == PendingCode::kReservedGpus ? it->second.reservation
                              : r.blocker == kNoId                 ? ""
                                                                   : std::to_string(r.blocker);
  const std::string queue =
      r.queue != kNoId && tree_ && r.queue < tree_->size() ? tree_->queue(r.queue).path : "";
  return {reason_code(r.code), describe(r, blocker, queue)};
}

std::vector<MemberPlacement> Service::placement_locked(const Allocation& a) const {
  std::vector<MemberPlacement> out;
  const size_t gpm = static_cast<size_t>(a.gpus_per_member);
  for (int32_t m = 0; m < a.members(); ++m) {
    MemberPlacement p;
    p.rank = m;
    p.node = cluster_.node(a.member_node[static_cast<size_t>(m)]).name;
    for (size_t k = 0; k < gpm; ++k) {
      const GpuShare& s = a.shares[static_cast<size_t>(m) * gpm + k];
      p.gpus.push_back(gpu_index_[s.gpu]);
      p.gpu_milli = s.milli;
    }
    out.push_back(std::move(p));
  }
  return out;
}

JobView Service::job(const Caller& caller, int64_t id) const {
  std::lock_guard lock(mu_);
  if (!jobs_.contains(id)) return view_of_row_locked(visible_row_locked(caller, id));
  return view_locked(visible_job_locked(caller, id));
}

std::vector<JobView> Service::jobs(const Caller& caller, const JobFilter& f) const {
  if (!caller.admin && !f.tenant.empty() && f.tenant != caller.tenant) {
    // An empty list would read as "that tenant has no jobs".
    throw ServiceError(
        ServiceError::kForbidden, "tenant",
        "token of tenant " + caller.tenant + " cannot list tenant " + f.tenant + "'s jobs");
  }
  std::lock_guard lock(mu_);
  std::vector<JobView> out;
  const auto wanted = [&](const Job& j) {
    const JobRow& r = j.row;
    if (!caller.admin && r.tenant != caller.tenant) return false;
    if (!f.tenant.empty() && r.tenant != f.tenant) return false;
    if (f.array != 0 && r.array_id != f.array) return false;
    if (!f.wants(r.state)) return false;
    if (!f.queue.empty() && !f.in_queue(leaf_path_locked(j.spec.tenant))) return false;
    if (!f.priority_class.empty() &&
        to_string(j.next_spec ? j.next_spec->priority : j.spec.priority) != f.priority_class) {
      return false;
    }
    return f.reason.empty() || why_pending_locked(j, false).first == f.reason;
  };
  if (f.newest_first) {
    auto it = f.before > 0 ? jobs_.lower_bound(f.before) : jobs_.end();
    while (it != jobs_.begin() && out.size() < f.limit) {
      --it;
      if (wanted(*it->second)) out.push_back(view_locked(*it->second));
    }
  } else {
    for (auto it = jobs_.upper_bound(f.after); it != jobs_.end() && out.size() < f.limit; ++it) {
      if (wanted(*it->second)) out.push_back(view_locked(*it->second));
    }
  }
  // Finished jobs retention moved out of memory are in the database (no job is in both): the
  // page is the first `limit` of the two, merged by id. Only finished states are evicted, so a
  // listing of waiting or running jobs never reads the database. (A server started without
  // retention still lists the jobs an earlier one evicted: they are not loaded again.)
  // A finished job waits for nothing: a reason filter never matches one.
  const bool finished_wanted =
      (f.states.empty() || std::any_of(f.states.begin(), f.states.end(), is_terminal)) &&
      f.reason.empty();
  if (!finished_wanted) return out;
  EvictedQuery q;
  q.states = f.states;
  q.tenant = caller.admin ? f.tenant : caller.tenant;
  q.array_id = f.array;
  q.newest_first = f.newest_first;
  q.after = f.after;
  q.before = f.before;
  q.limit = f.limit;
  if (!f.queue.empty()) {
    for (TenantId t = 0; t < tenants_.size(); ++t) {
      if (f.in_queue(leaf_path_locked(t))) q.tenants_in.push_back(tenants_.name(t));
    }
    if (q.tenants_in.empty()) return out;
  }
  // The class is inside the stored spec: read pages and keep the matching rows until the
  // page is full or the table ends.
  std::vector<JobRow> stored;
  for (;;) {
    std::vector<JobRow> rows = store_->evicted_jobs(q);
    const bool last = rows.size() < q.limit;
    if (!rows.empty()) (q.newest_first ? q.before : q.after) = rows.back().id;
    for (JobRow& r : rows) {
      if (!f.priority_class.empty() && view_of_row_locked(r).priority_class != f.priority_class) {
        continue;
      }
      if (stored.size() < f.limit) stored.push_back(std::move(r));
    }
    if (last || stored.size() >= f.limit || f.priority_class.empty()) break;
  }
  if (stored.empty()) return out;
  std::vector<JobView> merged;
  merged.reserve(std::min(f.limit, out.size() + stored.size()));
  size_t a = 0, b = 0;
  const auto first = [&](int64_t x, int64_t y) { return f.newest_first ? x > y : x < y; };
  while (merged.size() < f.limit && (a < out.size() || b < stored.size())) {
    if (b == stored.size() || (a < out.size() && first(out[a].row.id, stored[b].id))) {
      merged.push_back(std::move(out[a++]));
    } else {
      merged.push_back(view_of_row_locked(stored[b++]));
    }
  }
  return merged;
}

LogSlice Service::logs(const Caller& caller, int64_t id, int32_t rank, int64_t tail_bytes,
                       int64_t from_offset) const {
  uint32_t attempt = 0;
  {
    std::lock_guard lock(mu_);
    const JobRow row = visible_row_locked(caller, id);
    if (row.attempts == 0) {
      throw ServiceError(ServiceError::kNotFound, "",
                         "job " + std::to_string(id) + " has not started, so it has no logs");
    }
    const int32_t world = row.spec.max_members;
    if (rank < 0 || rank >= world) {
      throw ServiceError(ServiceError::kInvalid, "rank",
                         "rank must be in 0.." + std::to_string(world - 1));
    }
    attempt = static_cast<uint32_t>(row.attempts);
  }
  LogSlice out;
  try {
    out.file = backend_->open_log(static_cast<uint64_t>(id), attempt, rank);
  } catch (const LogFileError& e) {
    throw ServiceError(ServiceError::kForbidden, "", "job " + std::to_string(id) + ": " + e.what());
  }
  const int64_t size = out.file.size();
  out.attempt = attempt;
  if (from_offset >= 0) {
    out.offset = std::min(from_offset, size);
    out.length = size - out.offset;
    if (tail_bytes > 0) out.length = std::min(out.length, tail_bytes);
    return out;
  }
  out.offset = tail_bytes > 0 && size > tail_bytes ? size - tail_bytes : 0;
  out.length = size - out.offset;
  return out;
}

std::vector<QueueView> Service::queues(const Caller& caller) const {
  std::lock_guard lock(mu_);
  const std::vector<PendingJob> pending = pending_snapshot_locked();
  std::vector<RunningJob> running;
  std::vector<std::pair<int64_t, int64_t>> counts(tenants_.size());  // pending, running
  for (TenantId t = 0; t < counts.size(); ++t) counts[t].first = pending_.count(t);
  for (const auto& [id, jp] : active_) {
    if (jp->alloc.empty()) continue;
    RunningJob r;
    r.id = static_cast<JobId>(id);
    r.spec = &jp->spec;
    r.alloc = &jp->alloc;
    running.push_back(r);
    ++counts[jp->spec.tenant].second;
  }
  Snapshot snap;
  snap.now = now();
  snap.state = &state_;
  snap.pending = pending;
  snap.running = running;
  snap.queues = tree_.get();
  const DecayedUsage& decayed = driver_.usage().decayed();
  snap.decayed_usage = decayed.view();
  std::vector<QueueView> out = queue_views(snap, decayed, counts);
  if (!caller.admin) {
    // A tenant sees its own queue only: the others' names and loads are theirs.
    const std::optional<TenantId> t = tenants_.find(caller.tenant);
    const std::string mine = t ? leaf_path_locked(*t) : "";
    std::erase_if(out, [&](const QueueView& v) { return v.path != mine; });
  }
  return out;
}

std::vector<NodeView> Service::nodes() const {
  std::lock_guard lock(mu_);
  return nodes_locked();
}

std::vector<NodeView> Service::nodes_locked() const {
  std::vector<NodeView> out = node_views(state_, [&](GpuId g) { return gpu_index_[g]; });
  std::vector<HeldAllocation> held;
  for (const auto& [id, jp] : active_) {
    if (!jp->alloc.empty())
      held.push_back(HeldAllocation{id, jp->row.tenant, jp->row.spec.name, &jp->alloc});
  }
  mark_gpu_holders(out, cluster_, held);
  mark_reserved_gpus_locked(out);
  for (NodeView& v : out) {
    if (!drained_.contains(v.name)) continue;
    const bool busy =
        std::any_of(v.gpus.begin(), v.gpus.end(), [](const GpuView& g) { return !g.jobs.empty(); });
    v.state = busy ? "draining" : "drained";
  }
  return out;
}

std::vector<NodeView> Service::nodes(const Caller& caller) const {
  std::vector<NodeView> out = nodes();
  if (caller.admin) return out;
  // Another tenant's share shows as held, not by whom.
  for (NodeView& n : out) {
    for (GpuView& g : n.gpus) {
      for (GpuHolder& h : g.holders) {
        if (h.tenant != caller.tenant) {
          h.tenant.clear();
          h.name.clear();
        }
      }
    }
  }
  return out;
}

std::vector<TenantView> Service::tenants() const {
  std::lock_guard lock(mu_);
  std::vector<TenantView> out(tenants_.size());
  for (TenantId t = 0; t < out.size(); ++t) {
    out[t].name = tenants_.name(t);
    out[t].queue = leaf_path_locked(t);
    out[t].pending_jobs = static_cast<int64_t>(pending_.count(t));
  }
  for (const auto& [id, jp] : active_) {
    if (!jp->alloc.empty()) ++out[jp->spec.tenant].running_jobs;
  }
  for (const TenantRow& row : store_->tenants()) {
    if (const std::optional<TenantId> t = tenants_.find(row.name)) {
      out[*t].has_token = true;
      out[*t].created_at = row.created_at;
    }
  }
  std::erase_if(out, [&](const TenantView& v) { return deleted_tenants_.contains(v.name); });
  std::sort(out.begin(), out.end(),
            [](const TenantView& a, const TenantView& b) { return a.name < b.name; });
  return out;
}

std::vector<AuditEntry> Service::audit_log(size_t limit, const AuditFilter& f) const {
  return store_->audit_log(limit, f);
}

std::vector<UsageRow> Service::usage(const Caller& caller, double since, double until,
                                     bool by_user) const {
  if (!(since < until)) {
    throw ServiceError(ServiceError::kInvalid, "until", "must be later than since");
  }
  std::vector<RunRecord> runs;
  std::vector<JobRecord> jobs;
  try {
    runs = store_->runs(since, until);
    // Jobs retention moved out of memory: a job finished or first started in the window
    // finished at or after its start.
    jobs = store_->evicted_records(since);
  } catch (const StoreError& e) {
    throw ServiceError(ServiceError::kUnavailable, "", std::string("reading usage: ") + e.what());
  }
  {
    std::lock_guard lock(mu_);
    const double t = now();
    for (JobRecord& r : jobs) {
      const std::optional<TenantId> tid = tenants_.find(r.tenant);
      r.queue = tid ? leaf_path_locked(*tid) : "";
    }
    for (const RunRecord& r : unsaved_runs_) {
      if (r.ended >= since && r.started < until) runs.push_back(r);
    }
    for (const auto& [id, jp] : active_) {
      const Job& j = *jp;
      if (j.run.job == 0 || j.run.started >= until) continue;
      RunRecord live = j.run;
      live.ended = t;
      // Its average draw so far (its power limit may have changed).
      if (t > live.started) live.gpu_watts = run_joules_locked(j, t) / (t - live.started);
      runs.push_back(std::move(live));
    }
    jobs.reserve(jobs.size() + jobs_.size());
    for (const auto& [id, jp] : jobs_) {
      const Job& j = *jp;
      jobs.push_back(JobRecord{id, j.row.tenant, leaf_path_locked(j.spec.tenant),
                               std::string(to_string(j.row.state)), j.row.submitted_at,
                               j.row.finished_at, j.row.user});
    }
  }
  std::vector<UsageRow> rows = usage_report(runs, jobs, since, until, opt_.carbon.get(), by_user);
  if (!caller.admin)
    std::erase_if(rows, [&](const UsageRow& r) { return r.tenant != caller.tenant; });
  return rows;
}

ServiceMetrics Service::metrics() const {
  std::lock_guard lock(mu_);
  ServiceMetrics m = counters_;
  driver_.report(m);
  m.store_write_failures = static_cast<uint64_t>(health_.failures_total());
  m.store_writable = health_.ok();
  if (datasets_) {
    m.datasets = true;
    m.stagings_ok = datasets_->stagings_done();
    m.stagings_failed = datasets_->stagings_failed();
    m.dataset_evictions = datasets_->evictions();
    m.dataset_cache_used_gb = datasets_->used_gb();
    m.dataset_cache_capacity_gb = datasets_->capacity_gb();
  }
  std::vector<ServiceMetrics::Tenant> by(tenants_.size());
  for (TenantId t = 0; t < tenants_.size(); ++t) by[t].name = tenants_.name(t);
  for (TenantId t = 0; t < by.size(); ++t) by[t].pending = pending_.count(t);
  for (const auto& [id, jp] : active_) {
    if (jp->row.state == JobState::kRunning) {
      ++by[jp->spec.tenant].running;
      ++m.running_jobs;
    }
    by[jp->spec.tenant].gpus_allocated += static_cast<double>(jp->alloc.gpu_milli()) / 1000.0;
  }
  m.pending_jobs = static_cast<int64_t>(pending_.size());
  m.jobs_in_memory = jobs_.size();
  m.gpus_total = cluster_.num_gpus();
  m.gpus_allocated = static_cast<double>(state_.allocated_milli()) / 1000.0;
  m.tenants = std::move(by);
  energy_metrics_locked(m, now());
  return m;
}

// ---- the read API's view (ReadModel) ----

namespace {

Caller caller_of(const Reader& r) {
  if (r.everything) return Caller{true, ""};
  if (r.owners.size() != 1) {
    throw ServiceError(ServiceError::kForbidden, "", "a reader here is the admin or one tenant");
  }
  return Caller{false, *r.owners.begin()};
}

}  // namespace

Reader Service::reader_of(const Caller& c) {
  if (c.admin) return Reader{true, {}};
  return Reader{false, {c.tenant}};
}

std::vector<JobView> Service::jobs(const Reader& r, const JobFilter& f) const {
  return jobs(caller_of(r), f);
}

JobView Service::job(const Reader& r, int64_t id) const {
  return job(caller_of(r), id);
}

std::vector<JobEvent> Service::job_events(const Reader& r, int64_t id) const {
  return job_events(caller_of(r), id);
}

std::vector<QueueView> Service::queues(const Reader& r) const {
  return queues(caller_of(r));
}

std::vector<NodeView> Service::nodes(const Reader& r) const {
  return nodes(caller_of(r));
}

std::vector<HistorySample> Service::history(const Reader& r, double since, double until,
                                            double step) const {
  return history(caller_of(r), since, until, step);
}

}  // namespace tessera
