// The communication cost model against values computed by hand (the arithmetic is in each
// test's comment) and the topology levels a placement crosses.
#include <gtest/gtest.h>

#include <cmath>

#include "insight/comm_cost.h"
#include "model/cluster_spec.h"
#include "test_util.h"

namespace tessera {
namespace {

// 100 GB/s, 10 µs: α = 1e-5 s, β = 1e-11 s/B.
const LinkCost kLink = link_cost(100.0, 10.0);

TEST(CommCost, LinkCostFromBandwidthAndLatency) {
  EXPECT_DOUBLE_EQ(kLink.alpha_s, 1e-5);
  EXPECT_DOUBLE_EQ(kLink.beta_s_per_byte, 1e-11);
  EXPECT_DOUBLE_EQ(kLink.message_s(1e9), 1e-5 + 0.01);
  // Eight flows on a 200 GB/s NIC: 25 GB/s each, β = 4e-11; α unchanged.
  const LinkCost nic = shared(link_cost(200.0, 5.0), 8);
  EXPECT_DOUBLE_EQ(nic.beta_s_per_byte, 4e-11);
  EXPECT_DOUBLE_EQ(nic.alpha_s, 5e-6);
  EXPECT_TRUE(std::isinf(link_cost(0.0, 1.0).beta_s_per_byte));
}

TEST(CommCost, RingAllReduceMatchesTheFormula) {
  // 2(p-1)α + 2(p-1)(n/p)β, n = 1 GB, p = 4: 6·1e-5 + 6·2.5e8·1e-11 = 6e-5 + 0.015.
  EXPECT_NEAR(ring_allreduce_s(1e9, 4, kLink), 0.01506, 1e-12);
  // p = 2: 2·1e-5 + 2·5e8·1e-11 = 0.01002.
  EXPECT_NEAR(ring_allreduce_s(1e9, 2, kLink), 0.01002, 1e-12);
  EXPECT_EQ(ring_allreduce_s(1e9, 1, kLink), 0);
  EXPECT_EQ(ring_allreduce_s(1e9, 0, kLink), 0);
  // Half of it each: (p-1)α + (p-1)(n/p)β = 3e-5 + 0.0075.
  EXPECT_NEAR(ring_reduce_scatter_s(1e9, 4, kLink), 0.00753, 1e-12);
  EXPECT_NEAR(ring_all_gather_s(1e9, 4, kLink), 0.00753, 1e-12);
  // The bandwidth term approaches 2n·β as p grows (bandwidth optimality).
  EXPECT_NEAR(ring_allreduce_s(1e9, 1024, link_cost(100.0, 0.0)), 2 * 0.01 * 1023 / 1024, 1e-12);
}

TEST(CommCost, RingRunsAtItsSlowestLevel) {
  ClusterBuilder b;  // default links: 300, 32, 12.5, 12.5, 6.25 GB/s
  b.add_node("s", "r", "n0", 0, 8, 1000, 1024);
  const CommLevels levels = comm_levels(b.build());
  // n = 1.6 GB over 8 ranks crossing nodes of a rack (12.5 GB/s, 5 µs):
  // 14·5e-6 + 14·2e8/12.5e9 = 7e-5 + 0.224.
  EXPECT_NEAR(ring_allreduce_s(1.6e9, 8, levels, Level::kRack), 0.22407, 1e-12);
  // Inside one NVLink domain (300 GB/s, 1 µs): 14e-6 + 14·2e8/300e9.
  EXPECT_NEAR(ring_allreduce_s(1.6e9, 8, levels, Level::kNvlDomain), 14e-6 + 2.8e9 / 300e9, 1e-12);
}

TEST(CommCost, HierarchicalAllReduce) {
  // n = 1 GB, 8 GPUs per node over NVLink (300 GB/s, 1 µs), 4 nodes, the 8 shard rings
  // sharing a 200 GB/s NIC (5 µs) so β_out = 8/200e9 = 4e-11:
  //   inside: 2·(7·1e-6 + 7·1.25e8/300e9) = 2·(7e-6 + 2.9166667e-3)
  //   across: ring of n/8 = 1.25e8 over 4 nodes: 6·5e-6 + 6·3.125e7·4e-11 = 3e-5 + 7.5e-3
  const LinkCost nvl = link_cost(300.0, 1.0);
  const LinkCost nic = shared(link_cost(200.0, 5.0), 8);
  const double expected = 2 * (7e-6 + 7 * 1.25e8 / 300e9) + 3e-5 + 7.5e-3;
  EXPECT_NEAR(hierarchical_allreduce_s(1e9, 8, 4, nvl, nic), expected, 1e-12);
  EXPECT_NEAR(expected, 0.0133773, 1e-6);
  // One rank per node: a plain ring across nodes. One node: reduce-scatter + all-gather.
  EXPECT_DOUBLE_EQ(hierarchical_allreduce_s(1e9, 1, 4, nvl, kLink),
                   ring_allreduce_s(1e9, 4, kLink));
  EXPECT_DOUBLE_EQ(hierarchical_allreduce_s(1e9, 8, 1, nvl, kLink), ring_allreduce_s(1e9, 8, nvl));
  // Against a flat ring over the slowest link the hierarchy saves the latency steps.
  const double flat = ring_allreduce_s(1e9, 32, nic);
  EXPECT_LT(hierarchical_allreduce_s(1e9, 8, 4, nvl, nic), flat);
}

TEST(CommCost, ParameterServerPushPull) {
  // 8 workers, 2 servers, n = 1 GB, 10 GB/s (β = 1e-10), 10 µs: a server moves 8·1/2 = 4 GB
  // each way: 2·(1e-5 + 0.4).
  const LinkCost ten = link_cost(10.0, 10.0);
  EXPECT_NEAR(ps_push_pull_s(1e9, 8, 2, ten), 0.80002, 1e-12);
  // 16 servers: each moves 0.5 GB, so the worker's 1 GB is the bottleneck: 2·(1e-5 + 0.1).
  EXPECT_NEAR(ps_push_pull_s(1e9, 8, 16, ten), 0.20002, 1e-12);
  EXPECT_EQ(ps_push_pull_s(1e9, 0, 2, ten), 0);
}

TEST(CommCost, LevelsFromExplicitLinksWithOversubscription) {
  // The defaults are set_default_links': a cluster's levels and the spec's agree.
  ClusterBuilder b;
  b.add_node("s", "r", "n0", 0, 8, 1000, 1024);
  const CommLevels from_cluster = comm_levels(b.build());
  const CommLevels from_spec = comm_levels(InterconnectSpec{});
  for (int l = 0; l < kNumLevels; ++l) {
    EXPECT_DOUBLE_EQ(from_cluster.level[l].alpha_s, from_spec.level[l].alpha_s) << l;
    EXPECT_DOUBLE_EQ(from_cluster.level[l].beta_s_per_byte, from_spec.level[l].beta_s_per_byte)
        << l;
  }
  // 25 GB/s NICs under a 4:1 oversubscribed rack uplink: 6.25 GB/s between racks; a 2:1 spine
  // above halves that again. Never faster than the level below.
  InterconnectSpec s;
  s.node_nic = s.rack_uplink = s.spine = {25.0, 5.0};
  s.rack_oversubscription = 4;
  s.spine_oversubscription = 2;
  const CommLevels c = comm_levels(s);
  EXPECT_DOUBLE_EQ(c.at(Level::kRack).beta_s_per_byte, 1 / 25e9);
  EXPECT_DOUBLE_EQ(c.at(Level::kSpine).beta_s_per_byte, 1 / 6.25e9);
  EXPECT_DOUBLE_EQ(c.at(Level::kCluster).beta_s_per_byte, 1 / 6.25e9);
  s.spine_oversubscription = 8;  // 25 / 8 = 3.125 GB/s
  EXPECT_DOUBLE_EQ(comm_levels(s).at(Level::kCluster).beta_s_per_byte, 1 / 3.125e9);
}

TEST(CommCost, OutermostLevelAPlacementCrosses) {
  // 2 spines x 2 racks x 2 nodes x 8 GPUs, NVLink domains of 4.
  const Cluster c = make_uniform_cluster(2, 2, 2, 8, "A100-80G", 64000, 512 * 1024, 4);
  const auto gpus_on = [&](std::vector<std::pair<NodeId, int>> members) {
    Allocation a;
    a.gpus_per_member = 1;
    for (auto [n, g] : members) {
      a.member_node.push_back(n);
      a.shares.push_back({c.node(n).first_gpu + static_cast<GpuId>(g), 1000});
    }
    return a;
  };
  EXPECT_EQ(outermost_level(c, gpus_on({{0, 0}, {0, 3}})), Level::kNvlDomain);
  EXPECT_EQ(outermost_level(c, gpus_on({{0, 3}, {0, 4}})), Level::kNode);
  EXPECT_EQ(outermost_level(c, gpus_on({{0, 0}, {1, 0}})), Level::kRack);
  EXPECT_EQ(outermost_level(c, gpus_on({{0, 0}, {2, 0}})), Level::kSpine);
  EXPECT_EQ(outermost_level(c, gpus_on({{0, 0}, {4, 0}})), Level::kCluster);
  EXPECT_EQ(outermost_level(c, Allocation{}), Level::kNvlDomain);
  EXPECT_EQ(outermost_level(3, 1, 1, false), Level::kRack);
  EXPECT_EQ(outermost_level(1, 1, 1, true), Level::kNode);
}

}  // namespace
}  // namespace tessera
