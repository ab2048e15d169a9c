// A job's life in the simulation (sim/simulation.h): its submission and the prediction of its
// duration, its start and begin, its finish, its preemption and requeue after the checkpoint
// grace, and the accounting of each run (GPU time, effective time, work done).
#include "sim/simulation.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace tessera::sim_detail {

// SimOptions::predictor: the job's estimate is what the jobs finished so far predict.
void Simulation::predict_duration(JobId j) {
  if (opt_.predictor == nullptr || predicted_ == nullptr) return;
  if (features_.empty()) features_.resize(w_.jobs.size());
  JobSpec& s = predicted_->jobs[j];
  features_[j] = encoder_.encode(s);
  if (opt_.keep_trace_estimates && s.duration_estimate >= 0) return;
  s.duration_estimate = opt_.predictor->predict(features_[j]).point;
}

void Simulation::submit(JobId j) {
  predict_duration(j);
  JobState& js = jobs_[j];
  js.phase = Phase::kPending;
  js.queued_since = now_;
  add_pending(j);
  want_data(j, +1);
  const JobSpec& s = w_.jobs[j];
  fair_.job_arrived(s.tenant);
  fair_.add_demand(s, amounts_of(s, s.min_members), +1);
  write_event("submit", j);
  if (reserve_ && s.priority == PriorityClass::kInferenceCritical) reserve_->arrived(now_);
  // A best-effort job its queue lets wait for cleaner hours is looked at again when its wait
  // is over (cycles at the series' change points are scheduled after each cycle).
  if (opt_.carbon != nullptr && s.priority == PriorityClass::kBestEffort) {
    const QueueId leaf = tree_.leaf_of(s.tenant);
    const double bound = leaf == kNoId ? kUnknown : tree_.queue(leaf).carbon_defer_seconds;
    if (bound > 0) {
      events_.push(s.submit_time + bound, EventKind::kTick);
      carbon_deferring_ = true;
    }
  }
  if (js.history >= 0) {  // the arguments build strings: only for explained jobs
    note(j, "submitted to queue {}: {} members x {:g} GPUs, class {}",
         tree_.queue(tree_.leaf_of(s.tenant)).path,
         s.min_members == s.max_members ? std::to_string(s.min_members)
                                        : fmt::format("{}..{}", s.min_members, s.max_members),
         static_cast<double>(s.demand.gpus) * s.demand.gpu_milli / kMilliPerGpu,
         to_string(s.priority));
  }
}

// A job waits: in pending_, ordered for the policy, as of now (its spec, attained service
// and queued_since do not change while it waits). Its reason is wanted until one is
// recorded (JobOutcome::first_reason), and always for an explained job.
void Simulation::add_pending(JobId j) {
  const JobState& js = jobs_[j];
  pending_.add(PendingJob{j, &w_.jobs[j], js.attained, js.queued_since,
                          !result_.jobs[j].has_first_reason || js.history >= 0});
}

// Accounts the current run of j up to now: GPU time, effective time, work done.
// Returns the reference-seconds of work done in this run.
double Simulation::account_run(JobId j) {
  JobState& js = jobs_[j];
  // A run that has not begun (waiting for its victims' grace) has held nothing yet.
  const double elapsed = std::max(0.0, now_ - js.run_start);
  const double gpus = run_gpus(js);
  const double productive = std::max(0.0, elapsed - js.restart_cost);
  JobOutcome& o = result_.jobs[j];
  // The part of a restart after a preemption spent on this run: preemption's cost.
  const double restarting = std::min(elapsed, js.restart_overhead);
  o.restart_gpu_seconds += gpus * restarting;
  js.restart_overhead -= restarting;
  // The progress rate per GPU held, relative to the reference placement's: a gang below its
  // full size progresses slower as a job but not per GPU.
  const JobSpec& s = w_.jobs[j];
  const double full = static_cast<double>(s.gpu_milli_per_gang(s.max_members)) / kMilliPerGpu;
  const double per_gpu = gpus > 0 && full > 0 ? js.speed * full / gpus : js.speed;
  o.effective_gpu_seconds += gpus * productive * std::min(1.0, per_gpu);
  result_.effective_gpu_seconds += gpus * productive * std::min(1.0, per_gpu);
  account_held(j, gpus * elapsed, js.alloc, elapsed);
  account_energy(
      j, js.draw_w * elapsed,
      opt_.carbon != nullptr ? opt_.carbon->grams(js.draw_w, now_ - elapsed, now_) : 0.0);
  js.attained += gpus * elapsed;
  js.ran += productive;
  // An adaptive job's training moves on by what it did on this run (its remaining seconds are
  // recomputed from its progress whenever it restarts).
  if (goodput_ && goodput_->adaptive(j)) goodput_->trained(j, shape_of(c_, js.alloc), productive);
  return productive * js.speed;
}

// `gpu_seconds` of `alloc` held for `seconds`: the job's, the cluster's and its tenant's
// (by GPU type and with the CPU held, for accounting).
void Simulation::account_held(JobId j, double gpu_seconds, const Allocation& alloc,
                              double seconds) {
  result_.jobs[j].gpu_seconds += gpu_seconds;
  result_.allocated_gpu_seconds += gpu_seconds;
  TenantSeries& ts = result_.tenants[w_.jobs[j].tenant];
  ts.gpu_seconds += gpu_seconds;
  const size_t gpm = static_cast<size_t>(alloc.gpus_per_member);
  for (size_t m = 0; m < alloc.member_node.size(); ++m) {
    int64_t milli = 0;
    for (size_t k = 0; k < gpm; ++k) milli += alloc.shares[m * gpm + k].milli;
    ts.gpu_seconds_by_type[c_.node(alloc.member_node[m]).gpu_type] +=
        static_cast<double>(milli) / kMilliPerGpu * seconds;
  }
  ts.cpu_seconds += static_cast<double>(w_.jobs[j].demand.cpu_milli) / 1000.0 *
                    static_cast<double>(alloc.members()) * seconds;
}

// Takes j off the ledger and the running list. Its usage as the fairness metrics see it
// ends here too unless `keep_usage` (a victim holds its GPUs while it checkpoints).
void Simulation::stop_run(JobId j, bool keep_usage) {
  JobState& js = jobs_[j];
  const JobSpec& s = w_.jobs[j];
  state_.release(js.alloc);
  release_data(j);
  leave_stream(j);
  const Amounts held = fair_.held(s, js.alloc);
  if (js.begun && !keep_usage) fair_.add_usage(s.tenant, held, -1);
  // A victim's GPUs go back to idle draw at once: writing a checkpoint is not GPU work, and
  // the ledger hands its GPUs on now (a job starting on them in this cycle draws from now).
  set_drawing(j, false);
  fair_.add_demand(s, held, -1);
  running_.remove(j);
  nodes_released(js.alloc);
  js.alloc = Allocation{};
  js.generation++;
}

void Simulation::finish(JobId j) {
  account_run(j);
  stop_run(j, false);
  want_data(j, -1);
  jobs_[j].phase = Phase::kDone;
  ++done_;
  if (reserve_ && w_.jobs[j].priority == PriorityClass::kInferenceCritical) {
    reserve_->finished(result_.jobs[j].gpu_seconds);
  }
  jobs_[j].remaining = 0;
  result_.jobs[j].finish = now_;
  if (opt_.predictor != nullptr && !features_.empty()) {
    opt_.predictor->observe(features_[j], jobs_[j].ran);
  }
  fair_.job_done(w_.jobs[j].tenant);
  write_event("finish", j);
  note(j, "finished");
}

// The victim stops now and loses what its checkpoints do not cover. Its GPUs go to the job
// that preempted it at once on the ledger (so no other job takes them), but the victim holds
// them for the checkpoint grace in the metrics (allocation, fair shares), and the other job
// begins only then.
void Simulation::preempt(JobId j, JobId for_job, PreemptionCause cause, const std::string& why) {
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
  result_.preemption_times.push_back(now_);
  const bool was_begun = js.begun;
  js.grace_gpus = was_begun ? run_gpus(js) : 0.0;
  ++result_.preemptions_by_cause[static_cast<size_t>(cause)];
  result_.preemption_grace_gpu_seconds += js.grace_gpus * opt_.checkpoint_grace;
  result_.jobs[j].grace_gpu_seconds += js.grace_gpus * opt_.checkpoint_grace;
  js.preempted = true;
  js.grace_amounts = was_begun ? fair_.held(w_.jobs[j], js.alloc) : kZeroAmounts;
  js.grace_alloc = was_begun ? js.alloc : Allocation{};
  if (for_job != j) ++result_.tenants[w_.jobs[for_job].tenant].preemptor;
  stop_run(j, /*keep_usage=*/true);
  fair_.add_demand(s, amounts_of(s, s.min_members), +1);  // it wants to run again
  // The event log shows the GPUs released now, when the ledger releases them, so that no
  // reader sees them over-committed whatever happens during the grace.
  if (was_begun) write_event("preempt", j);
  const double lost_h = (js.speed > 0 ? (done - kept) / js.speed * js.grace_gpus : 0.0) / 3600.0;
  if (cause == PreemptionCause::kRound) {
    note(j, "{} by the round's plan: checkpointing for {:g} s, {:g} GPU-hours of work lost",
         js.planned == kNoGpuType ? "suspended" : "moved to another GPU type",
         opt_.checkpoint_grace, lost_h);
  } else {
    note(j, "preempted for {} (queue {}): checkpointing for {:g} s, {:g} GPU-hours of work lost{}",
         w_.jobs[for_job].name, tree_.queue(tree_.leaf_of(w_.jobs[for_job].tenant)).path,
         opt_.checkpoint_grace, lost_h, why.empty() ? why : "; " + why);
  }
  js.phase = Phase::kCheckpointing;
  if (opt_.checkpoint_grace > 0) {
    events_.push(now_ + opt_.checkpoint_grace, EventKind::kRequeue, j, js.generation);
  } else {
    requeue(j);
  }
}

// The victim's checkpoint is written: it lets go of its GPUs and waits again.
void Simulation::requeue(JobId j) {
  JobState& js = jobs_[j];
  if (js.phase != Phase::kCheckpointing) return;
  if (js.begun) {
    account_held(j, js.grace_gpus * opt_.checkpoint_grace, js.grace_alloc, opt_.checkpoint_grace);
    // No energy of its own: its GPUs drew nothing above idle for it (stop_run), and their
    // idle draw is the cluster's (it may already be another job's).
    js.grace_alloc = Allocation{};
    fair_.add_usage(w_.jobs[j].tenant, js.grace_amounts, -1);
  }
  set_drawing(j, false);
  js.begun = false;
  js.phase = Phase::kPending;
  js.queued_since = now_;
  js.has_reason = false;
  note(j, "checkpoint written; waiting again");
  // Round-based: a job this round's plan moved to another type restarts there now.
  if (opt_.round_seconds > 0 && js.planned != kNoGpuType) {
    Rng rng(mix_seed(policy_.seed, result_.rounds * 65599 + j));
    if (start_on_planned_type(j, rng, 0.0)) return;
  }
  add_pending(j);
}

// Puts j on the ledger now. It begins (holds the GPUs in the metrics and the event log, and
// starts its restart) after `delay`: the checkpoint grace of the jobs it preempted.
void Simulation::start(JobId j, Allocation alloc, double delay, double limit_w) {
  JobState& js = jobs_[j];
  const JobSpec& s = w_.jobs[j];
  state_.allocate(alloc);
  if (wake_nodes(alloc) && opt_.energy.wake_s > delay) {
    result_.energy.wake_wait_seconds += opt_.energy.wake_s - delay;
    delay = opt_.energy.wake_s;
  }
  fair_.add_demand(s, amounts_of(s, s.min_members), -1);
  fair_.add_demand(s, fair_.held(s, alloc), +1);
  js.alloc = std::move(alloc);
  js.phase = Phase::kRunning;
  js.begun = false;
  js.run_start = now_ + delay;
  js.restart_cost = s.restart_cost;
  // Its dataset reaches its nodes first (GPUs held, no progress), or is streamed.
  if (data_ && s.dataset != kNoId) js.restart_cost += stage_data(j, delay);
  // A restart after a preemption re-initialises and reads its checkpoint back: all of its
  // restart is preemption's cost.
  js.restart_overhead = 0;
  if (js.preempted) {
    js.restart_cost += opt_.restart.seconds(s, static_cast<int>(js.alloc.nodes().size()));
    js.restart_overhead = js.restart_cost;
    js.preempted = false;
  }
  js.limit_w = limit_w;
  price_power(j);
  js.data_speed = data_ && s.dataset != kNoId ? join_stream(j) : 1.0;
  js.speed = run_speed(j) * js.power_speed * js.data_speed;
  if (!(js.speed > 0)) throw std::logic_error("execution model gave speed <= 0 for " + s.name);
  running_.add(running_entry(j));
  events_.push(js.run_start + js.restart_cost + js.remaining / js.speed, EventKind::kFinish, j,
               js.generation);
  if (delay > 0) {
    events_.push(js.run_start, EventKind::kBegin, j, js.generation);
  } else {
    begin(j);
  }
}

void Simulation::begin(JobId j) {
  JobState& js = jobs_[j];
  const JobSpec& s = w_.jobs[j];
  js.begun = true;
  set_drawing(j, true);
  if (js.recovering >= 0) {
    FailureRecord& f = failure_records_[static_cast<size_t>(js.recovering)];
    if (--f.waiting == 0) result_.failure.frt.push_back(now_ - f.time);
    js.recovering = -1;
    // The recovery policy's reward: minus 10-minute steps until it ran again, minus a fifth
    // per rack more than it spanned before (its all-reduce crosses slower links).
    if (auto it = recovery_choice_.find(j); it != recovery_choice_.end()) {
      const RecoveryChoice& rc = it->second;
      const double more = std::max(
          0.0, static_cast<double>(racks_of(js.alloc)) - static_cast<double>(rc.racks_before));
      opt_.recovery->learn(rc.state, rc.action, -(now_ - rc.time) / 600.0 - 0.2 * more);
      recovery_choice_.erase(it);
    }
  }
  fair_.add_usage(s.tenant, fair_.held(s, js.alloc), +1);
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
    // Under power policies, the power limit it starts at (a later change is not logged).
    const std::string limit =
        power_policies_ && js.limit_w > 0 ? fmt::format(R"(,"power_limit_w":{})", js.limit_w) : "";
    *opt_.events << fmt::format(R"({{"t":{},"type":"start","job":"{}","gpus":[{}]{}}})", now_,
                                s.name, gpus, limit)
                 << '\n';
  }
}

}  // namespace tessera::sim_detail
