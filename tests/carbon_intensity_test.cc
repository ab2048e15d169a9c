// The carbon-intensity series: hourly values from a user's CSV, integrated over any
// interval, on Unix time (serve) or relative to a trace's start and repeating (simulate).
#include "model/carbon_intensity.h"

#include <gtest/gtest.h>

#include <cmath>

#include "input_error_util.h"

namespace tessera {
namespace {

using TimeBase = CarbonIntensity::TimeBase;

// 2024-03-01 13:00, 14:00, 15:00 UTC: 100, 300, 200 g/kWh.
constexpr const char* kThreeHours =
    "time,g_per_kwh\n"
    "2024-03-01T13:00:00Z,100\n"
    "2024-03-01T14:00:00Z,300\n"
    "1709305200,200\n";
constexpr double k13h = 1709298000;  // 2024-03-01T13:00:00Z

TEST(CarbonIntensity, ReadsIsoAndUnixTimesAndHoldsEachValueForItsHour) {
  const auto c = CarbonIntensity::parse(kThreeHours, "ci.csv", TimeBase::kAbsolute);
  ASSERT_EQ(c.points().size(), 3u);
  EXPECT_DOUBLE_EQ(c.points()[0].t, k13h);
  EXPECT_DOUBLE_EQ(c.points()[2].t, k13h + 7200);
  EXPECT_DOUBLE_EQ(c.at(k13h + 1800), 100);
  EXPECT_DOUBLE_EQ(c.at(k13h + 3600), 300);
  EXPECT_DOUBLE_EQ(c.at(k13h + 3 * 3600 + 10), 200);  // the last value goes on
  EXPECT_DOUBLE_EQ(c.at(k13h - 10), 100);             // and the first before it
  EXPECT_DOUBLE_EQ(c.period(), 3 * 3600);
}

TEST(CarbonIntensity, IntegratesADrawAcrossHourBoundaries) {
  const auto c = CarbonIntensity::parse(kThreeHours, "ci.csv", TimeBase::kAbsolute);
  // 1 kW from 13:30 to 15:30: 0.5 kWh at 100 + 1 kWh at 300 + 0.5 kWh at 200 = 450 g.
  EXPECT_NEAR(c.grams(1000, k13h + 1800, k13h + 3 * 3600 - 1800), 450, 1e-9);
  // 500 W within one hour: 0.25 kWh at 300.
  EXPECT_NEAR(c.grams(500, k13h + 3600, k13h + 3600 + 1800), 75, 1e-9);
  EXPECT_EQ(c.grams(1000, k13h + 10, k13h + 10), 0);
  EXPECT_EQ(c.grams(1000, k13h + 10, k13h), 0);
  EXPECT_NEAR(c.mean(k13h, k13h + 7200), 200, 1e-9);
  // Beyond the file: the nearest value (the last one after, the first before).
  EXPECT_NEAR(c.grams(1000, k13h + 5 * 3600, k13h + 6 * 3600), 200, 1e-9);
  EXPECT_NEAR(c.grams(1000, k13h - 3600, k13h), 100, 1e-9);
}

TEST(CarbonIntensity, RelativeTimeStartsAtTheFirstRowAndRepeats) {
  const auto c = CarbonIntensity::parse(kThreeHours, "ci.csv", TimeBase::kRelative);
  EXPECT_EQ(c.time_base(), TimeBase::kRelative);
  EXPECT_DOUBLE_EQ(c.at(0), 100);
  EXPECT_DOUBLE_EQ(c.at(3600 + 1), 300);
  EXPECT_DOUBLE_EQ(c.at(3 * 3600 + 1), 100);  // the second cycle
  EXPECT_DOUBLE_EQ(c.at(4 * 3600 + 1), 300);
  EXPECT_DOUBLE_EQ(c.at(-1), 200);  // before the start: the cycle before
  // One kW over a period and a half: 600 g a cycle, then 100 + 150.
  EXPECT_NEAR(c.grams(1000, 0, 3 * 3600), 600, 1e-9);
  EXPECT_NEAR(c.grams(1000, 0, 4.5 * 3600), 850, 1e-9);
  // Across the wrap: 15:00-16:00 (200) and the next cycle's first hour (100).
  EXPECT_NEAR(c.grams(1000, 2 * 3600, 4 * 3600), 300, 1e-9);
  // Ten cycles in: the same as the first.
  EXPECT_NEAR(c.grams(1000, 30 * 3600 + 1800, 31 * 3600 + 1800), c.grams(1000, 1800, 3600 + 1800),
              1e-6);
  // The same series read on Unix time.
  const auto abs = c.with_time_base(TimeBase::kAbsolute);
  EXPECT_DOUBLE_EQ(abs.at(k13h + 3600), 300);
}

TEST(CarbonIntensity, BadFilesNameTheFileLineAndField) {
  auto error = [](const std::string& text) {
    return testing::error_of([&] { CarbonIntensity::parse(text, "ci.csv", TimeBase::kAbsolute); });
  };
  const std::string empty = error("");
  EXPECT_TRUE(testing::Contains(empty, "ci.csv"));
  EXPECT_TRUE(testing::Contains(empty, "empty"));
  EXPECT_TRUE(testing::Contains(error("time,g_per_kwh\n"), "no rows"));
  const std::string unsorted =
      error("time,g_per_kwh\n2024-03-01T14:00:00Z,1\n2024-03-01T13:00:00Z,2\n");
  EXPECT_TRUE(testing::Contains(unsorted, "ci.csv:3: field time"));
  EXPECT_TRUE(testing::Contains(unsorted, "increase"));
  const std::string negative = error("time,g_per_kwh\n0,10\n3600,-5\n");
  EXPECT_TRUE(testing::Contains(negative, "ci.csv:3: field g_per_kwh"));
  const std::string bad_time = error("time,g_per_kwh\n2024-02-30T00:00:00Z,10\n");
  EXPECT_TRUE(testing::Contains(bad_time, "ci.csv:2: field time"));
  EXPECT_TRUE(testing::Contains(bad_time, "2024-02-30"));
  EXPECT_TRUE(testing::Contains(error("when,g\n0,1\n"), "unknown column"));
  EXPECT_TRUE(testing::Contains(error("time,g_per_kwh\n0,abc\n"), "field g_per_kwh"));
}

TEST(CarbonIntensity, SeriesTimesAreUnixSecondsOrUtc) {
  double t = 0;
  ASSERT_TRUE(parse_series_time("1970-01-01T00:00:00Z", t));
  EXPECT_EQ(t, 0);
  ASSERT_TRUE(parse_series_time("2000-02-29T23:59Z", t));  // a leap day, no seconds
  EXPECT_EQ(t, 951868740);
  ASSERT_TRUE(parse_series_time("2024-03-01T13:00:00+00:00", t));
  EXPECT_EQ(t, k13h);
  EXPECT_FALSE(parse_series_time("2024-03-01T13:00:00+01:00", t));  // UTC only
  EXPECT_FALSE(parse_series_time("2023-02-29T00:00:00Z", t));
  EXPECT_FALSE(parse_series_time("yesterday", t));
}

}  // namespace
}  // namespace tessera
