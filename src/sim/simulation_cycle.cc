// A scheduling cycle in the simulation (sim/simulation.h): the snapshot the engine schedules
// from, and its decisions applied (preemptions, elastic resizes, starts, power limits); the
// elastic resize itself, also used by goodput rounds.
#include "sim/simulation.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace tessera::sim_detail {

// A running job as the engine sees it, from its state: set when its run starts and whenever
// the run changes (resize, rerate), not rebuilt every cycle (attained_at accrues its service).
RunningJob Simulation::running_entry(JobId j) const {
  const JobState& js = jobs_[j];
  const JobSpec& s = w_.jobs[j];
  RunningJob r;
  r.id = j;
  r.spec = &s;
  r.alloc = &js.alloc;
  r.start_time = js.run_start;
  r.attained_gpu_seconds = js.attained;
  r.attaining_gpus = run_gpus(js);
  // What the scheduler may believe: the estimate, scaled by the work already done.
  if (s.duration_estimate >= 0) {
    const double frac_left = js.remaining / s.work_seconds;
    r.expected_end = js.run_start + js.restart_cost + s.duration_estimate * frac_left;
  }
  r.last_checkpoint = js.run_start;
  r.reclaim_protected_until = js.reclaim_protected_until;
  // Stopped now, it would checkpoint for the grace, then restart: its own restart cost and the
  // restart model's re-initialisation and checkpoint read.
  r.preemption_seconds = opt_.checkpoint_grace + s.restart_cost +
                         opt_.restart.seconds(s, static_cast<int>(js.alloc.nodes().size()));
  r.power_limit_w = js.limit_w;
  return r;
}

void Simulation::cycle() {
  ++result_.cycles;
  // A job that outlived its predicted duration (SimOptions::predictor) is expected to run as
  // long again as it has run (durations are heavy-tailed), not to end now: with a predictor,
  // the expected ends move with the clock.
  auto overdue = [&](RunningJob& r) {
    if (opt_.predictor != nullptr && r.spec->duration_estimate >= 0 && r.expected_end < now_) {
      r.expected_end = now_ + (now_ - r.start_time);
      return true;
    }
    return false;
  };
  Snapshot snap;
  if (opt_.full_cycles) {
    // The reference the incremental cycle is tested against: every running job anew, its
    // service as of now, the shares summed over them.
    snap_running_.clear();
    for (const RunningJob& kept : running_.jobs()) {
      RunningJob r = running_entry(kept.id);
      r.attained_gpu_seconds = r.attained_at(now_);
      r.attaining_gpus = 0;
      overdue(r);
      snap_running_.push_back(r);
    }
    snap.running = snap_running_;
  } else {
    if (opt_.predictor != nullptr) {
      for (const RunningJob& kept : running_.jobs()) {
        RunningJob r = running_entry(kept.id);
        if (overdue(r) || r.expected_end != kept.expected_end) running_.update(r);
      }
    }
    snap.running = running_.jobs();
    snap.running_set = &running_;
    snap.pending_queue = &pending_;
    snap.scratch = &state_;
  }
  snap.now = now_;
  snap.cycle = result_.cycles;
  snap.state = &state_;
  snap.pending = pending_.jobs();
  snap.queues = &tree_;
  snap.decayed_usage = fair_.decayed_usage();
  snap.inference_reserve_milli = reserve_ ? reserve_->reserve_milli(now_) : 0;
  snap.carbon = opt_.carbon;
  if (power_policies_) snap.power = &view_;
  if (data_ && opt_.data_locality) prefer_data_nodes(snap);
  Decisions d = schedule_cycle(snap, policy_);
  // A job waiting for its data's nodes is looked at again when its locality wait is over.
  double recheck = std::numeric_limits<double>::infinity();
  for (const PendingReason& r : d.pending) {
    if (r.code == PendingCode::kDataLocality) {
      recheck = std::min(recheck, jobs_[r.job].queued_since + opt_.locality_wait);
    }
  }
  if (recheck > now_ && recheck < std::numeric_limits<double>::infinity()) {
    events_.push(recheck, EventKind::kTick);
  }
  for (const PendingReason& r : d.pending) {
    JobOutcome& o = result_.jobs[r.job];
    if (!o.has_first_reason) {
      o.has_first_reason = true;
      o.first_reason = r.code;
      if (jobs_[r.job].history < 0) pending_.set_wants_reason(r.job, false);
    }
    note_pending(r);
  }
  preemptors_.clear();
  for (const Preemption& p : d.preemptions) {
    preempt(p.job, p.for_job, p.cause, describe_price(p));
    preemptors_.push_back(p.for_job);
  }
  for (Resize& r : d.resizes) {
    if (!r.grow) resize(r);
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
    start(s.job, std::move(s.alloc), waits ? opt_.checkpoint_grace : 0.0, s.power_limit_w);
  }
  for (Resize& r : d.resizes) {
    if (r.grow) resize(r);
  }
  for (const PowerLimit& p : d.power_limits) set_limit(p.job, p.limit_w);
  for (const Start& s : d.starts) pending_.remove(s.job);
  if (data_ && opt_.prestage) prestage_waiting();
}

// Whether a running elastic gang is below its maximum (only asked with policy.elastic).
bool Simulation::any_growable() const {
  for (const RunningJob& r : running_.jobs()) {
    if (r.alloc->members() < r.spec->max_members) return true;
  }
  return false;
}

// An elastic gang changes size: it checkpoints on request (nothing is lost), its old members
// stop and the new set restarts, paying the restart cost, at the speed of its new shape.
// The event log shows the old GPUs released ("evict") and the new ones held ("start").
// `released`: its old GPUs are already off the ledger (a goodput round released them to
// place it anew).
void Simulation::resize(Resize& r, bool released) {
  const JobId j = r.job;
  JobState& js = jobs_[j];
  const JobSpec& s = w_.jobs[j];
  const int32_t had = js.alloc.members();
  js.remaining = std::max(0.0, js.remaining - account_run(j));
  set_drawing(j, false);
  if (js.begun) fair_.add_usage(s.tenant, fair_.held(s, js.alloc), -1);
  fair_.add_demand(s, fair_.held(s, js.alloc), -1);
  if (!released) state_.release(js.alloc);
  write_event("evict", j);
  state_.allocate(r.alloc);
  wake_nodes(r.alloc);  // grown members on a sleeping node: woken, without a boot delay
  nodes_released(js.alloc);
  fair_.add_demand(s, fair_.held(s, r.alloc), +1);
  js.alloc = std::move(r.alloc);
  js.generation++;
  js.run_start = now_;
  js.restart_cost = s.restart_cost;
  js.restart_overhead = 0;  // a resize, not a restart after a preemption
  price_power(j);
  js.speed = run_speed(j) * js.power_speed * js.data_speed;
  if (!(js.speed > 0)) throw std::logic_error("execution model gave speed <= 0 for " + s.name);
  events_.push(js.run_start + js.restart_cost + js.remaining / js.speed, EventKind::kFinish, j,
               js.generation);
  running_.update(running_entry(j));
  result_.resizes++;
  if (js.history >= 0) {
    note(j, "{} from {} to {} members{}", r.grow ? "grown" : "shrunk", had, js.alloc.members(),
         r.for_job < w_.jobs.size() ? " to make room for " + w_.jobs[r.for_job].name : "");
  }
  begin(j);
}

}  // namespace tessera::sim_detail
