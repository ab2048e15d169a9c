#include "report/downsample.h"

#include <algorithm>
#include <cmath>

namespace tessera::report {

Series downsample(const Series& s, size_t max_points) {
  const size_t n = std::min(s.x.size(), s.y.size());
  if (n <= max_points || max_points < 3) return s;
  Series out;
  out.x.reserve(max_points);
  out.y.reserve(max_points);
  out.x.push_back(s.x[0]);
  out.y.push_back(s.y[0]);
  // The n - 2 inner points in max_points - 2 buckets; each keeps the point making the largest
  // triangle with the point kept before it and the mean of the next bucket.
  const double every = static_cast<double>(n - 2) / static_cast<double>(max_points - 2);
  size_t kept = 0;
  for (size_t b = 0; b < max_points - 2; ++b) {
    const auto lo = static_cast<size_t>(std::floor(static_cast<double>(b) * every)) + 1;
    const size_t hi = std::min(static_cast<size_t>(std::floor((b + 1) * every)) + 1, n - 1);
    const size_t next_lo = hi;
    const size_t next_hi =
        std::min(static_cast<size_t>(std::floor((b + 2) * every)) + 1, n);  // exclusive
    double ax = 0, ay = 0;
    const size_t next_count = std::max<size_t>(next_hi - next_lo, 1);
    for (size_t i = next_lo; i < next_lo + next_count && i < n; ++i) {
      ax += s.x[i];
      ay += s.y[i];
    }
    ax /= static_cast<double>(next_count);
    ay /= static_cast<double>(next_count);
    double best_area = -1;
    size_t best = lo;
    for (size_t i = lo; i < std::max(hi, lo + 1) && i < n - 1; ++i) {
      const double area = std::abs((s.x[kept] - ax) * (s.y[i] - s.y[kept]) -
                                   (s.x[kept] - s.x[i]) * (ay - s.y[kept]));
      if (area > best_area) {
        best_area = area;
        best = i;
      }
    }
    out.x.push_back(s.x[best]);
    out.y.push_back(s.y[best]);
    kept = best;
  }
  out.x.push_back(s.x[n - 1]);
  out.y.push_back(s.y[n - 1]);
  return out;
}

std::vector<double> rebin_sum(const std::vector<double>& counts, size_t max_buckets, size_t* k) {
  const size_t per =
      std::max<size_t>(1, (counts.size() + max_buckets - 1) / std::max<size_t>(max_buckets, 1));
  if (k != nullptr) *k = per;
  std::vector<double> out((counts.size() + per - 1) / per, 0.0);
  for (size_t i = 0; i < counts.size(); ++i) out[i / per] += counts[i];
  return out;
}

std::vector<double> quantiles(std::vector<double> v, size_t n) {
  std::vector<double> out;
  if (v.empty() || n < 2) return out;
  std::sort(v.begin(), v.end());
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const double pos =
        static_cast<double>(i) / static_cast<double>(n - 1) * static_cast<double>(v.size() - 1);
    const auto lo = static_cast<size_t>(std::floor(pos));
    const size_t hi = std::min(lo + 1, v.size() - 1);
    out.push_back(v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo)));
  }
  return out;
}

double round_to(double x, int digits) {
  if (!std::isfinite(x)) return x;
  const double scale = std::pow(10.0, digits);
  return std::round(x * scale) / scale;
}

}  // namespace tessera::report
