#include "sim/inference_reserve.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace tessera {

InferenceReserve::InferenceReserve(double bucket_seconds, size_t period, double margin_sd)
    : bucket_(bucket_seconds), margin_(margin_sd), period_(period) {}

void InferenceReserve::advance(double now) {
  if (bucket_start_ < 0) bucket_start_ = now;
  while (now >= bucket_start_ + bucket_) {
    history_.push_back(count_);
    count_ = 0;
    bucket_start_ += bucket_;
    if (model_) {
      model_->observe(history_.back());
    } else if (history_.size() >= 3 * period_) {
      // Two periods initialise, the rest fit; from then on it learns online.
      model_ =
          std::make_unique<HoltWinters>(history_, period_, fit_holt_winters(history_, period_));
    }
  }
  if (model_) {
    forecast_ = std::max(0.0, model_->forecast(1));
  } else if (!history_.empty()) {
    forecast_ = std::accumulate(history_.begin(), history_.end(), 0.0) /
                static_cast<double>(history_.size());
  }
}

void InferenceReserve::arrived(double t) {
  advance(t);
  count_ += 1;
}

void InferenceReserve::finished(double gpu_seconds) {
  gpu_seconds_sum_ += gpu_seconds;
  finished_ += 1;
}

int64_t InferenceReserve::reserve_milli(double now) {
  advance(now);
  if (finished_ == 0) return 0;
  const double busy = forecast_ / bucket_ * (gpu_seconds_sum_ / finished_);
  const double gpus = busy + margin_ * std::sqrt(busy);
  return static_cast<int64_t>(std::ceil(gpus)) * 1000;
}

}  // namespace tessera
