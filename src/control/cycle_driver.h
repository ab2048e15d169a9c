// What `tessera serve` and `tessera kube` both do around the engine's cycle, kept once: the
// queue of waiting jobs kept between cycles (engine/pending_queue.h), when a cycle walks all of
// it to give every job its reason anew, the long-term (decayed) usage folded in between cycles,
// the cycle-time histogram, and the pacing of goodput rounds. Each front end brings its queue up
// to date, supplies what it offers (a snapshot without the pending jobs) and applies the
// decisions; the driver runs the engine between.
//
// One cycle: begin(t) -> the front end syncs queue() and fills a Snapshot -> decide() (may run
// unlocked: it reads the queue, which only the scheduler thread changes) -> settle() under the
// lock that guards what readers see (the metrics).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "control/views.h"
#include "engine/decayed_usage.h"
#include "engine/decisions.h"
#include "engine/pending_queue.h"
#include "engine/policy.h"
#include "engine/snapshot.h"
#include "model/cluster.h"
#include "model/queue_tree.h"

namespace tessera {

// How long cycles took: a Prometheus histogram (cumulative counts per upper bound).
struct CycleHistogram {
  std::vector<double> bounds;    // seconds, ascending
  std::vector<uint64_t> counts;  // one per bound: cycles that took at most it
  uint64_t cycles = 0;
  double seconds_sum = 0;

  explicit CycleHistogram(std::vector<double> upper_bounds = {});
  void observe(double seconds);
};

// Long-term fairness's account (the queue tree's fairness.half_life): each leaf queue's usage
// folded into a DecayedUsage over the time between cycles. What a leaf held over an interval is
// what it held at the interval's start (allocations change only at cycles, so that is a close
// account). Off (every call a no-op) when the tree sets no half-life.
class LongTermUsage {
 public:
  // Follows `tree`'s shape: queue ids are stable as a tree grows, so usage carries over by id.
  void reshape(const QueueTree& tree);
  bool on() const { return decayed_.on(); }
  // Folds in the time since the last fold at what was held then; hold() then says what the
  // leaves hold from now.
  void fold(double t);
  // A running job's allocation, counted against its tenant's leaf queue.
  void hold(const QueueTree& tree, const Cluster& cluster, const JobSpec& spec,
            const Allocation& alloc);
  const DecayedUsage& decayed() const { return decayed_; }
  DecayedUsage& decayed() { return decayed_; }  // to restore saved usage

 private:
  DecayedUsage decayed_;
  std::vector<Amounts> held_;    // by QueueId, since the last fold
  std::vector<QueueId> leaves_;  // the tree's leaves (what usage is kept for)
  double folded_at_ = 0;         // 0: never
};

// When goodput rounds run (--policy goodput): every `interval` seconds, and at once when an
// adaptive job waits that no round has planned.
class RoundPacer {
 public:
  explicit RoundPacer(double interval) : interval_(interval) {}
  // Whether a round is due at t: its interval passed, or `someone_unplanned()` (asked only when
  // it has not, since it walks the front end's waiting jobs).
  template <class Unplanned>
  bool due(double t, Unplanned&& someone_unplanned) const {
    return last_ < 0 || t - last_ >= interval_ || someone_unplanned();
  }
  // A round began at t: the next is due an interval later.
  void began(double t) { last_ = t; }
  // It planned some jobs: counted; its number (from 1) seeds its random choices.
  uint64_t planned() { return ++rounds_; }
  uint64_t rounds() const { return rounds_; }

 private:
  double interval_;
  double last_ = -1;
  uint64_t rounds_ = 0;
};

class CycleDriver {
 public:
  struct Options {
    // Every this often one cycle walks the whole queue, every job wanting its reason; the
    // others stop once nothing more can start. 0: every cycle.
    double reason_refresh_seconds = 30;
    std::vector<double> histogram_bounds;  // CycleHistogram's, in seconds
    double goodput_round_seconds = 60;     // RoundPacer's interval
  };
  // `policy` outlives the driver (the front end owns it).
  CycleDriver(const Policy& policy, Options opt);

  // The kept queue, made on first use in the policy's order. Changed only by the scheduler
  // thread (the front end's sync, and settle()).
  PendingQueue& queue();
  bool has_queue() const { return queue_ != nullptr; }
  // Makes the queue anew, empty (a front end that found it out of step with what it offers).
  void reset_queue();

  struct Cycle {
    uint64_t number = 0;
    double now = 0;
    bool refresh = false;  // this cycle walks the whole queue
  };
  Cycle begin(double t);

  struct Outcome {
    Decisions decisions;
    double seconds = 0;  // the engine's time
  };
  // The engine's cycle over `snap` (its now, cycle number and pending jobs are set here from
  // `c` and the queue). `worth_running` false: nothing is decided (the front end knows that
  // nothing waits and nothing else can change).
  Outcome decide(const Cycle& c, Snapshot& snap, bool worth_running = true);
  // After decide(): the jobs given a reason want none until queued anew or the next refresh,
  // and the cycle's time is counted.
  void settle(const Outcome& o);

  const CycleHistogram& histogram() const { return histogram_; }
  LongTermUsage& usage() { return usage_; }
  const LongTermUsage& usage() const { return usage_; }
  RoundPacer& goodput_rounds() { return rounds_; }
  const RoundPacer& goodput_rounds() const { return rounds_; }
  // The cycle counters of /metrics: cycles, their time and histogram, goodput rounds run.
  void report(ServiceMetrics& m) const;

 private:
  const Policy& policy_;
  Options opt_;
  std::unique_ptr<PendingQueue> queue_;
  std::vector<PendingJob> everyone_;  // a refresh's copy of the queue, each wanting its reason
  uint64_t cycles_begun_ = 0;
  double refreshed_at_ = -1;
  CycleHistogram histogram_;
  LongTermUsage usage_;
  RoundPacer rounds_;
};

}  // namespace tessera
