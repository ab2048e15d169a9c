// How many GPUs to hold back for inference-critical arrivals: Holt-Winters over their arrivals
// per bucket (insight/holt_winters.h) and Little's law, GPUs busy = arrival rate x mean
// GPU-seconds per job, plus a margin of `margin_sd` standard deviations (arrivals taken as
// Poisson). The mean GPU-seconds come from inference jobs that have finished (no peeking).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "insight/holt_winters.h"

namespace tessera {

class InferenceReserve {
 public:
  explicit InferenceReserve(double bucket_seconds = 600, size_t period = 144,
                            double margin_sd = 2.0);
  void arrived(double t);
  void finished(double gpu_seconds);
  // The reservation at time `now` (closing any buckets that ended), in milli-GPU.
  int64_t reserve_milli(double now);
  double forecast_arrivals_per_bucket() const { return forecast_; }

 private:
  void advance(double now);

  double bucket_, margin_;
  size_t period_;
  double bucket_start_ = -1;
  double count_ = 0;
  std::vector<double> history_;
  std::unique_ptr<HoltWinters> model_;
  double forecast_ = 0;
  double gpu_seconds_sum_ = 0, finished_ = 0;
};

}  // namespace tessera
