// Water-filling fair shares over the queue tree.
#include "engine/fair_share.h"

#include "test_util.h"

#include <gtest/gtest.h>

#include <cmath>

namespace tessera {
namespace {

Amounts gpus(double n) {
  return Amounts{std::llround(n * kMilliPerGpu), 0, 0};
}

std::vector<Amounts> fill(const QueueTree& t, double capacity, std::vector<double> demand) {
  std::vector<Amounts> d(t.size(), kZeroAmounts);
  for (size_t i = 0; i < demand.size(); ++i) d[i + 1] = gpus(demand[i]);
  return water_fill(t, gpus(capacity), d);
}

double gpus_of(const Amounts& a) {
  return static_cast<double>(a[kGpuDim]) / kMilliPerGpu;
}

TEST(WaterFill, WithoutGuaranteesSharesFollowWeights) {
  QueueTree t;
  t.add(kRootQueue, testing::queue_spec("a", 1));
  t.add(kRootQueue, testing::queue_spec("b", 3));
  t.finish();
  const auto e = fill(t, 100, {1000, 1000});
  EXPECT_DOUBLE_EQ(gpus_of(e[1]), 25);
  EXPECT_DOUBLE_EQ(gpus_of(e[2]), 75);
}

TEST(WaterFill, WhatOneQueueDoesNotWantFlowsToTheOthers) {
  QueueTree t;
  t.add(kRootQueue, testing::queue_spec("a"));
  t.add(kRootQueue, testing::queue_spec("b"));
  t.add(kRootQueue, testing::queue_spec("c"));
  t.finish();
  const auto e = fill(t, 90, {10, 1000, 1000});
  EXPECT_DOUBLE_EQ(gpus_of(e[1]), 10);
  EXPECT_DOUBLE_EQ(gpus_of(e[2]), 40);
  EXPECT_DOUBLE_EQ(gpus_of(e[3]), 40);
}

TEST(WaterFill, GuaranteesComeFirstThenWeights) {
  QueueTree t;
  t.add(kRootQueue, testing::queue_spec("prod", 1, 60));
  t.add(kRootQueue, testing::queue_spec("research", 1, 0));
  t.finish();
  // Both want everything: prod gets its 60 plus half of the remaining 40.
  auto e = fill(t, 100, {1000, 1000});
  EXPECT_DOUBLE_EQ(gpus_of(e[1]), 80);
  EXPECT_DOUBLE_EQ(gpus_of(e[2]), 20);
  // An idle guarantee is lent: prod wants 5, research may have the other 95.
  e = fill(t, 100, {5, 1000});
  EXPECT_DOUBLE_EQ(gpus_of(e[1]), 5);
  EXPECT_DOUBLE_EQ(gpus_of(e[2]), 95);
}

TEST(WaterFill, LimitsCapAndTheRestGoesElsewhere) {
  QueueTree t;
  t.add(kRootQueue, testing::queue_spec("a", 1, 0, 10));
  t.add(kRootQueue, testing::queue_spec("b"));
  t.finish();
  const auto e = fill(t, 100, {1000, 1000});
  EXPECT_DOUBLE_EQ(gpus_of(e[1]), 10);
  EXPECT_DOUBLE_EQ(gpus_of(e[2]), 90);
}

TEST(WaterFill, HierarchyDividesTheParentsShare) {
  QueueTree t;
  const QueueId research = t.add(kRootQueue, testing::queue_spec("research", 1));
  t.add(kRootQueue, testing::queue_spec("prod", 1));
  t.add(research, testing::queue_spec("nlp", 1));
  t.add(research, testing::queue_spec("vision", 1));
  t.finish();
  std::vector<Amounts> d(t.size(), kZeroAmounts);
  d[2] = gpus(1000);  // prod
  d[3] = gpus(1000);  // research/nlp
  d[4] = gpus(1000);  // research/vision
  const auto e = water_fill(t, gpus(64), d);
  EXPECT_DOUBLE_EQ(gpus_of(e[1]), 32);
  EXPECT_DOUBLE_EQ(gpus_of(e[2]), 32);
  EXPECT_DOUBLE_EQ(gpus_of(e[3]), 16);
  EXPECT_DOUBLE_EQ(gpus_of(e[4]), 16);
}

TEST(WaterFill, GuaranteesLargerThanTheClusterScaleDown) {
  QueueTree t;
  t.add(kRootQueue, testing::queue_spec("a", 1, 60));
  t.add(kRootQueue, testing::queue_spec("b", 1, 40));
  t.finish();
  const auto e = fill(t, 50, {1000, 1000});  // half the nodes are gone
  EXPECT_DOUBLE_EQ(gpus_of(e[1]), 30);
  EXPECT_DOUBLE_EQ(gpus_of(e[2]), 20);
}

TEST(WaterFill, NeverHandsOutMoreThanCapacityOrDemand) {
  QueueTree t;
  for (int i = 0; i < 7; ++i)
    t.add(kRootQueue, testing::queue_spec("q" + std::to_string(i), 1 + i % 3, i % 2));
  t.finish();
  for (double cap : {0.0, 1.0, 7.5, 13.0, 100.0}) {
    const std::vector<double> demand = {0.5, 3, 0, 12, 1.001, 40, 2};
    const auto e = fill(t, cap, demand);
    int64_t total = 0, want = 0;
    for (size_t i = 0; i < demand.size(); ++i) {
      EXPECT_LE(e[i + 1][kGpuDim], gpus(demand[i])[kGpuDim]);
      total += e[i + 1][kGpuDim];
      want += gpus(demand[i])[kGpuDim];
    }
    // Water-filling is work-conserving: all capacity is handed out, or all demand is met.
    EXPECT_EQ(total, std::min(gpus(cap)[kGpuDim], want)) << "capacity " << cap;
  }
}

// With room for every queue's demand, each is entitled to all of it (up to its limit), whatever
// the weights and guarantees and however many queues there are.
TEST(WaterFill, WithRoomForAllEachGetsWhatItWants) {
  QueueTree t;
  const int n = 40;
  for (int i = 0; i < n; ++i) {
    QueueSpec q = testing::queue_spec("q" + std::to_string(i), 1 + i % 3, i % 4);
    if (i % 5 == 1) q.limit[kGpuDim] = q.guarantee[kGpuDim] + 2 * kMilliPerGpu;
    t.add(kRootQueue, q);
  }
  t.finish();
  std::vector<double> demand;
  double total = 0;
  for (int i = 0; i < n; ++i) {
    demand.push_back(0.5 * (i % 9));
    total += demand.back();
  }
  for (double cap : {total, total + 3, 10 * total}) {
    const auto e = fill(t, cap, demand);
    for (int i = 0; i < n; ++i) {
      const QueueSpec& q = t.queue(static_cast<QueueId>(i + 1));
      const int64_t want = std::min(gpus(demand[i])[kGpuDim], q.limit[kGpuDim]);
      EXPECT_EQ(e[i + 1][kGpuDim], want) << "queue " << i << " capacity " << cap;
    }
  }
}

TEST(DominantRatio, IsTheLargestUsageOverEntitlement) {
  EXPECT_DOUBLE_EQ(dominant_ratio(Amounts{500, 3000, 0}, Amounts{1000, 4000, 0}), 0.75);
  EXPECT_DOUBLE_EQ(dominant_ratio(kZeroAmounts, kZeroAmounts), 0.0);
  EXPECT_TRUE(std::isinf(dominant_ratio(Amounts{1, 0, 0}, kZeroAmounts)));
}

}  // namespace
}  // namespace tessera
