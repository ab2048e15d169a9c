// Holt-Winters forecasting of arrival series (exact on a noise-free seasonal series, better
// than naive forecasts on a noisy one), the series reader's errors, and the GPUs held back for
// forecast inference arrivals.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <span>

#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "engine/cycle.h"
#include "engine/policy.h"
#include "engine/rng.h"
#include "input_error_util.h"
#include "insight/holt_winters.h"
#include "sim/inference_reserve.h"
#include "sim/series_reader.h"
#include "test_util.h"

namespace tessera {
namespace {

std::vector<double> seasonal(size_t n, size_t period, double trend, double noise, uint64_t seed) {
  Rng rng(seed);
  std::vector<double> x;
  for (size_t i = 0; i < n; ++i) {
    const double phase = 2 * M_PI * static_cast<double>(i % period) / static_cast<double>(period);
    x.push_back(20 + trend * static_cast<double>(i) + 8 * std::sin(phase) +
                noise * (rng.uniform() - 0.5));
  }
  return x;
}

TEST(HoltWinters, ForecastsANoiseFreeSeasonalSeriesExactly) {
  const size_t period = 24;
  const auto x = seasonal(24 * 10, period, 0, 0, 1);
  const std::span<const double> all(x);
  HoltWinters hw(all.first(24 * 8), period, HoltWintersParams{0.3, 0.0, 0.1});
  for (size_t h = 1; h <= 48; ++h) EXPECT_NEAR(hw.forecast(h), x[24 * 8 + h - 1], 1e-6) << h;
}

TEST(HoltWinters, BeatsNaiveForecastsOnANoisySeasonalSeries) {
  const size_t period = 24;
  const auto x = seasonal(24 * 30, period, 0.01, 6, 7);
  const std::span<const double> all(x);
  const ForecastErrors e = evaluate_holt_winters(all.first(24 * 20), all.subspan(24 * 20), period);
  EXPECT_EQ(e.points, 24u * 10);
  EXPECT_LT(e.mae, e.seasonal_naive_mae);
  EXPECT_LT(e.mae, e.mean_mae);
  EXPECT_LT(e.rmse, 0.5 * e.mean_rmse);
  // Deterministic: the same fit twice.
  const ForecastErrors again =
      evaluate_holt_winters(all.first(24 * 20), all.subspan(24 * 20), period);
  EXPECT_EQ(e.mae, again.mae);
  EXPECT_EQ(e.params.alpha, again.params.alpha);
}

TEST(SeriesReader, NamesTheColumnAndLineOfABadValue) {
  const auto v = parse_series_column("time,a,b\nt0,1,2\nt1,3,4\n", "s.csv", "b");
  EXPECT_EQ(v, (std::vector<double>{2, 4}));
  std::string e = testing::error_of([] { parse_series_column("time,a\nt0,1\n", "s.csv", "z"); });
  EXPECT_TRUE(testing::Contains(e, "s.csv:1"));
  EXPECT_TRUE(testing::Contains(e, "time, a"));
  e = testing::error_of([] { parse_series_column("time,a\nt0,1\nt1,x\n", "s.csv", "a"); });
  EXPECT_TRUE(testing::Contains(e, "s.csv:3"));
  EXPECT_TRUE(testing::Contains(e, "'x'"));
}

TEST(ForecastCli, WritesTheErrorsAsJson) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("tessera-forecast-" + std::to_string(getpid()));
  fs::create_directories(dir);
  {
    std::ofstream f(dir / "s.csv");
    f << "time,jobs\n";
    const auto x = seasonal(24 * 12, 24, 0, 4, 3);
    for (size_t i = 0; i < x.size(); ++i) f << i << "," << x[i] << "\n";
  }
  const auto r = testing::run_tessera("forecast --series " + (dir / "s.csv").string() +
                                      " --column jobs --period 24 --train 8 --test 4 --json " +
                                      (dir / "f.json").string());
  ASSERT_EQ(r.status, 0) << r.output;
  std::ifstream in(dir / "f.json");
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j["test_points"].get<int>(), 96);
  EXPECT_LT(j["holt_winters"]["mae"].get<double>(), j["train_mean"]["mae"].get<double>());
  const auto bad = testing::run_tessera("forecast --series " + (dir / "s.csv").string() +
                                        " --column jobs --period 24 --train 8 --test 40");
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.output.find("need"), std::string::npos) << bad.output;
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

TEST(InferenceReserve, LittlesLawOnTheForecastArrivalRate) {
  InferenceReserve r(/*bucket_seconds=*/600, /*period=*/6, /*margin_sd=*/0);
  EXPECT_EQ(r.reserve_milli(0), 0);  // nothing known yet
  // Three arrivals per 10 minutes for three "days" of 6 buckets; each job held 2 GPUs for
  // 1000 s: 3 / 600 s x 2000 GPU-s = 10 GPUs busy.
  for (int b = 0; b < 18; ++b) {
    for (int k = 0; k < 3; ++k) r.arrived(b * 600.0 + k * 100);
  }
  for (int k = 0; k < 5; ++k) r.finished(2000);
  EXPECT_NEAR(r.forecast_arrivals_per_bucket(), 3, 1e-6);
  EXPECT_EQ(r.reserve_milli(18 * 600.0), 10000);
  InferenceReserve margin(600, 6, 2.0);
  for (int b = 0; b < 18; ++b) margin.arrived(b * 600.0);
  margin.finished(2400);  // 1 / 600 s x 2400 = 4 GPUs, + 2 sqrt(4) = 8
  EXPECT_EQ(margin.reserve_milli(18 * 600.0), 8000);
}

TEST(InferenceReserve, OtherClassesLeaveTheReservedGpusFree) {
  testing::World w(make_uniform_cluster(1, 1, 1, 4));
  const JobId research = w.add_pending(testing::gang("r", 3, 1, 0));
  const JobId small = w.add_pending(testing::gang("s", 2, 1, 1));
  Snapshot snap = w.snapshot();
  snap.inference_reserve_milli = 2000;
  Decisions d = schedule_cycle(snap, make_policy("fifo", 1));
  ASSERT_EQ(d.starts.size(), 1u);
  EXPECT_EQ(d.starts[0].job, small);  // leaves 2 free
  ASSERT_EQ(d.pending.size(), 1u);
  EXPECT_EQ(d.pending[0].job, research);
  EXPECT_EQ(d.pending[0].code, PendingCode::kReservedForInference);
  // An inference-critical job may use them.
  testing::World w2(make_uniform_cluster(1, 1, 1, 4));
  const JobId ic =
      w2.add_pending(testing::gang("ic", 3, 1, 0, 0, PriorityClass::kInferenceCritical));
  Snapshot snap2 = w2.snapshot();
  snap2.inference_reserve_milli = 2000;
  d = schedule_cycle(snap2, make_policy("fifo", 1));
  ASSERT_EQ(d.starts.size(), 1u);
  EXPECT_EQ(d.starts[0].job, ic);
}

}  // namespace
}  // namespace tessera
