// Long-term fairness's memory: per queue, an exponential moving average of what it held, with
// the queue tree's half-life (after `half_life` seconds, past usage weighs half). What
// Snapshot::decayed_usage carries into the cycle; the simulator and the service keep one each.
#pragma once

#include <array>
#include <span>
#include <vector>

#include "model/queue_tree.h"

namespace tessera {

class DecayedUsage {
 public:
  DecayedUsage() = default;
  // `queues` entries (by QueueId), all zero. half_life <= 0: off (view() is empty).
  DecayedUsage(size_t queues, double half_life);

  bool on() const { return half_life_ > 0; }
  // For a tree that grew or changed (queue ids are stable as a tree grows): `queues` entries
  // with `half_life`, each id below both sizes keeping its value.
  DecayedUsage resized(size_t queues, double half_life) const;
  // Folds in `usage` (by QueueId) held for `dt` seconds, for the queues listed.
  void advance(double dt, std::span<const Amounts> usage, std::span<const QueueId> queues);
  // By QueueId, rounded; empty when off.
  std::span<const Amounts> view() const { return view_; }
  // The exact averages (for persistence), and setting one back.
  const std::array<double, kNumDims>& value(QueueId q) const { return value_[q]; }
  void set(QueueId q, const std::array<double, kNumDims>& v);

 private:
  double half_life_ = 0;
  std::vector<std::array<double, kNumDims>> value_;
  std::vector<Amounts> view_;
};

}  // namespace tessera
