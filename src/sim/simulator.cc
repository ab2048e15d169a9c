#include "sim/simulator.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <span>
#include <stdexcept>
#include <unordered_map>

#include "engine/admission.h"
#include "engine/cycle.h"
#include "engine/fair_share.h"
#include "engine/pending_queue.h"
#include "engine/rng.h"
#include "insight/runtime_predictor.h"
#include "sim/event_queue.h"
#include "sim/gavel_rounds.h"
#include "sim/goodput_rounds.h"
#include "sim/inference_reserve.h"

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
  double ran = 0;           // productive seconds over all runs (what a predictor observes)
  double queued_since = 0;
  uint32_t generation = 0;
  uint32_t slot = 0;  // index in running_ while running
  Allocation alloc;
  bool begun = false;  // running and past its victims' grace (holds its GPUs in the metrics)
  double reclaim_protected_until = 0;
  // While checkpointing after a preemption: what it still holds in the metrics.
  double grace_gpus = 0;
  Amounts grace_amounts = kZeroAmounts;
  Allocation grace_alloc;  // where, for accounting by GPU type
  // Power (SimOptions::power): its GPU power limit (0: TDP), the speed factor that limit
  // gives, its GPUs' draw (W, whole) and the part above idle the cluster's draw counts while it
  // holds them (also through a checkpoint grace).
  double limit_w = 0;
  double power_speed = 1;
  double draw_w = 0;
  double inc_w = 0;
  bool drawing = false;
  // For explained jobs (SimOptions::explain): index into SimResult::histories, and the pending
  // reason last recorded, so that the history lists changes, not every cycle.
  int32_t history = -1;
  // Restarting after a node failure: the index of that failure's record, else -1.
  int32_t recovering = -1;
  bool has_reason = false;
  PendingCode reason = PendingCode::kInsufficientGpus;
  uint32_t reason_queue = kNoId;
  JobId reason_blocker = kNoId;
  // Round-based scheduling: rounds it has wanted to run in, rounds it ran on each GPU type, and
  // the type this round's plan gives it (kNoGpuType: none).
  double rounds = 0;
  std::vector<double> rounds_on;
  GpuTypeId planned = kNoGpuType;
};

class Simulation {
 public:
  // `predicted` is `w` itself (a copy the caller owns) when o.predictor is set: the
  // simulation writes each job's predicted duration_estimate into it at submission.
  Simulation(const Workload& w, const Cluster& c, const Policy& p, const ExecutionModel& m,
             const SimOptions& o, Workload* predicted = nullptr)
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
        fair_(tree_, c, w, o.series_interval, w.jobs.empty() ? 0.0 : w.jobs.front().submit_time) {
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
    down_.assign(c.nodes().size(), false);
    blockers_.resize(c.nodes().size());
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
    return result_;
  }

 private:
  // Integrates time-weighted metrics over [now_, t).
  void advance_to(double t) {
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

  // ---- power and energy (docs/energy.md) ----

  // Adds [from, to) at the current draws to the energy series' buckets.
  void integrate_series(double from, double to, double draw) {
    EnergyStats& e = result_.energy;
    const double dt = e.series_interval;
    while (from < to) {
      const auto b = static_cast<size_t>((from - result_.first_submit) / dt);
      const double end = std::min(to, result_.first_submit + static_cast<double>(b + 1) * dt);
      if (e.it_series_j.size() <= b) {
        e.it_series_j.resize(b + 1, 0.0);
        e.busy_series_j.resize(b + 1, 0.0);
        e.slept_series_j.resize(b + 1, 0.0);
      }
      e.it_series_j[b] += draw * (end - from);
      e.busy_series_j[b] += busy_w_ * (end - from);
      e.slept_series_j[b] += asleep_w_ * (end - from);
      from = end > from ? end : to;
    }
  }

  void setup_power() {
    std::vector<std::string> models;
    for (uint32_t m = 0; m < w_.models.size(); ++m) models.push_back(w_.models.name(m));
    bound_.emplace(*opt_.power, c_.gpu_types(), models);
    view_.model = &*bound_;
    view_.cap_w = opt_.energy.cap_w;
    view_.default_energy_weight = opt_.energy.energy_weight;
    view_.node_headroom_w = opt_.energy.node_headroom_w;
    if (!view_.node_headroom_w.empty()) view_.node_headroom_w.resize(c_.nodes().size(), -1.0);
    const size_t racks = c_.racks().size();
    view_.rack_idle_w.assign(racks, 0.0);
    for (const Node& n : c_.nodes()) {
      const double idle = opt_.energy.node_base_w + n.num_gpus * bound_->spec(n.gpu_type).idle_w;
      view_.idle_w += idle;
      view_.rack_idle_w[n.rack] += idle;
    }
    if (!opt_.energy.rack_cap_w.empty()) {
      view_.rack_cap_w = opt_.energy.rack_cap_w;
      view_.rack_cap_w.resize(racks, kNoPowerCap);
    } else {
      view_.rack_idle_w.clear();
    }
    power_policies_ = opt_.energy.policies();
    for (QueueId q = 0; q < tree_.size(); ++q) {
      power_policies_ = power_policies_ || tree_.queue(q).energy_weight > 0;
    }
    if (power_policies_) {
      for (const JobSpec& s : w_.jobs) {
        if (auto why = power_infeasible_reason(view_, c_, s)) {
          throw std::invalid_argument(s.source + ": job " + s.name +
                                      " can never run under the power cap: " + *why);
        }
      }
    }
    result_.energy.series_interval = opt_.series_interval > 0 ? opt_.series_interval : 3600.0;
    node_asleep_.assign(c_.nodes().size(), false);
    node_gen_.assign(c_.nodes().size(), 0);
    result_.energy.modelled = true;
    result_.energy.carbon = opt_.carbon != nullptr;
    result_.energy.pue = opt_.energy.pue;
    result_.energy.price_per_kwh = opt_.energy.price_per_kwh;
    result_.energy.cap_w = opt_.energy.cap_w;
    result_.energy.idle_w = view_.idle_w;
    result_.energy.peak_w = view_.idle_w;
  }

  // The GPU type whose curve a job's placement uses (that of its first member's node).
  GpuTypeId type_of(const Allocation& a) const {
    return a.member_node.empty() ? 0 : c_.node(a.member_node.front()).gpu_type;
  }

  // Sets j's power state for its allocation and limit (not yet drawing).
  void price_power(JobId j) {
    JobState& js = jobs_[j];
    if (!bound_) return;
    const JobSpec& s = w_.jobs[j];
    const GpuTypeId t = type_of(js.alloc);
    const GpuPowerSpec& spec = bound_->spec(t);
    const PowerCurve& curve = bound_->curve(t, s.model);
    const double limit = js.limit_w > 0 ? js.limit_w : spec.tdp_w;
    js.power_speed = curve.speed(limit);
    const double gpus = run_gpus(js);
    js.draw_w = curve.power(limit) * gpus;
    js.inc_w = gpu_increment(view_, t, s.model, limit) * gpus;  // as the engine counts it
  }

  // j starts or stops counting in the cluster's draw.
  void set_drawing(JobId j, bool on) {
    JobState& js = jobs_[j];
    if (!bound_ || js.drawing == on) return;
    js.drawing = on;
    holding_w_ += on ? js.inc_w : -js.inc_w;
    busy_w_ += on ? js.draw_w : -js.draw_w;
    if (js.limit_w > 0 && js.limit_w < preferred_w(j) - 1e-6) {
      throttled_gpus_ += (on ? 1 : -1) * run_gpus(js);
    }
  }

  double preferred_w(JobId j) const {
    const JobState& js = jobs_[j];
    const QueueId leaf = tree_.leaf_of(w_.jobs[j].tenant);
    const double own = leaf == kNoId ? kUnknown : tree_.queue(leaf).energy_weight;
    return preferred_limit(view_, c_, w_.jobs[j], js.alloc,
                           own >= 0 ? own : opt_.energy.energy_weight);
  }

  // ---- node sleep (EnergySettings::sleep_after_s) ----

  bool sleeping() const { return bound_ && opt_.energy.sleep_after_s >= 0; }

  double node_idle_w(NodeId n) const {
    const Node& node = c_.node(n);
    return opt_.energy.node_base_w + node.num_gpus * bound_->spec(node.gpu_type).idle_w;
  }

  bool node_empty(NodeId n) const {
    const Node& node = c_.node(n);
    if (state_.node_free_cpu(n) < node.cpu_milli) return false;
    for (GpuId g = node.first_gpu; g < node.first_gpu + node.num_gpus; ++g) {
      if (state_.gpu_free(g) < kMilliPerGpu) return false;
    }
    return true;
  }

  // After `a` was released: its nodes that are now empty may sleep after the threshold.
  void nodes_released(const Allocation& a) {
    if (!sleeping()) return;
    for (NodeId n : a.member_node) {
      if (node_asleep_[n] || down_[n] || !node_empty(n)) continue;
      events_.push(now_ + opt_.energy.sleep_after_s, EventKind::kNodeSleep, n, ++node_gen_[n]);
    }
  }

  void node_sleep(NodeId n, uint32_t generation) {
    if (generation != node_gen_[n] || node_asleep_[n] || down_[n] || !node_empty(n)) return;
    node_asleep_[n] = true;
    asleep_w_ += node_idle_w(n);
    ++asleep_nodes_;
  }

  // Wakes the sleeping nodes of `a` (and cancels their pending sleep); returns whether any slept.
  bool wake_nodes(const Allocation& a) {
    if (!sleeping()) return false;
    bool woke = false;
    for (NodeId n : a.member_node) {
      ++node_gen_[n];
      if (!node_asleep_[n]) continue;
      node_asleep_[n] = false;
      asleep_w_ -= node_idle_w(n);
      --asleep_nodes_;
      result_.energy.wakes++;
      woke = true;
    }
    return woke;
  }

  // A running job's power limit changes: its work so far is accounted at the old speed, the
  // rest runs at the new one (no restart: nvidia-smi -pl applies to a running process).
  void set_limit(JobId j, double limit_w) {
    JobState& js = jobs_[j];
    if (js.phase != Phase::kRunning) return;
    const bool was = js.drawing;
    set_drawing(j, false);
    if (js.begun) {
      const double done = account_run(j);
      js.remaining = std::max(0.0, js.remaining - done);
      const double restart_left = std::max(0.0, js.restart_cost - (now_ - js.run_start));
      js.run_start = now_;
      js.restart_cost = restart_left;
    }
    const double base_speed = js.speed / js.power_speed;
    js.limit_w = limit_w;
    price_power(j);
    js.speed = base_speed * js.power_speed;
    js.generation++;
    events_.push(js.run_start + js.restart_cost + js.remaining / js.speed, EventKind::kFinish, j,
                 js.generation);
    if (!js.begun) events_.push(js.run_start, EventKind::kBegin, j, js.generation);
    set_drawing(j, was);
    result_.energy.limit_changes++;
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

  // SimOptions::predictor: the job's estimate is what the jobs finished so far predict.
  void predict_duration(JobId j) {
    if (opt_.predictor == nullptr || predicted_ == nullptr) return;
    if (features_.empty()) features_.resize(w_.jobs.size());
    JobSpec& s = predicted_->jobs[j];
    features_[j] = encoder_.encode(s);
    if (opt_.keep_trace_estimates && s.duration_estimate >= 0) return;
    s.duration_estimate = opt_.predictor->predict(features_[j]).point;
  }

  void submit(JobId j) {
    predict_duration(j);
    JobState& js = jobs_[j];
    js.phase = Phase::kPending;
    js.queued_since = now_;
    add_pending(j);
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
  // recorded (JobOutcome::first_reason), and always for an explained job. running_ is
  // unordered and removes by swapping with its last element.
  void add_pending(JobId j) {
    const JobState& js = jobs_[j];
    pending_.add(PendingJob{j, &w_.jobs[j], js.attained, js.queued_since,
                            !result_.jobs[j].has_first_reason || js.history >= 0});
  }

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

  void account_energy(JobId j, double joules, double grams) {
    result_.jobs[j].gpu_energy_j += joules;
    result_.tenants[w_.jobs[j].tenant].gpu_energy_j += joules;
    result_.energy.gpu_busy_j += joules;
    result_.jobs[j].gpu_carbon_g += grams;
    result_.tenants[w_.jobs[j].tenant].gpu_carbon_g += grams;
    result_.energy.busy_carbon_g += grams;
  }

  // `gpu_seconds` of `alloc` held for `seconds`: the job's, the cluster's and its tenant's
  // (by GPU type and with the CPU held, for accounting).
  void account_held(JobId j, double gpu_seconds, const Allocation& alloc, double seconds) {
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
  void stop_run(JobId j, bool keep_usage) {
    JobState& js = jobs_[j];
    const JobSpec& s = w_.jobs[j];
    state_.release(js.alloc);
    const Amounts held = fair_.held(s, js.alloc);
    if (js.begun && !keep_usage) fair_.add_usage(s.tenant, held, -1);
    // A victim's GPUs go back to idle draw at once: writing a checkpoint is not GPU work, and
    // the ledger hands its GPUs on now (a job starting on them in this cycle draws from now).
    set_drawing(j, false);
    fair_.add_demand(s, held, -1);
    remove_from(running_, j);
    nodes_released(js.alloc);
    js.alloc = Allocation{};
    js.generation++;
  }

  void finish(JobId j) {
    account_run(j);
    stop_run(j, false);
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
  void preempt(JobId j, JobId for_job, PreemptionCause cause) {
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
      note(j, "preempted for {} (queue {}): checkpointing for {:g} s, {:g} GPU-hours of work lost",
           w_.jobs[for_job].name, tree_.queue(tree_.leaf_of(w_.jobs[for_job].tenant)).path,
           opt_.checkpoint_grace, lost_h);
    }
    js.phase = Phase::kCheckpointing;
    if (opt_.checkpoint_grace > 0) {
      events_.push(now_ + opt_.checkpoint_grace, EventKind::kRequeue, j, js.generation);
    } else {
      requeue(j);
    }
  }

  // ---- node failures ----

  // Node opt_.failures[i] goes down: every job with a member on it stops, loses the work since
  // its last checkpoint (all of this run's for a job that checkpoints only when asked: a crash
  // gives no warning) and waits again at once; the node takes nothing until it recovers.
  // Returns whether anything changed (a node already down does not fail again).
  bool node_fail(uint32_t i) {
    const NodeFailure& f = opt_.failures[i];
    if (f.node >= down_.size() || down_[f.node]) return false;
    std::vector<JobId> hit;
    for (JobId j : running_) {
      const auto& nodes = jobs_[j].alloc.member_node;
      if (std::find(nodes.begin(), nodes.end(), f.node) != nodes.end()) hit.push_back(j);
    }
    const auto record = static_cast<int32_t>(failure_records_.size());
    failure_records_.push_back(FailureRecord{now_, static_cast<uint32_t>(hit.size())});
    result_.failure.failures++;
    result_.failure.times.push_back(now_);
    result_.failure.jobs_hit += hit.size();
    if (hit.empty()) result_.failure.frt.push_back(0);
    std::vector<Allocation> before;
    for (JobId j : hit) before.push_back(jobs_[j].alloc);
    for (JobId j : hit) fail_job(j, record, f.node);
    // The node's whole capacity is held by a blocker while it is down.
    blockers_[f.node] = state_.free_on_node(f.node);
    state_.allocate(blockers_[f.node]);
    down_[f.node] = true;
    events_.push(now_ + f.repair_seconds, EventKind::kNodeRecover, f.node);
    for (size_t k = 0; k < hit.size(); ++k) recover(hit[k], before[k], f.node);
    return true;
  }

  // ---- recovery of the jobs a failure stopped (SimOptions::recovery) ----

  uint32_t racks_of(const Allocation& a) const {
    std::vector<RackId> racks;
    for (NodeId n : a.member_node) racks.push_back(c_.node(n).rack);
    std::sort(racks.begin(), racks.end());
    return static_cast<uint32_t>(std::unique(racks.begin(), racks.end()) - racks.begin());
  }

  static uint8_t bucket(double have, double need) {
    if (have < need) return have > 0 ? 1 : 0;
    return have < 4 * need ? 2 : 3;
  }

  void recover(JobId j, const Allocation& before, NodeId failed) {
    if (opt_.recovery == nullptr) return;
    const JobSpec& s = w_.jobs[j];
    const Rack& rack = c_.racks()[c_.node(failed).rack];
    double rack_free = 0;
    for (NodeId n = rack.first_node; n < rack.first_node + rack.num_nodes; ++n) {
      rack_free += state_.node_free_whole(n);
    }
    int32_t lost = 0;
    for (NodeId n : before.member_node) lost += n == failed ? 1 : 0;
    const double gpus = static_cast<double>(before.gpu_milli()) / kMilliPerGpu;
    const double cluster_free =
        static_cast<double>(state_.free_milli_matching(kAnyGpuType)) / kMilliPerGpu;
    const size_t waiting = pending_.size();
    RecoveryState st;
    st.rack_free = bucket(rack_free, lost * std::max(1, s.demand.gpus));
    st.cluster_free = bucket(cluster_free, gpus);
    st.queue = static_cast<uint8_t>(waiting <= 1 ? 0 : waiting < 10 ? 1 : waiting < 100 ? 2 : 3);
    const RecoveryAction a = opt_.recovery->choose(st, recovery_rng_);
    recovery_choice_[j] = RecoveryChoice{st, a, now_, racks_of(before)};
    if (a == RecoveryAction::kRequeue) return;
    Allocation alloc;
    if (!restart_in_place(s, before, failed, a == RecoveryAction::kAnywhere, alloc)) return;
    pending_.remove(j);
    result_.failure.restarted_in_place++;
    if (jobs_[j].history >= 0) {
      note(j, "restarted in place of its lost members on {}", describe_placement(alloc));
    }
    start(j, std::move(alloc), 0.0, jobs_[j].limit_w);  // the power its failed run had
  }

  // The same members on the same GPUs, except those on the failed node, which move to free
  // room in its rack (and, `anywhere`, then elsewhere). Leaves the ledger as it found it.
  bool restart_in_place(const JobSpec& s, const Allocation& before, NodeId failed, bool anywhere,
                        Allocation& out) {
    out = before;
    const auto g = static_cast<size_t>(before.gpus_per_member);
    const int64_t cpu = before.cpu_milli_per_member, mem = before.mem_mib_per_member;
    std::vector<int32_t> done;
    auto undo = [&] {
      for (int32_t m : done) {
        const auto i = static_cast<size_t>(m);
        state_.release_member(out.member_node[i], std::span(out.shares).subspan(i * g, g), cpu,
                              mem);
      }
      return false;
    };
    auto survivor_fits = [&](size_t i) {
      const NodeId n = out.member_node[i];
      if (state_.node_free_cpu(n) < cpu || state_.node_free_mem(n) < mem) return false;
      for (size_t k = 0; k < g; ++k) {
        if (state_.gpu_free(out.shares[i * g + k].gpu) < out.shares[i * g + k].milli) return false;
      }
      return true;
    };
    std::vector<size_t> lost;
    for (size_t i = 0; i < out.member_node.size(); ++i) {
      if (out.member_node[i] == failed) {
        lost.push_back(i);
        continue;
      }
      if (!survivor_fits(i)) return undo();
      state_.allocate_member(out.member_node[i], std::span(out.shares).subspan(i * g, g), cpu, mem);
      done.push_back(static_cast<int32_t>(i));
    }
    const Rack& rack = c_.racks()[c_.node(failed).rack];
    for (size_t i : lost) {
      NodeId chosen = kNoId;
      std::vector<GpuShare> shares;
      auto try_node = [&](NodeId n) {
        if (n == failed || down_[n] || !type_allowed(s.allowed_types, c_.node(n).gpu_type) ||
            !node_eligible(s.eligible_nodes.get(), n) || !state_.can_host(n, s.demand)) {
          return false;
        }
        shares.clear();
        return state_.pick_gpus(n, s.demand, /*pack=*/true, shares);
      };
      for (NodeId n = rack.first_node; n < rack.first_node + rack.num_nodes && chosen == kNoId;
           ++n) {
        if (try_node(n)) chosen = n;
      }
      for (NodeId n = 0; anywhere && chosen == kNoId && n < c_.nodes().size(); ++n) {
        if (try_node(n)) chosen = n;
      }
      if (chosen == kNoId) return undo();
      out.member_node[i] = chosen;
      std::copy(shares.begin(), shares.end(),
                out.shares.begin() + static_cast<std::ptrdiff_t>(i * g));
      state_.allocate_member(chosen, std::span(out.shares).subspan(i * g, g), cpu, mem);
      done.push_back(static_cast<int32_t>(i));
    }
    undo();  // start() allocates the whole of it
    return true;
  }

  void node_recover(NodeId n) {
    if (!down_[n]) return;
    state_.release(blockers_[n]);
    blockers_[n] = Allocation{};
    down_[n] = false;
  }

  void fail_job(JobId j, int32_t record, NodeId node) {
    JobState& js = jobs_[j];
    const JobSpec& s = w_.jobs[j];
    const double done = account_run(j);
    double kept = 0;
    if (s.checkpoint_interval > 0) {
      const double productive = std::max(0.0, now_ - js.run_start - js.restart_cost);
      kept = std::floor(productive / s.checkpoint_interval) * s.checkpoint_interval * js.speed;
    }
    js.remaining = std::max(0.0, js.remaining - kept);
    const double lost_gpu = js.speed > 0 ? (done - kept) / js.speed * run_gpus(js) : 0.0;
    result_.jobs[j].lost_work_seconds += done - kept;
    result_.failure.lost_gpu_seconds += lost_gpu;
    if (js.begun) write_event("fail", j);
    note(j, "node {} failed: {:g} GPU-hours of work lost; waiting again", c_.node(node).name,
         lost_gpu / 3600.0);
    stop_run(j, /*keep_usage=*/false);
    fair_.add_demand(s, amounts_of(s, s.min_members), +1);  // it wants to run again
    js.begun = false;
    js.phase = Phase::kPending;
    // Requeued in its place from its submission (queue orders rank arrival by submit time, for
    // preempted jobs too); its wait for starvation also counts from its submission.
    js.queued_since = s.submit_time;
    js.has_reason = false;
    js.recovering = record;
    add_pending(j);
  }

  // Whether a running elastic gang is below its maximum (only asked with policy.elastic).
  bool any_growable() const {
    for (JobId j : running_) {
      if (jobs_[j].alloc.members() < w_.jobs[j].max_members) return true;
    }
    return false;
  }

  // An elastic gang changes size: it checkpoints on request (nothing is lost), its old members
  // stop and the new set restarts, paying the restart cost, at the speed of its new shape.
  // The event log shows the old GPUs released ("evict") and the new ones held ("start").
  // `released`: its old GPUs are already off the ledger (a goodput round released them to
  // place it anew).
  void resize(Resize& r, bool released = false) {
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
    price_power(j);
    js.speed = run_speed(j) * js.power_speed;
    if (!(js.speed > 0)) throw std::logic_error("execution model gave speed <= 0 for " + s.name);
    events_.push(js.run_start + js.restart_cost + js.remaining / js.speed, EventKind::kFinish, j,
                 js.generation);
    result_.resizes++;
    if (js.history >= 0) {
      note(j, "{} from {} to {} members{}", r.grow ? "grown" : "shrunk", had, js.alloc.members(),
           r.for_job < w_.jobs.size() ? " to make room for " + w_.jobs[r.for_job].name : "");
    }
    begin(j);
  }

  // The victim's checkpoint is written: it lets go of its GPUs and waits again.
  // ---- round-based scheduling (SimOptions::round_seconds; sim/gavel_rounds.h) ----

  // A round boundary: the plan for the jobs that want to run, running jobs it moves preempted,
  // waiting jobs it brings in started on their type (after the grace of this round's victims).
  void play_round() {
    std::vector<GavelCandidate> cands;
    const size_t types = c_.gpu_types().size();
    const auto candidate = [&](JobId j, GpuTypeId on) {
      JobState& js = jobs_[j];
      if (js.rounds_on.size() < types) js.rounds_on.resize(types, 0.0);
      GavelCandidate g;
      g.id = j;
      g.spec = &w_.jobs[j];
      g.running_on = on;
      g.attained = js.attained + run_gpus(js) * std::max(0.0, now_ - js.run_start);
      g.rounds_on = js.rounds_on;
      g.rounds = js.rounds;
      cands.push_back(g);
    };
    // Last round's plan no longer holds (a job still checkpointing restarts where it can).
    for (JobId j : planned_jobs_) jobs_[j].planned = kNoGpuType;
    planned_jobs_.clear();
    for (JobId j : running_) candidate(j, c_.node(jobs_[j].alloc.member_node.front()).gpu_type);
    for (const PendingJob& p : pending_.jobs()) candidate(p.id, kNoGpuType);
    const std::vector<GpuTypeId> plan =
        planner_.plan(c_, cands, policy_.heterogeneity, opt_.round_stay_factor, opt_.round_lp_jobs);
    result_.round_lp_solves = planner_.lp_solves();
    ++result_.rounds;
    // Who moves: running jobs the plan suspends or sends elsewhere give way first.
    bool preempted = false;
    for (size_t k = 0; k < cands.size(); ++k) {
      const JobId j = cands[k].id;
      jobs_[j].planned = plan[k];
      jobs_[j].rounds += 1;
      if (plan[k] != kNoGpuType) planned_jobs_.push_back(j);
      if (cands[k].running_on != kNoGpuType && plan[k] != cands[k].running_on) {
        preempt(j, j, PreemptionCause::kRound);
        preempted = true;
      }
    }
    // Who comes in: waiting jobs the plan gives a type, placed on it.
    Rng rng(mix_seed(policy_.seed, result_.rounds));
    for (size_t k = 0; k < cands.size(); ++k) {
      const JobId j = cands[k].id;
      if (cands[k].running_on != kNoGpuType || plan[k] == kNoGpuType) continue;
      if (start_on_planned_type(j, rng, preempted ? opt_.checkpoint_grace : 0.0)) {
        pending_.remove(j);
      }
    }
    // The rounds each job ran on each type (counted for this round, as planned).
    for (size_t k = 0; k < cands.size(); ++k) {
      if (plan[k] != kNoGpuType) jobs_[cands[k].id].rounds_on[plan[k]] += 1;
    }
  }

  // The speed of j's run on its allocation. An adaptive job (goodput rounds) runs at 1: its
  // remaining seconds are recomputed here from its training progress on this placement.
  double run_speed(JobId j) {
    JobState& js = jobs_[j];
    const PlacementShape shape = shape_of(c_, js.alloc);
    if (goodput_ && goodput_->adaptive(j)) {
      js.remaining = goodput_->seconds_left(j, shape);
      return 1.0;
    }
    return model_.speed(w_.jobs[j], w_, shape, c_);
  }

  // ---- goodput rounds (Policy::goodput; sim/goodput_rounds.h) ----

  // A round boundary: running jobs report, the planner gives every job that wants to run a GPU
  // count, and the jobs whose count changed are suspended (checkpoint grace), resized (a
  // restart) or started. Shrinks and suspensions go first so that their GPUs are free for the
  // rest; then larger jobs are placed before smaller ones (less fragmentation).
  void play_goodput_round() {
    ++result_.rounds;
    std::vector<GoodputCandidate> cands;
    for (JobId j : running_) {
      const JobState& js = jobs_[j];
      const double elapsed = std::max(0.0, now_ - js.run_start);
      if (goodput_->adaptive(j)) {
        goodput_->report(j, shape_of(c_, js.alloc), std::max(0.0, elapsed - js.restart_cost));
      }
      cands.push_back(GoodputCandidate{j, static_cast<int>(std::lround(run_gpus(js))),
                                       js.attained + run_gpus(js) * elapsed, js.ran + elapsed});
    }
    for (const PendingJob& p : pending_.jobs()) {
      cands.push_back(GoodputCandidate{p.id, 0, jobs_[p.id].attained, jobs_[p.id].ran});
    }
    int gpus = 0, per_node = 1;
    for (NodeId n = 0; n < c_.nodes().size(); ++n) {
      if (down_[n]) continue;
      gpus += c_.node(n).num_gpus;
      per_node = std::max<int>(per_node, c_.node(n).num_gpus);
    }
    const std::vector<int> want = goodput_->plan(cands, gpus, per_node);
    std::vector<size_t> order(cands.size());
    for (size_t k = 0; k < order.size(); ++k) order[k] = k;
    // Shrinks first, then by size descending; ties by index (deterministic).
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      const bool sa = want[a] < cands[a].current, sb = want[b] < cands[b].current;
      if (sa != sb) return sa;
      return want[a] > want[b];
    });
    // GPUs of the jobs suspended now: a job started on one begins after their checkpoint.
    std::vector<bool> checkpointing;
    for (size_t k : order) {
      if (cands[k].current > 0 && want[k] == 0) {
        if (checkpointing.empty()) checkpointing.assign(c_.num_gpus(), false);
        for (const GpuShare& sh : jobs_[cands[k].id].alloc.shares) checkpointing[sh.gpu] = true;
        preempt(cands[k].id, cands[k].id, PreemptionCause::kRound);
      }
    }
    const auto on_checkpointing = [&](const Allocation& a) {
      return !checkpointing.empty() &&
             std::any_of(a.shares.begin(), a.shares.end(),
                         [&](const GpuShare& sh) { return checkpointing[sh.gpu]; });
    };
    Rng rng(mix_seed(policy_.seed, result_.rounds));
    for (size_t k : order) {
      const JobId j = cands[k].id;
      if (want[k] == 0 || want[k] == cands[k].current) continue;
      const JobSpec& s = w_.jobs[j];
      const int per_member = std::max(1, s.demand.gpus);
      if (cands[k].current > 0) {
        // Resized: placed anew with its old GPUs counted free; where no size from the planned
        // one down fits, it keeps what it has.
        JobState& js = jobs_[j];
        state_.release(js.alloc);
        Resize r;
        r.job = j;
        r.grow = want[k] > cands[k].current;
        if (place_up_to(j, want[k] / per_member, rng, r.alloc) &&
            r.alloc.members() * per_member != cands[k].current) {
          state_.release(r.alloc);  // resize() allocates it
          resize(r, /*released=*/true);
        } else {
          if (r.alloc.members() > 0) state_.release(r.alloc);
          state_.allocate(js.alloc);
        }
        continue;
      }
      Allocation alloc;
      if (place_up_to(j, want[k] / per_member, rng, alloc)) {
        state_.release(alloc);  // start() allocates it
        pending_.remove(j);
        if (jobs_[j].history >= 0) {
          note(j, "started on {} by the goodput round", describe_placement(alloc));
        }
        const double delay = on_checkpointing(alloc) ? opt_.checkpoint_grace : 0.0;
        start(j, std::move(alloc), delay, 0.0);
      }
    }
  }

  // Places up to `members` members of j and allocates them; false when nothing fits. A rigid
  // gang gets exactly its size. An adaptive job gets the size, from `members` down to one,
  // whose placement has the best speedup as the scheduler knows it: where free GPUs are
  // scattered, fewer GPUs on fewer nodes may train faster than more spread out.
  bool place_up_to(JobId j, int members, Rng& rng, Allocation& out) {
    const JobSpec& s = w_.jobs[j];
    out = Allocation{};
    if (!goodput_->adaptive(j)) return policy_.scorer->place(state_, s, members, rng, out);
    double best = 0;
    Allocation a;
    for (int m = members; m >= 1; --m) {
      if (!policy_.scorer->place(state_, s, m, rng, a)) continue;
      state_.release(a);
      const PlacementShape shape = shape_of(c_, a);
      const int gpus = shape.members() * std::max(1, shape.gpus_per_member);
      const double v = goodput_->speedup(j, static_cast<int>(shape.nodes), gpus);
      if (v > best * (1 + 1e-9)) best = v, out = a;
    }
    if (out.members() == 0) return false;
    state_.allocate(out);
    return true;
  }

  // Places j on its planned type and starts it after `delay`; false when it does not fit.
  bool start_on_planned_type(JobId j, Rng& rng, double delay) {
    JobSpec on_type = w_.jobs[j];
    on_type.allowed_types = GpuTypeMask{1} << jobs_[j].planned;
    Allocation alloc;
    if (!policy_.scorer->place(state_, on_type, on_type.min_members, rng, alloc)) return false;
    state_.release(alloc);  // start() allocates it
    if (jobs_[j].history >= 0) {
      note(j, "placed on {} for this round (round-based scheduling)", describe_placement(alloc));
    }
    start(j, std::move(alloc), delay, 0.0);
    return true;
  }

  void requeue(JobId j) {
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
  void start(JobId j, Allocation alloc, double delay, double limit_w) {
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
    js.limit_w = limit_w;
    price_power(j);
    js.speed = run_speed(j) * js.power_speed;
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
      const std::string limit = power_policies_ && js.limit_w > 0
                                    ? fmt::format(R"(,"power_limit_w":{})", js.limit_w)
                                    : "";
      *opt_.events << fmt::format(R"({{"t":{},"type":"start","job":"{}","gpus":[{}]{}}})", now_,
                                  s.name, gpus, limit)
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
        // A job that outlived its predicted duration (SimOptions::predictor) is expected to run
        // as long again as it has run (durations are heavy-tailed), not to end now.
        if (opt_.predictor != nullptr && r.expected_end < now_) {
          r.expected_end = now_ + (now_ - js.run_start);
        }
      }
      r.last_checkpoint = js.run_start;
      r.reclaim_protected_until = js.reclaim_protected_until;
      r.power_limit_w = js.limit_w;
      snap_running_.push_back(r);
    }
    Snapshot snap;
    snap.now = now_;
    snap.cycle = result_.cycles;
    snap.state = &state_;
    snap.pending = pending_.jobs();
    if (!opt_.full_cycles) snap.pending_queue = &pending_;
    snap.running = snap_running_;
    snap.queues = &tree_;
    snap.decayed_usage = fair_.decayed_usage();
    snap.inference_reserve_milli = reserve_ ? reserve_->reserve_milli(now_) : 0;
    snap.carbon = opt_.carbon;
    if (power_policies_) snap.power = &view_;
    Decisions d = schedule_cycle(snap, policy_);
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
      preempt(p.job, p.for_job, p.cause);
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
  }

  Workload* predicted_;  // SimOptions::predictor: the copy whose estimates it sets
  FeatureEncoder encoder_;
  std::vector<JobFeatures> features_;
  const Workload& w_;
  const Cluster& c_;
  const Policy& policy_;
  const ExecutionModel& model_;
  const SimOptions& opt_;
  ClusterState state_;
  std::vector<JobState> jobs_;
  PendingQueue pending_;
  std::vector<JobId> running_;
  std::vector<RunningJob> snap_running_;
  std::vector<JobId> preemptors_;  // jobs that preempted others in this cycle
  // Round-based scheduling: jobs the current round's plan gives a type.
  std::vector<JobId> planned_jobs_;
  GavelPlanner planner_;
  std::unique_ptr<GoodputPlanner> goodput_;  // with Policy::goodput
  // Node failures: which nodes are down, what holds each down node's capacity, and per failure
  // that hit jobs, when it happened and how many of them have not run again yet.
  struct FailureRecord {
    double time = 0;
    uint32_t waiting = 0;
  };
  std::unique_ptr<InferenceReserve> reserve_;  // SimOptions::reserve_inference
  // Power (SimOptions::power): the model bound to this cluster and workload, the view the
  // engine reads, what running jobs draw above idle in total, and the GPUs running throttled.
  std::optional<BoundPowerModel> bound_;
  PowerView view_;
  double holding_w_ = 0;
  double busy_w_ = 0;  // what the drawing jobs' GPUs draw in all (idle part included)
  double throttled_gpus_ = 0;
  // Node sleep: which nodes sleep, a generation per node (a sleep event is stale once the node
  // was used or released again), and what the sleeping nodes would otherwise draw.
  std::vector<bool> node_asleep_;
  std::vector<uint32_t> node_gen_;
  double asleep_w_ = 0;
  double asleep_nodes_ = 0;
  bool power_policies_ = false;
  bool carbon_deferring_ = false;  // some best-effort job may wait for cleaner hours
  double carbon_tick_at_ = -1;  // the latest tick scheduled at a carbon change point  // a cap or
                                // an energy knob: the engine sees view_
  struct RecoveryChoice {
    RecoveryState state;
    RecoveryAction action = RecoveryAction::kRequeue;
    double time = 0;
    uint32_t racks_before = 0;
  };
  std::unordered_map<JobId, RecoveryChoice> recovery_choice_;  // until the job runs again
  Rng recovery_rng_{0x5eed};
  std::vector<bool> down_;
  std::vector<Allocation> blockers_;
  std::vector<FailureRecord> failure_records_;
  size_t done_ = 0;  // jobs finished
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
  if (opt.predictor == nullptr) return Simulation(w, c, policy, model, opt).run();
  Workload predicted = w;  // the predictor overwrites duration estimates as jobs arrive
  return Simulation(predicted, c, policy, model, opt, &predicted).run();
}

}  // namespace tessera
