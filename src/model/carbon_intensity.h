// An hourly carbon-intensity series: grams of CO2(-equivalent) per kWh of
// electricity, from a user-provided CSV (e.g. exported from the grid operator or Electricity
// Maps), and the carbon of a constant draw over any interval.
//
// File format: a header `time,g_per_kwh` (either order), then one row per step, times strictly
// increasing. `time` is Unix seconds (`1709298000`) or ISO-8601 UTC (`2024-03-01T13:00:00Z`,
// `2024-03-01T13:00Z`, `+00:00` for `Z` also taken). A row's value holds from its time until
// the next row's; the last row holds as long as the step before it (one hour when the file
// has a single row). Rows are normally hourly, but any spacing works. Blank lines are skipped.
// Bad input (no rows, a bad or unsorted time, a negative or non-numeric value) throws
// InputError naming the file, line and field.
//
// Two time bases, chosen explicitly (TimeBase):
// - kAbsolute (serve): t is Unix seconds. Before the first row the first value applies, after
//   the last row's span the last value goes on (a window that starts before the file or ends
//   after it is still counted, at the nearest known value).
// - kRelative (simulate): t is seconds since the start of the trace; the series' first row is
//   t = 0 whatever its date, and the series repeats cyclically past its end (its period is the
//   span of its rows, the last row's step included), so a day's series covers a month's trace.
//
// Queries are O(log n): prefix sums of intensity x seconds at each row.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tessera {

class CarbonIntensity {
 public:
  enum class TimeBase { kAbsolute, kRelative };
  struct Point {
    double t = 0;  // as in the file: Unix seconds
    double g_per_kwh = 0;
  };

  // Parses the CSV text; `origin` names it in errors.
  static CarbonIntensity parse(std::string_view text, const std::string& origin, TimeBase base);
  // Reads the file at `path` (errors name it).
  static CarbonIntensity load(const std::string& path, TimeBase base);
  // Throws std::invalid_argument for no points, unsorted times or a negative value.
  CarbonIntensity(std::vector<Point> points, TimeBase base);

  TimeBase time_base() const { return base_; }
  // The same series read on the other time base.
  CarbonIntensity with_time_base(TimeBase base) const;

  // Intensity (g/kWh) at time t (on this series' time base).
  double at(double t) const;
  // Grams of CO2 of a constant draw of `watts` over [t0, t1) (0 when t1 <= t0).
  double grams(double watts, double t0, double t1) const;
  // The mean intensity over [t0, t1) (at(t0) when t1 <= t0).
  double mean(double t0, double t1) const;
  // The first time after t at which the intensity may change (the next row's time; in
  // kRelative, past the end, the next cycle's rows); +infinity past the last row in kAbsolute.
  double next_change(double t) const;

  const std::vector<Point>& points() const { return points_; }
  // The span of the rows, the last row's step included (the period in kRelative).
  double period() const { return end_ - points_.front().t; }

 private:
  // Integral of intensity (g/kWh x s) from the first row's time to `t`, on the file's own
  // (absolute) axis; negative before the first row.
  double integral_abs(double t) const;
  // The same for t on this series' time base.
  double integral(double t) const;
  double value_abs(double t) const;

  std::vector<Point> points_;
  std::vector<double> prefix_;  // integral_abs at each row's time
  double end_ = 0;              // last row's time + its step
  TimeBase base_ = TimeBase::kAbsolute;
};

// A time as the series file writes it: Unix seconds, or ISO-8601 UTC as above. False when it
// is neither.
bool parse_series_time(std::string_view s, double& out);

}  // namespace tessera
