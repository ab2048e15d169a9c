// The recommendation service's knowledge base: profiler peaks, k-means, the elbow, and online
// assignment with an uncertainty score.
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <vector>

#include "insight/job_profile.h"
#include "insight/kmeans.h"
#include "insight/knowledge_base.h"

namespace tessera {
namespace {

// `per` points around each centre, uniformly within +-spread on every axis.
std::vector<FeatureVec> blobs(const std::vector<FeatureVec>& centres, int per, double spread,
                              uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<FeatureVec> out;
  for (const FeatureVec& c : centres) {
    for (int i = 0; i < per; ++i) {
      FeatureVec p;
      for (size_t d = 0; d < 3; ++d) p[d] = c[d] + (2 * uniform01(rng) - 1) * spread;
      out.push_back(p);
    }
  }
  return out;
}

TEST(JobProfile, KeepsThePeaksOfTheFirstMinutesOnly) {
  Profiler p(300);
  p.add({0, 20, 10, 5});
  p.add({60, 80, 30, 40});
  p.add({120, 50, 60, 10});
  EXPECT_FALSE(p.complete());
  p.add({400, 100, 100, 100});  // after the window: ignored
  EXPECT_TRUE(p.complete());
  EXPECT_EQ(p.samples(), 3);
  EXPECT_DOUBLE_EQ(p.features().gpu_util, 80);
  EXPECT_DOUBLE_EQ(p.features().mem_alloc, 60);
  EXPECT_DOUBLE_EQ(p.features().mem_time, 40);
}

TEST(KMeans, RecoversSeparableClusters) {
  const std::vector<FeatureVec> centres = {{10, 10, 10}, {50, 60, 30}, {90, 20, 70}};
  const auto pts = blobs(centres, 20, 3, 7);
  std::mt19937_64 rng(1);
  const KMeansResult r = kmeans(pts, 3, rng);
  std::set<uint32_t> labels;
  for (int b = 0; b < 3; ++b) {
    const uint32_t l = r.labels[static_cast<size_t>(b * 20)];
    labels.insert(l);
    for (int i = 0; i < 20; ++i) EXPECT_EQ(r.labels[static_cast<size_t>(b * 20 + i)], l);
    for (size_t d = 0; d < 3; ++d) EXPECT_NEAR(r.centres[l][d], centres[b][d], 2.0);
  }
  EXPECT_EQ(labels.size(), 3u);
}

TEST(KMeans, SameSeedSameClusters) {
  const auto pts = blobs({{10, 10, 10}, {60, 60, 60}}, 15, 10, 3);
  std::mt19937_64 a(5), b(5);
  const KMeansResult x = kmeans(pts, 4, a), y = kmeans(pts, 4, b);
  EXPECT_EQ(x.labels, y.labels);
  EXPECT_EQ(x.centres, y.centres);
}

TEST(KMeans, ElbowPicksTheGeneratedNumberOfClusters) {
  for (int k : {2, 3, 4}) {
    std::vector<FeatureVec> centres = {{10, 10, 10}, {80, 20, 50}, {30, 85, 20}, {70, 70, 90}};
    centres.resize(static_cast<size_t>(k));
    const auto pts = blobs(centres, 25, 4, 11);
    std::mt19937_64 rng(2);
    const auto curve = distortion_curve(pts, 10, rng);
    ASSERT_EQ(curve.size(), 10u);
    for (size_t i = 1; i < curve.size(); ++i) EXPECT_LE(curve[i], curve[i - 1] + 1e-9);
    EXPECT_EQ(elbow_k(curve), k);
  }
}

TEST(KnowledgeBase, BuildChoosesKByTheElbowAndAssignsEveryJob) {
  const auto pts = blobs({{15, 5, 3}, {55, 40, 20}, {85, 60, 45}}, 30, 5, 4);
  std::vector<JobFeatures> jobs;
  for (const auto& p : pts) jobs.push_back(from_vec(p));
  KnowledgeBaseOptions o;
  o.k_max = 8;
  const KnowledgeBase kb = KnowledgeBase::build(jobs, o);
  EXPECT_EQ(kb.k(), 3u);
  EXPECT_EQ(kb.distortions().size(), 8u);
  ASSERT_EQ(kb.training().size(), jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_EQ(kb.training()[i].cluster, kb.assign(jobs[i]).cluster);
  }
}

TEST(KnowledgeBase, OnlineAssignmentIsNearestCentreWithGrowingUncertainty) {
  KnowledgeBase kb = KnowledgeBase::from_centres({{0, 0, 0}, {50, 50, 50}});
  const auto near = kb.assign({10, 0, 0});
  const auto far = kb.assign({20, 0, 0});
  EXPECT_EQ(near.cluster, 0u);
  EXPECT_EQ(far.cluster, 0u);
  EXPECT_DOUBLE_EQ(near.uncertainty, 10);
  EXPECT_GT(far.uncertainty, near.uncertainty);
  EXPECT_EQ(kb.assign({45, 50, 50}).cluster, 1u);
  // Adding a job moves its centre to the running mean of the members.
  kb.add({20, 0, 0});
  EXPECT_DOUBLE_EQ(kb.centres()[0][0], 10);
  EXPECT_EQ(kb.sizes()[0], 2u);
}

}  // namespace
}  // namespace tessera
