// tessera::simulate() (sim/simulator.h), and the Simulation's construction and event loop:
// submissions, finishes, ticks, rounds and node events in time order, with a scheduling cycle
// after every instant that changed something (sim/simulation.h lists the other parts).
#include "sim/simulator.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <memory>
#include <stdexcept>

#include "sim/simulation.h"

namespace tessera {

namespace sim_detail {

namespace {

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

}  // namespace

Simulation::Simulation(const Workload& w, const Cluster& c, const Policy& p,
                       const ExecutionModel& m, const SimOptions& o, Workload* predicted)
    : predicted_(predicted),
      w_(w),
      c_(c),
      policy_(p),
      model_(m),
      opt_(o),
      state_(c),
      jobs_(w.jobs.size()),
      pending_(*p.order),
      tree_(tree_for(w, o, own_tree_)),
      fair_(tree_, c, w, o.series_interval, w.jobs.empty() ? 0.0 : w.jobs.front().submit_time),
      running_(c, tree_.settings(), p.order.get()) {
  result_.jobs.resize(w.jobs.size());
  result_.tenants.resize(std::max<size_t>(w.tenants.size(), 1));
  for (TenantId t = 0; t < result_.tenants.size(); ++t) {
    result_.tenants[t].gpu_seconds_by_type.assign(c.gpu_types().size(), 0.0);
    const QueueId leaf = t < w.tenants.size() ? tree_.leaf_of(t) : kNoId;
    result_.tenants[t].queue = leaf == kNoId ? "" : tree_.queue(leaf).path;
  }
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
  for (uint32_t i = 0; i < o.failures.size(); ++i) {
    events_.push(o.failures[i].time, EventKind::kNodeFail, i);
  }
  if (o.reserve_inference) reserve_ = std::make_unique<InferenceReserve>();
  if (p.goodput) {
    if (o.adaptive_profiles == nullptr || o.round_seconds <= 0) {
      throw std::invalid_argument(
          "simulate: the goodput policy needs rounds and the Pollux application profiles");
    }
    goodput_ = std::make_unique<GoodputPlanner>(*o.adaptive_profiles, w, c, o.goodput);
  }
  if (o.power != nullptr) setup_power();
  if (c.storage().present && std::any_of(w.jobs.begin(), w.jobs.end(),
                                         [](const JobSpec& s) { return s.dataset != kNoId; })) {
    data_ = std::make_unique<DataStaging>(c, o.data_eviction);
    data_wanted_.assign(w.datasets.size(), 0);
    result_.data_modelled = true;
  }
  down_.assign(c.nodes().size(), false);
  blockers_.resize(c.nodes().size());
  for (JobId j : o.explain) {
    if (j >= w.jobs.size()) throw std::invalid_argument("simulate: explain: no such job");
    if (jobs_[j].history >= 0) continue;
    jobs_[j].history = static_cast<int32_t>(result_.histories.size());
    result_.histories.push_back(JobHistory{j, {}});
  }
}

SimResult Simulation::run() {
  if (w_.jobs.empty()) return result_;
  result_.first_submit = w_.jobs.front().submit_time;
  now_ = result_.first_submit;
  if (sleeping()) {
    for (NodeId n = 0; n < c_.nodes().size(); ++n) {
      events_.push(now_ + opt_.energy.sleep_after_s, EventKind::kNodeSleep, n, 0);
    }
  }
  size_t next_submit = 0;
  if (opt_.round_seconds > 0 && !w_.jobs.empty()) {
    events_.push(w_.jobs.front().submit_time + opt_.round_seconds, EventKind::kRound);
  }
  // Until every job is done: later events (a tick, a node failure) change nothing measured.
  uint64_t steps = 0;
  while ((next_submit < w_.jobs.size() || !events_.empty()) && done_ < w_.jobs.size()) {
    if (opt_.progress && ++steps % 1024 == 0) {
      opt_.progress(Progress{static_cast<double>(done_), static_cast<double>(w_.jobs.size()),
                             fmt::format("simulated {:.1f} h, {} waiting",
                                         (now_ - result_.first_submit) / 3600, pending_.size())});
    }
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
      } else if (e.kind == EventKind::kNodeFail) {
        changed = node_fail(e.job) || changed;
      } else if (e.kind == EventKind::kNodeRecover) {
        node_recover(e.job);
        changed = true;
      } else if (e.kind == EventKind::kNodeSleep) {
        node_sleep(e.job, e.generation);
      } else if (e.kind == EventKind::kRound) {
        if (goodput_) {
          play_goodput_round();
        } else {
          play_round();
        }
        if (done_ < w_.jobs.size()) events_.push(now_ + opt_.round_seconds, EventKind::kRound);
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
    // Elastic gangs below their maximum may grow into idle GPUs, even with nothing pending.
    const bool growable = policy_.elastic && any_growable();
    // Jobs running below their preferred power limit may be raised once power frees.
    // Round-based scheduling starts jobs at round boundaries only.
    if (changed && opt_.round_seconds <= 0 &&
        (!pending_.empty() || growable || throttled_gpus_ > 1e-9)) {
      cycle();
    } else if (changed && data_ && opt_.prestage && opt_.residency) {
      prestage_waiting();  // homes are filled while nothing waits too
    }
    if (policy_.order->time_dependent() && !pending_.empty() && !running_.empty() &&
        !tick_pending_) {
      events_.push(now_ + opt_.tick_seconds, EventKind::kTick);
      tick_pending_ = true;
    }
    // Deferred best-effort jobs are looked at again when the carbon intensity changes.
    if (carbon_deferring_ && !pending_.empty()) {
      const double next = opt_.carbon->next_change(now_);
      if (next > carbon_tick_at_ && next < std::numeric_limits<double>::infinity()) {
        events_.push(next, EventKind::kTick);
        carbon_tick_at_ = next;
      }
    }
    // A gang too recently (re)started to grow is looked at again after resize_interval.
    if (growable && !tick_pending_ && any_growable()) {
      events_.push(now_ + policy_.resize_interval, EventKind::kTick);
      tick_pending_ = true;
    }
  }
  if (!pending_.empty()) {
    throw std::logic_error(fmt::format("{} jobs never started", pending_.size()));
  }
  result_.last_finish = now_;
  for (const FailureRecord& f : failure_records_) result_.failure.unrecovered += f.waiting > 0;
  result_.jain_integral = fair_.jain_integral();
  result_.jain_time = fair_.jain_time();
  result_.series = fair_.series();
  if (data_) result_.data = data_->stats();
  return result_;
}

// Integrates time-weighted metrics over [now_, t).
void Simulation::advance_to(double t) {
  fair_.advance(now_, t);
  if (t > now_) {
    if (bound_) {
      const double draw = view_.idle_w - asleep_w_ + holding_w_;
      result_.energy.it_j += draw * (t - now_);
      if (opt_.carbon != nullptr) result_.energy.it_carbon_g += opt_.carbon->grams(draw, now_, t);
      integrate_series(now_, t, draw);
      result_.energy.slept_j += asleep_w_ * (t - now_);
      result_.energy.asleep_node_seconds += asleep_nodes_ * (t - now_);
      result_.energy.peak_w = std::max(result_.energy.peak_w, draw);
      result_.energy.throttled_gpu_seconds += throttled_gpus_ * (t - now_);
    }
    now_ = t;
  }
}

}  // namespace sim_detail

SimResult simulate(const Workload& w, const Cluster& c, const Policy& policy,
                   const ExecutionModel& model, const SimOptions& opt) {
  using sim_detail::Simulation;
  if (opt.predictor == nullptr) return Simulation(w, c, policy, model, opt).run();
  Workload predicted = w;  // the predictor overwrites duration estimates as jobs arrive
  return Simulation(predicted, c, policy, model, opt, &predicted).run();
}

}  // namespace tessera
