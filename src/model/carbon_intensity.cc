#include "model/carbon_intensity.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "model/csv.h"
#include "model/input_error.h"

namespace tessera {
namespace {

// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil).
int64_t days_from_civil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2 ? 1 : 0;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

bool leap(int64_t y) {
  return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

// Digits [at, at + n) of s as a number; false when any is not a digit.
bool digits(std::string_view s, size_t at, size_t n, int64_t& out) {
  if (at + n > s.size()) return false;
  out = 0;
  for (size_t i = at; i < at + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    out = out * 10 + (s[i] - '0');
  }
  return true;
}

// YYYY-MM-DDTHH:MM[:SS]Z (or +00:00 for Z).
bool parse_iso(std::string_view s, double& out) {
  int64_t y = 0, mo = 0, d = 0, h = 0, mi = 0, sec = 0;
  if (!digits(s, 0, 4, y) || s.size() < 16 || s[4] != '-' || !digits(s, 5, 2, mo) || s[7] != '-' ||
      !digits(s, 8, 2, d) || (s[10] != 'T' && s[10] != ' ') || !digits(s, 11, 2, h) ||
      s[13] != ':' || !digits(s, 14, 2, mi)) {
    return false;
  }
  std::string_view rest = s.substr(16);
  if (rest.starts_with(":")) {
    if (!digits(rest, 1, 2, sec)) return false;
    rest.remove_prefix(3);
  }
  if (rest != "Z" && rest != "+00:00") return false;
  constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (mo < 1 || mo > 12 || d < 1) return false;
  const int64_t month_days = kDays[mo - 1] + (mo == 2 && leap(y) ? 1 : 0);
  if (d > month_days || h > 23 || mi > 59 || sec > 59) return false;
  out = static_cast<double>(days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec);
  return true;
}

}  // namespace

bool parse_series_time(std::string_view s, double& out) {
  if (csv::parse_double(s, out)) return true;
  return parse_iso(s, out);
}

CarbonIntensity CarbonIntensity::parse(std::string_view text, const std::string& origin,
                                       TimeBase base) {
  csv::LineReader lines(text);
  std::string_view line;
  bool have_header = false;
  while (lines.next(line)) {
    if (!csv::is_blank(line)) {
      have_header = true;
      break;
    }
  }
  if (!have_header) {
    throw InputError(input_error_message(
        origin, 0, "", "empty: expected a header time,g_per_kwh and one row per hour"));
  }
  const csv::Header header(line, {"time", "g_per_kwh"}, {}, origin, lines.line_number(),
                           "carbon-intensity");
  const int c_time = header.index("time");
  const int c_value = header.index("g_per_kwh");
  csv::Row row(origin, header);
  std::vector<Point> points;
  while (lines.next(line)) {
    if (csv::is_blank(line)) continue;
    row.reset(line, lines.line_number());
    Point p;
    if (!parse_series_time(row.str(c_time), p.t)) {
      row.fail(c_time,
               "expected Unix seconds or an ISO-8601 UTC time such as "
               "2024-03-01T13:00:00Z, got '" +
                   std::string(row.str(c_time)) + "'");
    }
    if (!points.empty() && p.t <= points.back().t) {
      row.fail(c_time, "times must increase: '" + std::string(row.str(c_time)) +
                           "' is not after the row before it");
    }
    p.g_per_kwh = row.number(c_value, 0, std::numeric_limits<double>::max());
    points.push_back(p);
  }
  if (points.empty()) {
    throw InputError(input_error_message(origin, lines.line_number(), "",
                                         "no rows: expected one row (time,g_per_kwh) per hour"));
  }
  return CarbonIntensity(std::move(points), base);
}

CarbonIntensity CarbonIntensity::load(const std::string& path, TimeBase base) {
  return parse(csv::read_file(path), path, base);
}

CarbonIntensity::CarbonIntensity(std::vector<Point> points, TimeBase base)
    : points_(std::move(points)), base_(base) {
  if (points_.empty()) throw std::invalid_argument("carbon intensity: no points");
  for (size_t i = 0; i < points_.size(); ++i) {
    if (!(points_[i].g_per_kwh >= 0) || !std::isfinite(points_[i].g_per_kwh)) {
      throw std::invalid_argument("carbon intensity: a value must be 0 or more");
    }
    if (i > 0 && !(points_[i].t > points_[i - 1].t)) {
      throw std::invalid_argument("carbon intensity: times must increase");
    }
  }
  prefix_.resize(points_.size());
  prefix_[0] = 0;
  for (size_t i = 1; i < points_.size(); ++i) {
    prefix_[i] = prefix_[i - 1] + points_[i - 1].g_per_kwh * (points_[i].t - points_[i - 1].t);
  }
  const size_t n = points_.size();
  const double last_step = n > 1 ? points_[n - 1].t - points_[n - 2].t : 3600.0;
  end_ = points_.back().t + last_step;
}

CarbonIntensity CarbonIntensity::with_time_base(TimeBase base) const {
  CarbonIntensity c = *this;
  c.base_ = base;
  return c;
}

double CarbonIntensity::value_abs(double t) const {
  const auto it = std::upper_bound(points_.begin(), points_.end(), t,
                                   [](double v, const Point& p) { return v < p.t; });
  return it == points_.begin() ? points_.front().g_per_kwh : std::prev(it)->g_per_kwh;
}

double CarbonIntensity::integral_abs(double t) const {
  const auto it = std::upper_bound(points_.begin(), points_.end(), t,
                                   [](double v, const Point& p) { return v < p.t; });
  if (it == points_.begin()) return (t - points_.front().t) * points_.front().g_per_kwh;
  const size_t i = static_cast<size_t>(std::prev(it) - points_.begin());
  return prefix_[i] + (t - points_[i].t) * points_[i].g_per_kwh;
}

double CarbonIntensity::integral(double t) const {
  if (base_ == TimeBase::kAbsolute) return integral_abs(t);
  const double p = period();
  const double cycles = std::floor(t / p);
  const double within = t - cycles * p;  // in [0, p)
  return cycles * integral_abs(end_) + integral_abs(points_.front().t + within);
}

double CarbonIntensity::at(double t) const {
  if (base_ == TimeBase::kAbsolute) return value_abs(t);
  const double p = period();
  return value_abs(points_.front().t + (t - std::floor(t / p) * p));
}

double CarbonIntensity::grams(double watts, double t0, double t1) const {
  if (!(t1 > t0)) return 0;
  // W x (g/kWh x s) = g x W s / kWh; 1 kWh = 3.6e6 W s.
  return watts * (integral(t1) - integral(t0)) / 3.6e6;
}

double CarbonIntensity::next_change(double t) const {
  auto next_abs = [&](double x) {
    const auto it = std::upper_bound(points_.begin(), points_.end(), x,
                                     [](double v, const Point& p) { return v < p.t; });
    return it == points_.end() ? end_ : it->t;
  };
  if (base_ == TimeBase::kAbsolute) {
    const double n = next_abs(t);
    return n > t ? n : std::numeric_limits<double>::infinity();
  }
  const double p = period();
  const double cycle = std::floor(t / p) * p;
  return cycle + (next_abs(points_.front().t + (t - cycle)) - points_.front().t);
}

double CarbonIntensity::mean(double t0, double t1) const {
  if (!(t1 > t0)) return at(t0);
  return (integral(t1) - integral(t0)) / (t1 - t0);
}

}  // namespace tessera
