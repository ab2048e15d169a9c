// One behaviour suite run against every placement scorer, then what each one promises.
#include "engine/placement.h"

#include <gtest/gtest.h>

#include <set>

#include "test_util.h"

namespace tessera {
namespace {

using testing::fractional;
using testing::gang;

class EveryScorer : public ::testing::TestWithParam<std::string> {
 protected:
  std::unique_ptr<PlacementScorer> scorer = make_scorer(GetParam());
  Rng rng{7};
};

// Sum of shares per GPU never exceeds 1000, and members' shares lie on their node.
void expect_valid(const Cluster& c, const Allocation& a, const JobSpec& job, int members) {
  ASSERT_EQ(a.members(), members);
  ASSERT_EQ(a.shares.size(), static_cast<size_t>(members * job.demand.gpus));
  for (int m = 0; m < members; ++m) {
    std::set<GpuId> mine;
    for (int k = 0; k < job.demand.gpus; ++k) {
      const GpuShare& s = a.shares[m * job.demand.gpus + k];
      EXPECT_EQ(c.node_of_gpu(s.gpu), a.member_node[m]);
      EXPECT_EQ(s.milli, job.demand.gpu_milli);
      EXPECT_TRUE(mine.insert(s.gpu).second) << "member holds one GPU twice";
    }
  }
}

TEST_P(EveryScorer, PlacesAGangWholeAndAllocatesIt) {
  const Cluster c = make_uniform_cluster(1, 2, 2, 4);
  ClusterState s(c);
  const JobSpec job = gang("g", 6);
  Allocation a;
  ASSERT_TRUE(scorer->place(s, job, 6, rng, a));
  expect_valid(c, a, job, 6);
  EXPECT_EQ(s.allocated_milli(), 6000);
}

TEST_P(EveryScorer, AllOrNothingLeavesStateUnchanged) {
  const Cluster c = make_uniform_cluster(1, 1, 2, 4);
  ClusterState s(c);
  Allocation busy = testing::whole_gpus(c, 0, 0, 3);
  s.allocate(busy);
  const ClusterState before = s;
  // 5 free GPUs, gang of 3 members x 2 GPUs: only 2 members fit (1 + 4 free per node).
  const JobSpec job = gang("g", 3, 2);
  Allocation a;
  EXPECT_FALSE(scorer->place(s, job, 3, rng, a));
  EXPECT_TRUE(a.empty());
  for (GpuId g = 0; g < c.num_gpus(); ++g) EXPECT_EQ(s.gpu_free(g), before.gpu_free(g));
  EXPECT_EQ(s.allocated_milli(), before.allocated_milli());
}

TEST_P(EveryScorer, MultiGpuMembersStayOnOneNode) {
  const Cluster c = make_uniform_cluster(1, 1, 4, 8);
  ClusterState s(c);
  const JobSpec job = gang("g", 3, 4);
  Allocation a;
  ASSERT_TRUE(scorer->place(s, job, 3, rng, a));
  expect_valid(c, a, job, 3);
}

TEST_P(EveryScorer, FractionalSharesNeverOverCommit) {
  const Cluster c = make_uniform_cluster(1, 1, 1, 2);
  ClusterState s(c);
  int placed = 0;
  for (int i = 0; i < 10; ++i) {
    const JobSpec job = fractional("f" + std::to_string(i), 300);
    Allocation a;
    if (scorer->place(s, job, 1, rng, a)) {
      expect_valid(c, a, job, 1);
      ++placed;
    }
  }
  EXPECT_EQ(placed, 6);  // three 300-milli shares per GPU, two GPUs
  for (GpuId g = 0; g < c.num_gpus(); ++g) EXPECT_GE(s.gpu_free(g), 0);
}

TEST_P(EveryScorer, HonoursGpuTypeConstraints) {
  ClusterBuilder b;
  const GpuTypeId v100 = b.gpu_types().intern("V100");
  const GpuTypeId t4 = b.gpu_types().intern("T4");
  b.add_node("s", "r", "v", v100, 4, 64000, 1 << 20);
  b.add_node("s", "r", "t", t4, 4, 64000, 1 << 20);
  const Cluster c = b.build();
  ClusterState s(c);
  JobSpec job = gang("g", 2);
  job.allowed_types = GpuTypeMask{1} << t4;
  Allocation a;
  ASSERT_TRUE(scorer->place(s, job, 2, rng, a));
  for (NodeId n : a.member_node) EXPECT_EQ(c.node(n).gpu_type, t4);
  Allocation b2;
  EXPECT_FALSE(scorer->place(s, job, 3, rng, b2));  // only 2 T4 GPUs left
}

TEST_P(EveryScorer, RespectsCpuAndMemory) {
  const Cluster c = make_uniform_cluster(1, 1, 2, 8, "V100", 8000, 65536);
  ClusterState s(c);
  JobSpec job = gang("g", 3);
  job.demand.cpu_milli = 6000;  // one member per node by CPU
  Allocation a;
  EXPECT_FALSE(scorer->place(s, job, 3, rng, a));
  ASSERT_TRUE(scorer->place(s, job, 2, rng, a));
  EXPECT_NE(a.member_node[0], a.member_node[1]);
}

INSTANTIATE_TEST_SUITE_P(Placement, EveryScorer, ::testing::ValuesIn(scorer_names()));

TEST(Placement, BestFitPacksTheTightestNode) {
  const Cluster c = make_uniform_cluster(1, 1, 3, 4);
  ClusterState s(c);
  s.allocate(testing::whole_gpus(c, 1, 0, 2));  // node 1 has 2 free, others 4
  Rng rng(1);
  Allocation a;
  ASSERT_TRUE(make_bestfit_scorer()->place(s, gang("g", 2), 2, rng, a));
  EXPECT_EQ(a.member_node, (std::vector<NodeId>{1, 1}));
}

TEST(Placement, SpreadUsesTheEmptiestNodes) {
  const Cluster c = make_uniform_cluster(1, 1, 3, 4);
  ClusterState s(c);
  s.allocate(testing::whole_gpus(c, 1, 0, 2));
  Rng rng(1);
  Allocation a;
  ASSERT_TRUE(make_spread_scorer()->place(s, gang("g", 2), 2, rng, a));
  EXPECT_NE(a.member_node[0], 1u);
  EXPECT_NE(a.member_node[1], 1u);
  EXPECT_NE(a.member_node[0], a.member_node[1]);
}

TEST(Placement, TopologyKeepsAGangInOneRack) {
  // 2 racks x 4 nodes x 4 GPUs. Rack 0 has 2 free GPUs on each node (8 free), rack 1 is empty.
  const Cluster c = make_uniform_cluster(1, 2, 4, 4);
  ClusterState s(c);
  for (NodeId n = 0; n < 4; ++n) s.allocate(testing::whole_gpus(c, n, 0, 2));
  Rng rng(1);
  Allocation a;
  ASSERT_TRUE(make_topology_scorer()->place(s, gang("g", 8), 8, rng, a));
  std::set<NodeId> nodes(a.member_node.begin(), a.member_node.end());
  for (NodeId n : nodes) EXPECT_EQ(c.node(n).rack, c.node(*nodes.begin()).rack);
  // Smallest subtree: 8 GPUs fit in rack 0 (fewest free that fits), over 4 nodes.
  EXPECT_EQ(c.node(*nodes.begin()).rack, 0u);
}

TEST(Placement, TopologyPrefersOneNodeOverARack) {
  const Cluster c = make_uniform_cluster(1, 1, 4, 8);
  ClusterState s(c);
  s.allocate(testing::whole_gpus(c, 0, 0, 4));
  s.allocate(testing::whole_gpus(c, 2, 0, 2));
  Rng rng(1);
  Allocation a;
  ASSERT_TRUE(make_topology_scorer()->place(s, gang("g", 4), 4, rng, a));
  // Node 0 has exactly 4 free: the tightest single node.
  EXPECT_EQ(a.member_node, (std::vector<NodeId>{0, 0, 0, 0}));
}

TEST(Placement, RandomIsDeterministicForASeed) {
  const Cluster c = make_uniform_cluster(1, 4, 8, 8);
  auto place_with = [&](uint64_t seed) {
    ClusterState s(c);
    Rng rng(seed);
    Allocation a;
    EXPECT_TRUE(make_random_scorer()->place(s, gang("g", 5), 5, rng, a));
    return a.member_node;
  };
  EXPECT_EQ(place_with(3), place_with(3));
}

}  // namespace
}  // namespace tessera
