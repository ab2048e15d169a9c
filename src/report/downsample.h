// Keeping a report small and quick to open whatever the run's length: plots get at most a
// few thousand points per line (tessera report; a browser draws 2,000 points as fast as 20).
#pragma once

#include <cstddef>
#include <vector>

namespace tessera::report {

struct Series {
  std::vector<double> x, y;  // same length, x ascending
};

// At most `max_points` of `s` (>= 3), chosen by largest-triangle-three-buckets: the first and
// last points are kept, and each bucket between keeps the point that changes the line's shape
// most, so peaks and dips survive where a stride would skip them. A series already short enough
// is returned as is.
Series downsample(const Series& s, size_t max_points);

// `counts` (one per bucket) merged k at a time into at most `max_buckets` sums, k the smallest
// that fits; the total is kept. Returns the sums and k.
std::vector<double> rebin_sum(const std::vector<double>& counts, size_t max_buckets, size_t* k);

// The values at probabilities 0, 1/(n-1), ..., 1 of `values` (linear interpolation between
// closest ranks, as sim/result_metrics.h's percentiles); empty for empty input.
std::vector<double> quantiles(std::vector<double> values, size_t n);

// `x` to `digits` decimals: a data block of short numbers ("12.35", not "12.345678901234567").
double round_to(double x, int digits);

}  // namespace tessera::report
