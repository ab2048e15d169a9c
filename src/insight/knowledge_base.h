// The recommendation service's knowledge base: k-means clusters of job features (peak GPU
// utilisation, peak memory allocated, peak time accessing memory), k chosen by the elbow of the
// distortion curve. Every job is assigned the nearest cluster and an uncertainty score, its
// distance to that cluster's centre; new jobs are assigned online.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "insight/job_profile.h"
#include "insight/kmeans.h"

namespace tessera {

struct ClusterAssignment {
  uint32_t cluster = 0;
  double uncertainty = 0;  // Euclidean distance to the centre, in percentage points
};

struct KnowledgeBaseOptions {
  int k = 0;  // 0: the elbow of the distortion curve over k = 1 .. k_max
  int k_max = 10;
  uint64_t seed = 1;
  KMeansOptions kmeans;
};

class KnowledgeBase {
 public:
  // Throws std::invalid_argument on an empty feature set.
  static KnowledgeBase build(std::span<const JobFeatures> jobs, const KnowledgeBaseOptions& opt);
  // A knowledge base with the given centres (each with one member), e.g. for tests.
  static KnowledgeBase from_centres(std::vector<FeatureVec> centres);

  size_t k() const { return centres_.size(); }
  const std::vector<FeatureVec>& centres() const { return centres_; }
  const std::vector<size_t>& sizes() const { return sizes_; }
  // Distortion for k = 1 .. k_max when k was chosen by the elbow; empty when k was given.
  const std::vector<double>& distortions() const { return distortions_; }
  // Assignments of the jobs the base was built from, in their order.
  const std::vector<ClusterAssignment>& training() const { return training_; }

  // The nearest centre and the distance to it.
  ClusterAssignment assign(const JobFeatures& f) const;
  // Online: assigns a new job, then moves its cluster's centre to the running mean of its
  // members (MacQueen's update), so the base follows the workload it sees.
  ClusterAssignment add(const JobFeatures& f);

 private:
  std::vector<FeatureVec> centres_;
  std::vector<size_t> sizes_;
  std::vector<double> distortions_;
  std::vector<ClusterAssignment> training_;
};

}  // namespace tessera
