// The scheduler thread's cycle: the kept queue brought up to date with what may start (the
// tenant and array limits held out), the engine run over a snapshot through the cycle driver, and
// its decisions applied in one transaction: written first, then acted on.
#include "control/serve/service.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <tuple>
#include <unordered_map>

#include "control/serve/job.h"
#include "control/serve/transaction.h"
#include "engine/cycle.h"
#include "engine/snapshot.h"

namespace tessera {

std::vector<int64_t> Service::running_members_locked() const {
  // Members of jobs that run or are about to (placed, waiting for their victims).
  std::vector<int64_t> running(tenants_.size(), 0);
  for (const auto& [id, jp] : active_) {
    const auto members =
        std::max<int64_t>(jp->alloc.members(), static_cast<int64_t>(jp->members.size()));
    if (jp->spec.tenant < running.size()) running[jp->spec.tenant] += members;
  }
  return running;
}

std::vector<int64_t> Service::process_caps_locked() const {
  std::vector<int64_t> cap(tenants_.size());
  for (TenantId t = 0; t < cap.size(); ++t) cap[t] = limits_for_locked(t).max_running_members;
  return cap;
}

Service::Standing Service::standing_locked(const Job& j) const {
  if (j.row.held) return Standing::kHeld;
  if ((!j.row.spec.after_ok.empty() || !j.row.spec.after_any.empty()) &&
      dependencies_locked(j.row).state != DependencyState::kMet) {
    return Standing::kDependency;
  }
  if (!j.unrunnable.empty()) return Standing::kUnrunnable;
  // An adaptive job starts at the size its goodput round gave it, and not before one did.
  if (adaptive_locked(j) && j.round_members <= 0) return Standing::kGoodputRound;
  return Standing::kEligible;
}

const JobSpec& Service::cycle_spec_locked(const Job& j) const {
  return adaptive_locked(j) ? j.round_spec : j.spec;
}

std::vector<PendingJob> Service::pending_snapshot_locked() const {
  std::vector<PendingJob> out;
  out.reserve(pending_.size());
  for (const Job* j : pending_) {
    if (standing_locked(*j) == Standing::kEligible) {
      out.push_back(PendingJob{static_cast<JobId>(j->row.id), &cycle_spec_locked(*j), j->attained,
                               j->queued_since});
    }
  }
  return out;
}

void Service::unqueue_locked(int64_t id) {
  if (!driver_.has_queue() || !driver_.queue().contains(static_cast<JobId>(id))) return;
  driver_.queue().remove(static_cast<JobId>(id));
  if (auto it = jobs_.find(id); it != jobs_.end()) it->second->queued_spec = nullptr;
}

// A pass over the waiting jobs in arrival order: each that a cycle may start is in the queue as
// it is now (a job whose spec, service or queueing time differs is put in anew), each that may
// not is out, with why for the limits (process_held_, array_held_). Tree updates are only for
// jobs whose standing changed; a job new to the queue wants its reason.
void Service::sync_queue_locked() {
  PendingQueue& queue = driver_.queue();
  // Processes of a tenant's running jobs against its limit.
  const std::vector<int64_t> procs = running_members_locked();
  const std::vector<int64_t> caps = process_caps_locked();
  process_held_.clear();
  array_held_.clear();
  restanding_.clear();
  struct Look {
    Job* job;
    Standing standing;
    const JobSpec* spec;  // what the queue holds of it; nullptr: held out
  };
  std::vector<Look> looks;
  looks.reserve(pending_.size());
  for (Job* j : pending_) {
    Standing standing = standing_locked(*j);
    const JobSpec* spec = standing == Standing::kEligible ? &cycle_spec_locked(*j) : nullptr;
    if (spec != nullptr) {
      const TenantId t = spec->tenant;
      if (t < caps.size() && (t < procs.size() ? procs[t] : 0) + spec->max_members > caps[t]) {
        process_held_.insert(j->row.id);
        spec = nullptr;
        standing = Standing::kTenantLimit;
      }
    }
    looks.push_back(Look{j, standing, spec});
  }
  // An array's tasks holding GPUs (running or starting; a preempted one gave its GPUs up)
  // against its throttle, then its waiting tasks let in lowest index first, wherever they are
  // in pending_ (a preempted task rejoins it at its end).
  if (!array_tasks_.empty()) {
    std::unordered_map<int64_t, int32_t> array_running;
    for (const auto& [id, jp] : active_) {
      if (jp->row.array_id != 0 && jp->row.spec.array_throttle > 0 && !jp->alloc.empty()) {
        ++array_running[jp->row.array_id];
      }
    }
    std::vector<Look*> tasks;
    for (Look& l : looks) {
      if (l.spec != nullptr && l.job->row.array_id != 0 && l.job->row.spec.array_throttle > 0) {
        tasks.push_back(&l);
      }
    }
    std::sort(tasks.begin(), tasks.end(), [](const Look* a, const Look* b) {
      return std::tie(a->job->row.array_id, a->job->row.array_index) <
             std::tie(b->job->row.array_id, b->job->row.array_index);
    });
    for (Look* l : tasks) {
      int32_t& n = array_running[l->job->row.array_id];
      if (n < l->job->row.spec.array_throttle) {
        ++n;
        continue;
      }
      array_held_.insert(l->job->row.id);
      l->spec = nullptr;
      l->standing = Standing::kArrayLimit;
    }
  }
  size_t eligible = 0;
  ++queue_passes_;
  for (const Look& look : looks) {
    Job* j = look.job;
    const auto id = static_cast<JobId>(j->row.id);
    const Standing standing = look.standing;
    const JobSpec* spec = look.spec;
    if (standing != j->standing) {
      j->standing = standing;
      restanding_.push_back(j);
    }
    if (j->queued_spec != nullptr) {  // queued as it was then (no lookup: most are unchanged)
      if (spec == j->queued_spec && j->attained == j->queued_attained &&
          j->queued_since == j->queued_at) {
        ++eligible;
        j->queue_pass = queue_passes_;
        continue;
      }
      queue.remove(id);
      j->queued_spec = nullptr;
      reasons_.erase(j->row.id);
    }
    if (spec == nullptr) continue;
    queue.add(PendingJob{id, spec, j->attained, j->queued_since, true});
    j->queued_spec = spec;
    j->queued_attained = j->attained;
    j->queued_at = j->queued_since;
    ++eligible;
    j->queue_pass = queue_passes_;
  }
  if (queue.size() == eligible) return;
  // Some left pending_ since the last pass (cancelled): out.
  std::vector<JobId> gone;
  for (const PendingJob& p : queue.jobs()) {
    const auto it = jobs_.find(static_cast<int64_t>(p.id));
    if (it == jobs_.end() || it->second->queue_pass != queue_passes_) gone.push_back(p.id);
  }
  for (const JobId id : gone) unqueue_locked(id);
}

void Service::run_cycle() {
  std::vector<RunningJob> running;
  CycleDriver::Cycle cycle;
  std::shared_ptr<const QueueTree> tree;
  std::vector<Amounts> decayed;
  std::vector<GpuReservation> reservations;
  // The power view is fixed since construction (safe to read unlocked) but for the thermal
  // headroom, which each power reading changes: with one, this cycle's copy is taken under the
  // lock.
  std::optional<PowerView> thermal_view;
  Snapshot snap;
  {
    std::lock_guard lock(mu_);
    // Decisions wait until the database can record them.
    if (!retry_writes_locked()) return;
    // Something happened that may change which jobs may start: the queue is brought up to it.
    queue_stale_ = queue_stale_ || dirty_;
    dirty_ = false;
    cancel_unmet_dependencies_locked(now());
    // Specs `tessera update` changed, swapped in now that no cycle reads them.
    for (const int64_t id : spec_updates_) {
      if (auto it = jobs_.find(id); it != jobs_.end() && it->second->next_spec) {
        unqueue_locked(id);  // its place in the queue was taken by the spec it had
        queue_stale_ = true;
        it->second->spec = std::move(*it->second->next_spec);
        it->second->next_spec.reset();
      }
    }
    spec_updates_.clear();
    apply_drains_locked();
    evict_finished_locked(now());
    if (goodput_round_due_locked(now())) {
      goodput_round_locked(now());
      queue_stale_ = true;
    }
    cycle = driver_.begin(now());
    // Nothing changed since the last cycle: the queue is as it was (a refresh passes over it
    // anyway, so that a change no event announced is not missed for longer).
    reasons_only_ = !(queue_stale_ || dirty_ || cycle.refresh || !driver_.has_queue());
    if (!reasons_only_) sync_queue_locked();
    queue_stale_ = false;
    for (const auto& [id, jp] : active_) {
      const Job& j = *jp;
      if (j.row.state != JobState::kRunning || j.alloc.empty() || j.stopping) continue;
      RunningJob r;
      r.id = static_cast<JobId>(id);
      r.spec = &j.spec;
      r.alloc = &j.alloc;
      r.start_time = j.row.started_at;
      r.attained_gpu_seconds = j.attained + run_gpu_seconds(j.row, j.alloc, cycle.now);
      if (j.spec.duration_estimate >= 0) {
        r.expected_end = std::max(cycle.now, j.row.started_at + j.spec.duration_estimate);
      }
      r.last_checkpoint = j.row.started_at;
      r.power_limit_w = j.row.power_limit_w;
      running.push_back(r);
    }
    tree = tree_;
    reservations = gpu_reservations_locked(cycle.now);
    if (opt_.thermal_limit_c > 0 && thermal_headroom_w_ >= 0) {
      thermal_view = power_view_;
      thermal_view->node_headroom_w.assign(cluster_.nodes().size(), thermal_headroom_w_);
    }
    advance_decayed_locked(cycle.now);
    const std::span<const Amounts> held = driver_.usage().decayed().view();
    decayed.assign(held.begin(), held.end());
  }
  snap.state = &state_;
  snap.decayed_usage = decayed;
  snap.running = running;
  snap.queues = tree.get();
  snap.reservations = reservations;
  if (power_policies_) snap.power = thermal_view ? &*thermal_view : &power_view_;
  // Carbon-aware deferral of best-effort jobs in queues with carbon_defer (on Unix time, as
  // the jobs' submission times and the clock).
  snap.carbon = opt_.carbon.get();
  // Unlocked: only this thread changes the ledger, allocations and the queue, and specs never
  // change.
  CycleDriver::Outcome outcome = driver_.decide(cycle, snap);
  Decisions& d = outcome.decisions;

  std::lock_guard lock(mu_);
  // A job keeps its reason until a cycle gives it another.
  for (const PendingReason& r : d.pending) {
    const bool reserved =
        r.code == PendingCode::kReservedGpus && r.reservation < reservations.size();
    reasons_.insert_or_assign(static_cast<int64_t>(r.job),
                              KeptReason{r, reserved ? reservations[r.reservation].name : ""});
  }
  driver_.settle(outcome);
  const double t = now();
  // The decisions change memory, are written, and only then acted on: victims signalled,
  // processes started. A write the database refuses undoes them, so nothing was signalled or
  // started that the database does not know of, and the next cycle decides again.
  Transaction tx(state_, active_);
  std::vector<const JobRow*> dirty;
  std::vector<Job*> to_launch, to_stop, requeued, awaiting_data;
  std::set<int64_t> started;
  uint64_t preempted = 0;
  // Starts of one cycle count together against each tenant's process limit: the snapshot
  // held out the jobs that alone would pass it, not two that together do.
  std::vector<int64_t> procs = running_members_locked();
  const std::vector<int64_t> caps = process_caps_locked();
  for (Start& s : d.starts) {
    Job& j = *jobs_.at(s.job);
    if (j.row.state != JobState::kPending) continue;  // cancelled while the cycle ran
    const TenantId tenant = j.spec.tenant;
    const int64_t members = s.alloc.members();
    if (tenant < caps.size() && procs[tenant] + members > caps[tenant]) {
      process_held_.insert(s.job);
      continue;
    }
    tx.keep(j);
    for (const Preemption& p : d.preemptions) {
      if (p.for_job != s.job) continue;
      Job& v = *jobs_.at(p.job);
      if (v.row.state != JobState::kRunning || v.stopping) continue;
      tx.keep(v);
      v.row.state = JobState::kPreempted;
      ++v.row.preemptions;
      ++preempted;
      // The victim's tenant reads this: another tenant is not named (as in the node view).
      v.row.message = "preempted by job " + std::to_string(s.job) +
                      (j.row.tenant == v.row.tenant ? " (" + j.row.tenant + ")"
                                                    : std::string(" of another tenant"));
      v.preempted_by = static_cast<int64_t>(s.job);
      v.preempted_by_tenant = j.row.tenant;
      release_locked(v);  // its GPUs pass to the preemptor, which starts once it has exited
      v.waits_for.clear();
      if (v.members.empty()) {  // never launched: straight back to the queue
        v.row.state = JobState::kPending;
        requeued.push_back(&v);
      } else {
        to_stop.push_back(&v);
        j.waits_for.push_back(p.job);
      }
      dirty.push_back(&v.row);
    }
    if (!state_.fits(s.alloc)) {
      dirty_ = true;  // decided on a stale ledger; the next cycle decides again
      continue;
    }
    state_.allocate(s.alloc);
    if (tenant < procs.size()) procs[tenant] += members;
    j.alloc = std::move(s.alloc);
    active_[s.job] = &j;
    started.insert(s.job);
    // Its power limit (set with a power view; its run draws at it from its start).
    set_power_limit_locked(j, snap.power != nullptr ? s.power_limit_w : 0.0, t,
                           start_limit_why_locked(j, s.power_limit_w));
    // A start that preempted waits, holding its GPUs, until its victims have exited; one whose
    // dataset the cache does not hold waits for it to be staged. Either is still pending (to
    // the API and in the store) until its processes start.
    if (j.waits_for.empty()) {
      if (needs_staging_locked(j)) {
        awaiting_data.push_back(&j);
      } else {
        begin_run_locked(j, t);
        dirty.push_back(&j.row);
        to_launch.push_back(&j);
      }
    }
  }
  // Running jobs' limits lowered to make room under the power cap, or raised as power freed.
  for (const PowerLimit& p : d.power_limits) {
    const auto it = jobs_.find(static_cast<int64_t>(p.job));
    if (it == jobs_.end()) continue;
    Job& j = *it->second;
    if (j.row.state != JobState::kRunning || j.stopping || j.alloc.empty()) continue;
    const double was = j.row.power_limit_w > 0 ? j.row.power_limit_w : tdp_of(j.alloc);
    if (std::abs(p.limit_w - was) < 0.5) continue;
    tx.keep(j);
    set_power_limit_locked(j, p.limit_w, t, p.limit_w < was ? "power cap" : "raised: power freed");
    dirty.push_back(&j.row);
  }
  try {
    if (!dirty.empty()) store_->update_jobs(dirty, nullptr, {}, row_events_locked(dirty, t));
  } catch (const StoreError& e) {
    note_write_failure(e);
    tx.undo();
    return;
  }
  tx.commit();
  note_write_success();
  mark_recorded_locked(dirty);
  counters_.starts += started.size();
  counters_.preemptions += preempted;
  if (!started.empty()) {
    pending_.erase_if([&](const Job* p) { return started.count(p->row.id) != 0; });
    for (const int64_t id : started) {
      unqueue_locked(id);
      reasons_.erase(id);
    }
  }
  for (Job* v : requeued) {
    v->queued_since = t;
    pending_.push_back(v);
    queue_stale_ = true;
  }
  for (Job* v : to_stop) ask_to_stop_locked(*v, t);
  apply_gpu_power_limits_locked();  // before the new jobs' processes start
  std::vector<const JobRow*> launched;
  for (Job* j : to_launch) launch_locked(*j, launched);
  for (Job* j : awaiting_data) {
    j->staging = true;
    stage_for_locked(*j, launched);
  }
  stage_ahead_locked(t);
  if (!launched.empty()) save_rows_locked(launched);
  // A reason code changes only with the engine's reason (the jobs given one this cycle) or with
  // what holds a job out of the cycle (the jobs whose standing the queue's sync found changed);
  // a refresh looks at every waiting job.
  if (cycle.refresh) {
    record_reason_changes_locked(t);
  } else {
    // (A job placed this cycle has left the waiting jobs: its placement is its news.)
    std::vector<Job*> look;
    if (!reasons_only_) {
      for (Job* j : restanding_) {
        if (started.count(j->row.id) == 0) look.push_back(j);
      }
    }
    for (const PendingReason& r : d.pending) {
      if (auto it = jobs_.find(static_cast<int64_t>(r.job)); it != jobs_.end()) {
        look.push_back(it->second.get());
      }
    }
    record_reason_changes_locked(t, &look);
  }
}

}  // namespace tessera
