#include "engine/decayed_usage.h"

#include <algorithm>
#include <cmath>

namespace tessera {

DecayedUsage::DecayedUsage(size_t queues, double half_life) : half_life_(half_life) {
  if (on()) {
    value_.assign(queues, {0, 0, 0});
    view_.assign(queues, kZeroAmounts);
  }
}

DecayedUsage DecayedUsage::resized(size_t queues, double half_life) const {
  DecayedUsage out(queues, half_life);
  for (QueueId q = 0; q < std::min(queues, value_.size()); ++q) out.set(q, value_[q]);
  return out;
}

void DecayedUsage::advance(double dt, std::span<const Amounts> usage,
                           std::span<const QueueId> queues) {
  if (!on() || dt <= 0) return;
  const double keep = std::exp2(-dt / half_life_);
  for (QueueId q : queues) {
    for (size_t k = 0; k < kNumDims; ++k) {
      value_[q][k] = value_[q][k] * keep + static_cast<double>(usage[q][k]) * (1 - keep);
      view_[q][k] = std::llround(value_[q][k]);
    }
  }
}

void DecayedUsage::set(QueueId q, const std::array<double, kNumDims>& v) {
  if (!on()) return;
  value_[q] = v;
  for (size_t k = 0; k < kNumDims; ++k) view_[q][k] = std::llround(v[k]);
}

}  // namespace tessera
