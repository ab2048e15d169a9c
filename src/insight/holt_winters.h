// Forecasting a cluster's arrival series (e.g. GPU job submissions per 10 minutes) with
// additive Holt-Winters: level, trend and a seasonal profile of `period` steps (a day of
// 10-minute buckets is 144). Used to pre-reserve capacity for latency-bound classes from the
// rate their jobs are expected to arrive at.
//
// Pure and deterministic: parameters are fitted by a grid search on one-step-ahead squared
// error over a training prefix, then the model is updated online one observation at a time.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace tessera {

struct HoltWintersParams {
  double alpha = 0.3;  // level smoothing
  double beta = 0.01;  // trend smoothing
  double gamma = 0.1;  // seasonal smoothing
};

class HoltWinters {
 public:
  // Initialises from the first two periods of `history` (at least 2 x period values): level as
  // the first period's mean, trend from the change of mean between the two, seasonal profile
  // as the first period's deviations; then observes the rest of `history`.
  HoltWinters(std::span<const double> history, size_t period, HoltWintersParams params);

  // The forecast `h` >= 1 steps after the last observation.
  double forecast(size_t h = 1) const;
  // Observes the next value.
  void observe(double x);

  size_t period() const { return season_.size(); }
  const HoltWintersParams& params() const { return params_; }

 private:
  HoltWintersParams params_;
  double level_ = 0, trend_ = 0;
  std::vector<double> season_;  // seasonal component of the next step is season_[pos_]
  size_t pos_ = 0;
};

// Parameters minimising one-step-ahead squared error over `train` (grid over alpha, beta,
// gamma in a documented coarse grid).
HoltWintersParams fit_holt_winters(std::span<const double> train, size_t period);

// One-step-ahead forecast errors over `test`, following `train` (the model keeps learning
// online through the test), beside two naive forecasts: the value one period earlier (seasonal
// naive) and the training mean.
struct ForecastErrors {
  double mae = 0, rmse = 0;  // Holt-Winters
  double seasonal_naive_mae = 0, seasonal_naive_rmse = 0;
  double mean_mae = 0, mean_rmse = 0;
  size_t points = 0;
  HoltWintersParams params;
};
ForecastErrors evaluate_holt_winters(std::span<const double> train, std::span<const double> test,
                                     size_t period);

}  // namespace tessera
