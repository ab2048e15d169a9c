#include "insight/holt_winters.h"

#include <cmath>
#include <numeric>
#include <stdexcept>

namespace tessera {

HoltWinters::HoltWinters(std::span<const double> history, size_t period, HoltWintersParams params)
    : params_(params), season_(period, 0.0) {
  if (period < 1 || history.size() < 2 * period) {
    throw std::invalid_argument("Holt-Winters needs at least two periods of history");
  }
  const auto p = static_cast<double>(period);
  const double first = std::accumulate(history.begin(), history.begin() + period, 0.0) / p;
  const double second =
      std::accumulate(history.begin() + period, history.begin() + 2 * period, 0.0) / p;
  level_ = first;
  trend_ = (second - first) / p;
  for (size_t i = 0; i < period; ++i) season_[i] = history[i] - first;
  // The level sits at the end of the first period; observe the rest.
  level_ = first + trend_ * (p - 1) / 2;
  for (size_t i = period; i < history.size(); ++i) observe(history[i]);
}

double HoltWinters::forecast(size_t h) const {
  const size_t m = season_.size();
  return level_ + static_cast<double>(h) * trend_ + season_[(pos_ + h - 1) % m];
}

void HoltWinters::observe(double x) {
  const double s = season_[pos_];
  const double last_level = level_;
  level_ = params_.alpha * (x - s) + (1 - params_.alpha) * (level_ + trend_);
  trend_ = params_.beta * (level_ - last_level) + (1 - params_.beta) * trend_;
  season_[pos_] = params_.gamma * (x - level_) + (1 - params_.gamma) * s;
  pos_ = (pos_ + 1) % season_.size();
}

namespace {

// One-step-ahead squared error of a model started on the first two periods of `train` and run
// through the rest.
double sse(std::span<const double> train, size_t period, const HoltWintersParams& p) {
  HoltWinters hw(train.first(2 * period), period, p);
  double e = 0;
  for (size_t i = 2 * period; i < train.size(); ++i) {
    const double d = train[i] - hw.forecast(1);
    e += d * d;
    hw.observe(train[i]);
  }
  return e;
}

}  // namespace

HoltWintersParams fit_holt_winters(std::span<const double> train, size_t period) {
  // A coarse grid: cheap, deterministic, and the error surface is flat near the optimum.
  static constexpr double kAlpha[] = {0.05, 0.1, 0.2, 0.3, 0.5, 0.7};
  static constexpr double kBeta[] = {0.0, 0.001, 0.01, 0.05};
  static constexpr double kGamma[] = {0.0, 0.05, 0.1, 0.2, 0.4};
  HoltWintersParams best;
  double best_e = INFINITY;
  for (double a : kAlpha) {
    for (double b : kBeta) {
      for (double g : kGamma) {
        const HoltWintersParams p{a, b, g};
        const double e = sse(train, period, p);
        if (e < best_e) {
          best_e = e;
          best = p;
        }
      }
    }
  }
  return best;
}

ForecastErrors evaluate_holt_winters(std::span<const double> train, std::span<const double> test,
                                     size_t period) {
  ForecastErrors out;
  out.params = fit_holt_winters(train, period);
  HoltWinters hw(train, period, out.params);
  const double mean =
      std::accumulate(train.begin(), train.end(), 0.0) / static_cast<double>(train.size());
  // The value one period earlier, from the train tail and then the test itself.
  std::vector<double> all(train.begin(), train.end());
  double se = 0, se_naive = 0, se_mean = 0;
  for (double x : test) {
    const double f = hw.forecast(1);
    const double naive = all[all.size() - period];
    out.mae += std::abs(x - f);
    out.seasonal_naive_mae += std::abs(x - naive);
    out.mean_mae += std::abs(x - mean);
    se += (x - f) * (x - f);
    se_naive += (x - naive) * (x - naive);
    se_mean += (x - mean) * (x - mean);
    hw.observe(x);
    all.push_back(x);
  }
  const auto n = static_cast<double>(test.size());
  out.points = test.size();
  if (n > 0) {
    out.mae /= n;
    out.seasonal_naive_mae /= n;
    out.mean_mae /= n;
    out.rmse = std::sqrt(se / n);
    out.seasonal_naive_rmse = std::sqrt(se_naive / n);
    out.mean_rmse = std::sqrt(se_mean / n);
  }
  return out;
}

}  // namespace tessera
