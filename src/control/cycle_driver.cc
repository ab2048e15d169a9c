#include "control/cycle_driver.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "engine/cycle.h"
#include "engine/fair_share.h"

namespace tessera {

CycleHistogram::CycleHistogram(std::vector<double> upper_bounds)
    : bounds(std::move(upper_bounds)), counts(bounds.size(), 0) {}

void CycleHistogram::observe(double seconds) {
  ++cycles;
  seconds_sum += seconds;
  for (size_t b = 0; b < bounds.size(); ++b) {
    if (seconds <= bounds[b]) ++counts[b];
  }
}

void LongTermUsage::reshape(const QueueTree& tree) {
  decayed_ = decayed_.resized(tree.size(), tree.settings().half_life_seconds);
  held_.resize(tree.size(), kZeroAmounts);
  leaves_.clear();
  for (QueueId q = 0; q < tree.size(); ++q) {
    if (tree.queue(q).leaf()) leaves_.push_back(q);
  }
}

void LongTermUsage::fold(double t) {
  if (!decayed_.on()) return;
  if (folded_at_ > 0) decayed_.advance(t - folded_at_, held_, leaves_);
  folded_at_ = t;
  std::fill(held_.begin(), held_.end(), kZeroAmounts);
}

void LongTermUsage::hold(const QueueTree& tree, const Cluster& cluster, const JobSpec& spec,
                         const Allocation& alloc) {
  if (!decayed_.on() || alloc.empty()) return;
  const QueueId leaf = tree.leaf_of(spec.tenant);
  if (leaf == kNoId || leaf >= held_.size()) return;
  held_[leaf] = held_[leaf] + fair_amounts_of(tree.settings(), cluster, spec, alloc);
}

CycleDriver::CycleDriver(const Policy& policy, Options opt)
    : policy_(policy),
      opt_(std::move(opt)),
      histogram_(opt_.histogram_bounds),
      rounds_(opt_.goodput_round_seconds) {}

PendingQueue& CycleDriver::queue() {
  if (!queue_) reset_queue();
  return *queue_;
}

void CycleDriver::reset_queue() {
  queue_ = std::make_unique<PendingQueue>(*policy_.order);
}

CycleDriver::Cycle CycleDriver::begin(double t) {
  Cycle c;
  c.number = ++cycles_begun_;
  c.now = t;
  c.refresh = refreshed_at_ < 0 || t - refreshed_at_ >= opt_.reason_refresh_seconds;
  if (c.refresh) refreshed_at_ = t;
  return c;
}

CycleDriver::Outcome CycleDriver::decide(const Cycle& c, Snapshot& snap, bool worth_running) {
  snap.now = c.now;
  snap.cycle = c.number;
  offer_pending(queue(), c.refresh, everyone_, snap);
  Outcome o;
  if (!worth_running) return o;
  const auto t0 = std::chrono::steady_clock::now();
  o.decisions = schedule_cycle(snap, policy_);
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return o;
}

void CycleDriver::settle(const Outcome& o) {
  reasons_given(queue(), o.decisions.pending);
  histogram_.observe(o.seconds);
}

void CycleDriver::report(ServiceMetrics& m) const {
  m.cycle_bucket_bounds = histogram_.bounds;
  m.cycle_bucket_counts = histogram_.counts;
  m.cycles = histogram_.cycles;
  m.cycle_seconds_sum = histogram_.seconds_sum;
  m.goodput_rounds = rounds_.rounds();
}

}  // namespace tessera
