// Deterministic k-means (k-means++ seeding, Lloyd iterations, best of several restarts) and the
// elbow rule that picks k from the distortion curve. The random generator is injected; draws
// use only the raw 64-bit outputs of std::mt19937_64 (whose sequence the standard fixes), never
// a std:: distribution, so a seed gives the same clusters on every platform.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "insight/job_profile.h"

namespace tessera {

// Uniform in [0, 1) from the top 53 bits; uniform in [0, n) by rejection (n > 0).
double uniform01(std::mt19937_64& rng);
uint64_t uniform_below(std::mt19937_64& rng, uint64_t n);

double squared_distance(const FeatureVec& a, const FeatureVec& b);

struct KMeansResult {
  std::vector<FeatureVec> centres;  // sorted lexicographically, so ids are stable
  std::vector<uint32_t> labels;     // per point: index into centres
  double distortion = 0;            // mean squared distance of a point to its centre
};

struct KMeansOptions {
  int restarts = 8;
  int max_iterations = 100;
};

// Requires 1 <= k <= points.size().
KMeansResult kmeans(std::span<const FeatureVec> points, int k, std::mt19937_64& rng,
                    const KMeansOptions& opt = {});

// Distortion for k = 1 .. k_max (element i is k = i + 1); k_max is capped at points.size().
std::vector<double> distortion_curve(std::span<const FeatureVec> points, int k_max,
                                     std::mt19937_64& rng, const KMeansOptions& opt = {});

// The elbow ("knee") of a decreasing distortion curve: the k whose point lies farthest below
// the straight line from (1, d_1) to (k_max, d_kmax), both axes normalised to [0, 1]
// (Satopaa et al.'s Kneedle). Returns 1 for a curve of fewer than 3 points.
int elbow_k(std::span<const double> distortions);

}  // namespace tessera
