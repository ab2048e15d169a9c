#include "sim/simulator.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "engine/admission.h"
#include "engine/cycle.h"
#include "engine/fair_share.h"
#include "sim/event_queue.h"

namespace tessera {

namespace {

// kCheckpointing: preempted, writing its checkpoint during the grace; neither pending nor
// holding GPUs.
enum class Phase : uint8_t { kFuture, kPending, kRunning, kCheckpointing, kDone };

// The tree the simulation uses: the caller's, or one equal queue per tenant.
const QueueTree& tree_for(const Workload& w, const SimOptions& o, std::unique_ptr<QueueTree>& own) {
  if (o.queues != nullptr) {
    if (o.queues->bound_tenants() < w.tenants.size()) {
      throw std::invalid_argument(
          "simulate: the queue tree is not bound to the workload's tenants");
    }
    return *o.queues;
  }
  own = std::make_unique<QueueTree>(QueueTree::flat(w.tenants));
  return *own;
}

struct JobState {
  Phase phase = Phase::kFuture;
  double remaining = 0;     // reference-seconds of work left (as of run_start)
  double speed = 1;         // progress rate of the current run
  double run_start = 0;     // when the current run started
  double restart_cost = 0;  // no progress for this long after run_start
  double attained = 0;      // GPU-seconds before the current run
  double queued_since = 0;
  uint32_t generation = 0;
  uint32_t slot = 0;  // index in running_ while running
  Allocation alloc;
  bool begun = false;  // running and past its victims' grace (holds its GPUs in the metrics)
  double reclaim_protected_until = 0;
  // While checkpointing after a preemption: what it still holds in the metrics.
  double grace_gpus = 0;
  Amounts grace_amounts = kZeroAmounts;
  // For explained jobs (SimOptions::explain): index into SimResult::histories, and the pending
  // reason last recorded, so that the history lists changes, not every cycle.
  int32_t history = -1;
  bool has_reason = false;
  PendingCode reason = PendingCode::kInsufficientGpus;
  uint32_t reason_queue = kNoId;
  JobId reason_blocker = kNoId;
};

class Simulation {
 public:
  Simulation(const Workload& w, const Cluster& c, const Policy& p, const ExecutionModel& m,
             const SimOptions& o)
      : w_(w),
        c_(c),
        policy_(p),
        model_(m),
        opt_(o),
        state_(c),
        jobs_(w.jobs.size()),
        tree_(tree_for(w, o, own_tree_)),
        fair_(tree_, c, w, o.series_interval, w.jobs.empty() ? 0.0 : w.jobs.front().submit_time) {
    result_.jobs.resize(w.jobs.size());
    result_.tenants.resize(std::max<size_t>(w.tenants.size(), 1));
    for (JobId j = 0; j < w.jobs.size(); ++j) {
      const JobSpec& s = w.jobs[j];
      if (auto why = infeasible_reason(c, s)) {
        throw std::invalid_argument(s.source + ": job " + s.name + " can never run: " + *why);
      }
      if (!(s.work_seconds > 0)) {
        throw std::invalid_argument(s.source + ": job " + s.name + " has no work (duration)");
      }
      jobs_[j].remaining = s.work_seconds;
      result_.jobs[j].submit = s.submit_time;
      if (j > 0 && s.submit_time < w.jobs[j - 1].submit_time) {
        throw std::invalid_argument("workload is not sorted by submit time");
      }
    }
    for (JobId j : o.explain) {
      if (j >= w.jobs.size()) throw std::invalid_argument("simulate: explain: no such job");
      if (jobs_[j].history >= 0) continue;
      jobs_[j].history = static_cast<int32_t>(result_.histories.size());
      result_.histories.push_back(JobHistory{j, {}});
    }
  }

  SimResult run() {
    if (w_.jobs.empty()) return result_;
    result_.first_submit = w_.jobs.front().submit_time;
    now_ = result_.first_submit;
    size_t next_submit = 0;
    while (next_submit < w_.jobs.size() || !events_.empty()) {
      double t = events_.empty() ? w_.jobs[next_submit].submit_time : events_.top().time;
      if (next_submit < w_.jobs.size()) t = std::min(t, w_.jobs[next_submit].submit_time);
      advance_to(t);
      bool changed = false;
      // Finishes first so their GPUs are free for this instant's cycle.
      while (!events_.empty() && events_.top().time <= now_) {
        const Event e = events_.pop();
        ++result_.events;
        if (e.kind == EventKind::kFinish) {
          if (jobs_[e.job].phase == Phase::kRunning && jobs_[e.job].generation == e.generation) {
            finish(e.job);
            changed = true;
          }
        } else if (e.kind == EventKind::kRequeue) {
          if (jobs_[e.job].generation == e.generation) requeue(e.job);
          changed = true;
        } else if (e.kind == EventKind::kBegin) {
          if (jobs_[e.job].phase == Phase::kRunning && jobs_[e.job].generation == e.generation) {
            begin(e.job);
          }
        } else {
          tick_pending_ = false;
          changed = true;
        }
      }
      while (next_submit < w_.jobs.size() && w_.jobs[next_submit].submit_time <= now_) {
        submit(static_cast<JobId>(next_submit++));
        ++result_.events;
        changed = true;
      }
      if (changed && !pending_.empty()) cycle();
      if (policy_.order->time_dependent() && !pending_.empty() && !running_.empty() &&
          !tick_pending_) {
        events_.push(now_ + opt_.tick_seconds, EventKind::kTick);
        tick_pending_ = true;
      }
    }
    if (!pending_.empty()) {
      throw std::logic_error(fmt::format("{} jobs never started", pending_.size()));
    }
    result_.last_finish = now_;
    result_.jain_integral = fair_.jain_integral();
    result_.jain_time = fair_.jain_time();
    result_.series = fair_.series();
    return result_;
  }

 private:
  // Integrates time-weighted metrics over [now_, t).
  void advance_to(double t) {
    fair_.advance(now_, t);
    if (t > now_) now_ = t;
  }

  void write_event(std::string_view type, JobId j) {
    if (opt_.events == nullptr) return;
    *opt_.events << fmt::format(R"({{"t":{},"type":"{}","job":"{}"}})", now_, type, w_.jobs[j].name)
                 << '\n';
  }

  // Appends to j's history when j is explained (SimOptions::explain).
  template <typename... Args>
  void note(JobId j, fmt::format_string<Args...> f, Args&&... args) {
    const int32_t h = jobs_[j].history;
    if (h < 0) return;
    result_.histories[static_cast<size_t>(h)].entries.push_back(
        HistoryEntry{now_, fmt::format(f, std::forward<Args>(args)...)});
  }

  void note_pending(const PendingReason& r) {
    JobState& js = jobs_[r.job];
    if (js.history < 0) return;
    if (js.has_reason && js.reason == r.code && js.reason_queue == r.queue &&
        js.reason_blocker == r.blocker) {
      return;  // the same rule still holds it
    }
    js.has_reason = true;
    js.reason = r.code;
    js.reason_queue = r.queue;
    js.reason_blocker = r.blocker;
    const std::string blocker = r.blocker < w_.jobs.size() ? w_.jobs[r.blocker].name : "";
    const std::string queue = r.queue < tree_.size() ? tree_.queue(r.queue).path : "";
    note(r.job, "pending ({}): {}", to_string(r.code), describe(r, blocker, queue));
  }

  void submit(JobId j) {
    JobState& js = jobs_[j];
    js.phase = Phase::kPending;
    js.queued_since = now_;
    add_pending(j);
    const JobSpec& s = w_.jobs[j];
    fair_.job_arrived(s.tenant);
    fair_.add_demand(s, amounts_of(s, s.min_members), +1);
    write_event("submit", j);
    note(j, "submitted to queue {}: {} members x {:g} GPUs, class {}",
         tree_.queue(tree_.leaf_of(s.tenant)).path,
         s.min_members == s.max_members ? std::to_string(s.min_members)
                                        : fmt::format("{}..{}", s.min_members, s.max_members),
         static_cast<double>(s.demand.gpu_milli) / kMilliPerGpu, to_string(s.priority));
  }

  // pending_ stays in arrival order (queue orders sort it in O(n) when already ordered);
  // running_ is unordered and removes by swapping with its last element.
  void add_pending(JobId j) { pending_.push_back(j); }

  void remove_from(std::vector<JobId>& v, JobId j) {
    const uint32_t slot = jobs_[j].slot;
    v[slot] = v.back();
    jobs_[v[slot]].slot = slot;
    v.pop_back();
  }

  double run_gpus(const JobState& js) const {
    return static_cast<double>(js.alloc.gpu_milli()) / kMilliPerGpu;
  }

  // Accounts the current run of j up to now: GPU time, effective time, work done.
  // Returns the reference-seconds of work done in this run.
  double account_run(JobId j) {
    JobState& js = jobs_[j];
    // A run that has not begun (waiting for its victims' grace) has held nothing yet.
    const double elapsed = std::max(0.0, now_ - js.run_start);
    const double gpus = run_gpus(js);
    const double productive = std::max(0.0, elapsed - js.restart_cost);
    JobOutcome& o = result_.jobs[j];
    o.effective_gpu_seconds += gpus * productive * std::min(1.0, js.speed);
    result_.effective_gpu_seconds += gpus * productive * std::min(1.0, js.speed);
    account_held(j, gpus * elapsed);
    js.attained += gpus * elapsed;
    return productive * js.speed;
  }

  void account_held(JobId j, double gpu_seconds) {
    result_.jobs[j].gpu_seconds += gpu_seconds;
    result_.allocated_gpu_seconds += gpu_seconds;
    result_.tenants[w_.jobs[j].tenant].gpu_seconds += gpu_seconds;
  }

  // Takes j off the ledger and the running list. Its usage as the fairness metrics see it
  // ends here too unless `keep_usage` (a victim holds its GPUs while it checkpoints).
  void stop_run(JobId j, bool keep_usage) {
    JobState& js = jobs_[j];
    const JobSpec& s = w_.jobs[j];
    state_.release(js.alloc);
    const Amounts held = amounts_of(js.alloc);
    if (js.begun && !keep_usage) fair_.add_usage(s.tenant, held, -1);
    fair_.add_demand(s, held, -1);
    remove_from(running_, j);
    js.alloc = Allocation{};
    js.generation++;
  }

  void finish(JobId j) {
    account_run(j);
    stop_run(j, false);
    jobs_[j].phase = Phase::kDone;
    jobs_[j].remaining = 0;
    result_.jobs[j].finish = now_;
    fair_.job_done(w_.jobs[j].tenant);
    write_event("finish", j);
    note(j, "finished");
  }

  // The victim stops now and loses what its checkpoints do not cover. Its GPUs go to the job
  // that preempted it at once on the ledger (so no other job takes them), but the victim holds
  // them for the checkpoint grace in the metrics (allocation, fair shares), and the other job
  // begins only then.
  void preempt(JobId j, JobId for_job) {
    JobState& js = jobs_[j];
    const JobSpec& s = w_.jobs[j];
    const double done = account_run(j);
    double kept = done;
    if (s.checkpoint_interval > 0) {
      // Only work up to the last periodic checkpoint survives.
      const double productive = std::max(0.0, now_ - js.run_start - js.restart_cost);
      kept = std::floor(productive / s.checkpoint_interval) * s.checkpoint_interval * js.speed;
    }
    js.remaining = std::max(0.0, js.remaining - kept);
    result_.jobs[j].lost_work_seconds += done - kept;
    if (js.speed > 0) result_.jobs[j].lost_gpu_seconds += (done - kept) / js.speed * run_gpus(js);
    result_.jobs[j].preemptions++;
    result_.preemptions++;
    const bool was_begun = js.begun;
    js.grace_gpus = was_begun ? run_gpus(js) : 0.0;
    js.grace_amounts = was_begun ? amounts_of(js.alloc) : kZeroAmounts;
    stop_run(j, /*keep_usage=*/true);
    fair_.add_demand(s, amounts_of(s, s.min_members), +1);  // it wants to run again
    // The event log shows the GPUs released now, when the ledger releases them, so that no
    // reader sees them over-committed whatever happens during the grace.
    if (was_begun) write_event("preempt", j);
    note(j, "preempted for {} (queue {}): checkpointing for {:g} s, {:g} GPU-hours of work lost",
         w_.jobs[for_job].name, tree_.queue(tree_.leaf_of(w_.jobs[for_job].tenant)).path,
         opt_.checkpoint_grace,
         (js.speed > 0 ? (done - kept) / js.speed * js.grace_gpus : 0.0) / 3600.0);
    js.phase = Phase::kCheckpointing;
    if (opt_.checkpoint_grace > 0) {
      events_.push(now_ + opt_.checkpoint_grace, EventKind::kRequeue, j, js.generation);
    } else {
      requeue(j);
    }
  }

  // The victim's checkpoint is written: it lets go of its GPUs and waits again.
  void requeue(JobId j) {
    JobState& js = jobs_[j];
    if (js.phase != Phase::kCheckpointing) return;
    if (js.begun) {
      account_held(j, js.grace_gpus * opt_.checkpoint_grace);
      fair_.add_usage(w_.jobs[j].tenant, js.grace_amounts, -1);
    }
    js.begun = false;
    js.phase = Phase::kPending;
    js.queued_since = now_;
    add_pending(j);
    js.has_reason = false;
    note(j, "checkpoint written; waiting again");
  }

  // Puts j on the ledger now. It begins (holds the GPUs in the metrics and the event log, and
  // starts its restart) after `delay`: the checkpoint grace of the jobs it preempted.
  void start(JobId j, Allocation alloc, double delay) {
    JobState& js = jobs_[j];
    const JobSpec& s = w_.jobs[j];
    state_.allocate(alloc);
    fair_.add_demand(s, amounts_of(s, s.min_members), -1);
    fair_.add_demand(s, amounts_of(alloc), +1);
    js.alloc = std::move(alloc);
    js.phase = Phase::kRunning;
    js.begun = false;
    js.run_start = now_ + delay;
    js.restart_cost = s.restart_cost;
    js.speed = model_.speed(s, w_, shape_of(c_, js.alloc), c_);
    if (!(js.speed > 0)) throw std::logic_error("execution model gave speed <= 0 for " + s.name);
    js.slot = static_cast<uint32_t>(running_.size());
    running_.push_back(j);
    events_.push(js.run_start + js.restart_cost + js.remaining / js.speed, EventKind::kFinish, j,
                 js.generation);
    if (delay > 0) {
      events_.push(js.run_start, EventKind::kBegin, j, js.generation);
    } else {
      begin(j);
    }
  }

  void begin(JobId j) {
    JobState& js = jobs_[j];
    const JobSpec& s = w_.jobs[j];
    js.begun = true;
    fair_.add_usage(s.tenant, amounts_of(js.alloc), +1);
    JobOutcome& o = result_.jobs[j];
    if (o.first_start < 0) o.first_start = now_;
    if (opt_.events != nullptr) {
      std::string gpus;
      for (const GpuShare& sh : js.alloc.shares) {
        const NodeId n = c_.node_of_gpu(sh.gpu);
        if (!gpus.empty()) gpus += ',';
        gpus +=
            fmt::format(R"("{}/{}:{}")", c_.node(n).name, sh.gpu - c_.node(n).first_gpu, sh.milli);
      }
      *opt_.events << fmt::format(R"({{"t":{},"type":"start","job":"{}","gpus":[{}]}})", now_,
                                  s.name, gpus)
                   << '\n';
    }
  }

  // "2 x node-3 (4 GPUs each)" style summary of where a gang sits.
  std::string describe_placement(const Allocation& a) const {
    std::string out;
    size_t i = 0;
    while (i < a.member_node.size()) {
      size_t k = i;
      while (k < a.member_node.size() && a.member_node[k] == a.member_node[i]) ++k;
      if (!out.empty()) out += ", ";
      out += fmt::format("{}{}", k - i > 1 ? fmt::format("{} x ", k - i) : "",
                         c_.node(a.member_node[i]).name);
      i = k;
    }
    int64_t per_member = 0;
    for (int32_t g = 0; g < a.gpus_per_member && g < static_cast<int32_t>(a.shares.size()); ++g) {
      per_member += a.shares[static_cast<size_t>(g)].milli;
    }
    return fmt::format("{} ({:g} GPUs per member)", out,
                       static_cast<double>(per_member) / kMilliPerGpu);
  }

  void cycle() {
    ++result_.cycles;
    snap_pending_.clear();
    for (JobId j : pending_) {
      snap_pending_.push_back(PendingJob{j, &w_.jobs[j], jobs_[j].attained, jobs_[j].queued_since});
    }
    snap_running_.clear();
    for (JobId j : running_) {
      const JobState& js = jobs_[j];
      const JobSpec& s = w_.jobs[j];
      RunningJob r;
      r.id = j;
      r.spec = &s;
      r.alloc = &js.alloc;
      r.start_time = js.run_start;
      r.attained_gpu_seconds = js.attained + run_gpus(js) * std::max(0.0, now_ - js.run_start);
      // What the scheduler may believe: the estimate, scaled by the work already done.
      if (s.duration_estimate >= 0) {
        const double frac_left = js.remaining / s.work_seconds;
        r.expected_end = js.run_start + js.restart_cost + s.duration_estimate * frac_left;
      }
      r.last_checkpoint = js.run_start;
      r.reclaim_protected_until = js.reclaim_protected_until;
      snap_running_.push_back(r);
    }
    Snapshot snap;
    snap.now = now_;
    snap.cycle = result_.cycles;
    snap.state = &state_;
    snap.pending = snap_pending_;
    snap.running = snap_running_;
    snap.queues = &tree_;
    snap.decayed_usage = fair_.decayed_usage();
    Decisions d = schedule_cycle(snap, policy_);
    for (const PendingReason& r : d.pending) {
      JobOutcome& o = result_.jobs[r.job];
      if (!o.has_first_reason) {
        o.has_first_reason = true;
        o.first_reason = r.code;
      }
      note_pending(r);
    }
    preemptors_.clear();
    for (const Preemption& p : d.preemptions) {
      preempt(p.job, p.for_job);
      preemptors_.push_back(p.for_job);
    }
    for (Start& s : d.starts) {
      const bool waits =
          std::find(preemptors_.begin(), preemptors_.end(), s.job) != preemptors_.end();
      jobs_[s.job].reclaim_protected_until =
          s.starving ? now_ + tree_.settings().min_runtime_seconds : 0.0;
      if (jobs_[s.job].history >= 0) {
        note(s.job, "placed on {}{}{}", describe_placement(s.alloc),
             waits ? fmt::format(" by preemption; begins after the {:g} s checkpoint grace",
                                 opt_.checkpoint_grace)
                   : "",
             s.backfilled ? " (backfilled ahead of a reservation)" : "");
        jobs_[s.job].has_reason = false;
      }
      start(s.job, std::move(s.alloc), waits ? opt_.checkpoint_grace : 0.0);
    }
    // One pass drops every job that started (keeping the rest in arrival order).
    if (!d.starts.empty()) {
      std::erase_if(pending_, [&](JobId j) { return jobs_[j].phase != Phase::kPending; });
    }
  }

  const Workload& w_;
  const Cluster& c_;
  const Policy& policy_;
  const ExecutionModel& model_;
  const SimOptions& opt_;
  ClusterState state_;
  std::vector<JobState> jobs_;
  std::vector<JobId> pending_, running_;
  std::vector<PendingJob> snap_pending_;
  std::vector<RunningJob> snap_running_;
  std::vector<JobId> preemptors_;  // jobs that preempted others in this cycle
  std::unique_ptr<QueueTree> own_tree_;
  const QueueTree& tree_;
  FairnessTracker fair_;
  EventQueue events_;
  bool tick_pending_ = false;
  double now_ = 0;
  SimResult result_;
};

}  // namespace

SimResult simulate(const Workload& w, const Cluster& c, const Policy& policy,
                   const ExecutionModel& model, const SimOptions& opt) {
  return Simulation(w, c, policy, model, opt).run();
}

}  // namespace tessera
