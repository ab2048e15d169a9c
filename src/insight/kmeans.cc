#include "insight/kmeans.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace tessera {

double uniform01(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

uint64_t uniform_below(std::mt19937_64& rng, uint64_t n) {
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t x;
  do {
    x = rng();
  } while (x >= limit);
  return x % n;
}

double squared_distance(const FeatureVec& a, const FeatureVec& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += (a[i] - b[i]) * (a[i] - b[i]);
  return s;
}

namespace {

size_t nearest(const std::vector<FeatureVec>& centres, const FeatureVec& p, double* dist2) {
  size_t best = 0;
  double bd = std::numeric_limits<double>::infinity();
  for (size_t c = 0; c < centres.size(); ++c) {
    const double d = squared_distance(centres[c], p);
    if (d < bd) {
      bd = d;
      best = c;
    }
  }
  if (dist2) *dist2 = bd;
  return best;
}

// k-means++ seeding: the first centre uniformly, each next one with probability proportional to
// the squared distance to the nearest centre chosen so far.
std::vector<FeatureVec> seed_centres(std::span<const FeatureVec> pts, int k, std::mt19937_64& rng) {
  std::vector<FeatureVec> c;
  c.push_back(pts[uniform_below(rng, pts.size())]);
  std::vector<double> d2(pts.size());
  while (static_cast<int>(c.size()) < k) {
    double total = 0;
    for (size_t i = 0; i < pts.size(); ++i) {
      nearest(c, pts[i], &d2[i]);
      total += d2[i];
    }
    if (total <= 0) {  // fewer distinct points than k: duplicate one
      c.push_back(pts[uniform_below(rng, pts.size())]);
      continue;
    }
    double r = uniform01(rng) * total;
    size_t pick = pts.size() - 1;
    for (size_t i = 0; i < pts.size(); ++i) {
      r -= d2[i];
      if (r < 0) {
        pick = i;
        break;
      }
    }
    c.push_back(pts[pick]);
  }
  return c;
}

KMeansResult lloyd(std::span<const FeatureVec> pts, std::vector<FeatureVec> centres,
                   int max_iterations) {
  const size_t k = centres.size();
  std::vector<uint32_t> labels(pts.size(), UINT32_MAX);
  for (int it = 0; it < max_iterations; ++it) {
    bool changed = false;
    for (size_t i = 0; i < pts.size(); ++i) {
      const auto l = static_cast<uint32_t>(nearest(centres, pts[i], nullptr));
      if (l != labels[i]) {
        labels[i] = l;
        changed = true;
      }
    }
    if (!changed) break;
    std::vector<FeatureVec> sum(k, FeatureVec{0, 0, 0});
    std::vector<size_t> n(k, 0);
    for (size_t i = 0; i < pts.size(); ++i) {
      for (size_t d = 0; d < 3; ++d) sum[labels[i]][d] += pts[i][d];
      ++n[labels[i]];
    }
    for (size_t c = 0; c < k; ++c) {
      if (n[c] == 0) continue;  // an empty cluster keeps its centre
      for (size_t d = 0; d < 3; ++d) centres[c][d] = sum[c][d] / static_cast<double>(n[c]);
    }
  }
  KMeansResult r;
  r.centres = std::move(centres);
  r.labels = std::move(labels);
  return r;
}

}  // namespace

KMeansResult kmeans(std::span<const FeatureVec> pts, int k, std::mt19937_64& rng,
                    const KMeansOptions& opt) {
  if (k < 1 || static_cast<size_t>(k) > pts.size()) {
    throw std::invalid_argument("kmeans: k must be in [1, number of points]");
  }
  KMeansResult best;
  best.distortion = std::numeric_limits<double>::infinity();
  for (int rs = 0; rs < std::max(1, opt.restarts); ++rs) {
    KMeansResult r = lloyd(pts, seed_centres(pts, k, rng), opt.max_iterations);
    // Stable ids: sort the centres and relabel.
    std::vector<uint32_t> order(r.centres.size());
    for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(),
              [&](uint32_t a, uint32_t b) { return r.centres[a] < r.centres[b]; });
    std::vector<FeatureVec> sorted(order.size());
    std::vector<uint32_t> rank(order.size());
    for (uint32_t i = 0; i < order.size(); ++i) {
      sorted[i] = r.centres[order[i]];
      rank[order[i]] = i;
    }
    r.centres = std::move(sorted);
    double total = 0;
    for (size_t i = 0; i < pts.size(); ++i) {
      r.labels[i] = rank[r.labels[i]];
      total += squared_distance(pts[i], r.centres[r.labels[i]]);
    }
    r.distortion = total / static_cast<double>(pts.size());
    if (r.distortion < best.distortion - 1e-12) best = std::move(r);
  }
  return best;
}

std::vector<double> distortion_curve(std::span<const FeatureVec> pts, int k_max,
                                     std::mt19937_64& rng, const KMeansOptions& opt) {
  std::vector<double> out;
  const int top = std::min<int>(k_max, static_cast<int>(pts.size()));
  for (int k = 1; k <= top; ++k) out.push_back(kmeans(pts, k, rng, opt).distortion);
  return out;
}

int elbow_k(std::span<const double> d) {
  if (d.size() < 3) return 1;
  const double first = d.front(), last = d.back();
  const double span = first - last;
  if (span <= 0) return 1;
  const double n = static_cast<double>(d.size() - 1);
  int best = 1;
  double best_gap = -1;
  for (size_t i = 0; i < d.size(); ++i) {
    const double x = static_cast<double>(i) / n;
    const double y = (d[i] - last) / span;  // 1 at k = 1, 0 at k_max
    const double gap = (1.0 - x) - y;       // distance below the chord
    if (gap > best_gap + 1e-12) {
      best_gap = gap;
      best = static_cast<int>(i) + 1;
    }
  }
  return best;
}

}  // namespace tessera
