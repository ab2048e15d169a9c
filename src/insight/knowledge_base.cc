#include "insight/knowledge_base.h"

#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>

namespace tessera {

KnowledgeBase KnowledgeBase::build(std::span<const JobFeatures> jobs,
                                   const KnowledgeBaseOptions& opt) {
  if (jobs.empty()) throw std::invalid_argument("knowledge base: no jobs to cluster");
  std::vector<FeatureVec> pts;
  pts.reserve(jobs.size());
  for (const JobFeatures& f : jobs) pts.push_back(to_vec(f));
  std::mt19937_64 rng(opt.seed);
  KnowledgeBase kb;
  int k = opt.k;
  if (k <= 0) {
    kb.distortions_ = distortion_curve(pts, opt.k_max, rng, opt.kmeans);
    k = elbow_k(kb.distortions_);
  }
  k = std::min<int>(k, static_cast<int>(pts.size()));
  const KMeansResult r = kmeans(pts, k, rng, opt.kmeans);
  kb.centres_ = r.centres;
  kb.sizes_.assign(r.centres.size(), 0);
  for (size_t i = 0; i < pts.size(); ++i) {
    ++kb.sizes_[r.labels[i]];
    kb.training_.push_back(
        {r.labels[i], std::sqrt(squared_distance(pts[i], r.centres[r.labels[i]]))});
  }
  return kb;
}

KnowledgeBase KnowledgeBase::from_centres(std::vector<FeatureVec> centres) {
  KnowledgeBase kb;
  kb.sizes_.assign(centres.size(), 1);
  kb.centres_ = std::move(centres);
  return kb;
}

ClusterAssignment KnowledgeBase::assign(const JobFeatures& f) const {
  const FeatureVec p = to_vec(f);
  ClusterAssignment a;
  double best = std::numeric_limits<double>::infinity();
  for (size_t c = 0; c < centres_.size(); ++c) {
    const double d = squared_distance(p, centres_[c]);
    if (d < best) {
      best = d;
      a.cluster = static_cast<uint32_t>(c);
    }
  }
  a.uncertainty = std::sqrt(best);
  return a;
}

ClusterAssignment KnowledgeBase::add(const JobFeatures& f) {
  const ClusterAssignment a = assign(f);
  const FeatureVec p = to_vec(f);
  FeatureVec& c = centres_[a.cluster];
  const double n = static_cast<double>(++sizes_[a.cluster]);
  for (size_t d = 0; d < c.size(); ++d) c[d] += (p[d] - c[d]) / n;
  return a;
}

}  // namespace tessera
