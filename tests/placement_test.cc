// One behaviour suite run against every placement scorer, then what each one promises.
#include "engine/placement.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "cli_util.h"
#include "engine/admission.h"
#include "model/input_error.h"
#include "model/node_set.h"
#include "sim/trace_readers.h"
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

JobSpec with_span(JobSpec job, Level span) {
  job.max_span = span;
  return job;
}

std::set<RackId> racks_of(const Cluster& c, const Allocation& a) {
  std::set<RackId> racks;
  for (NodeId n : a.member_node) racks.insert(c.node(n).rack);
  return racks;
}

TEST_P(EveryScorer, SpanRackKeepsTheGangInOneRack) {
  // 2 racks x 2 nodes x 4 GPUs; rack 0 has 4 free GPUs (2 per node), rack 1 has 8.
  const Cluster c = make_uniform_cluster(1, 2, 2, 4);
  ClusterState s(c);
  s.allocate(testing::whole_gpus(c, 0, 0, 2));
  s.allocate(testing::whole_gpus(c, 1, 0, 2));
  const JobSpec job = with_span(gang("g", 6), Level::kRack);
  Allocation a;
  ASSERT_TRUE(scorer->place(s, job, 6, rng, a));
  expect_valid(c, a, job, 6);
  EXPECT_EQ(racks_of(c, a), (std::set<RackId>{1}));
  // Now rack 0 has 4 free and rack 1 has 2: a gang of 5 does not fit one rack although 6 GPUs
  // are free in the cluster; a gang of 4 goes to rack 0.
  const ClusterState before = s;
  Allocation b;
  EXPECT_FALSE(scorer->place(s, with_span(gang("h", 5), Level::kRack), 5, rng, b));
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(s.allocated_milli(), before.allocated_milli());
  for (GpuId g = 0; g < c.num_gpus(); ++g) EXPECT_EQ(s.gpu_free(g), before.gpu_free(g));
  Allocation d;
  ASSERT_TRUE(scorer->place(s, with_span(gang("i", 4), Level::kRack), 4, rng, d));
  EXPECT_EQ(racks_of(c, d), (std::set<RackId>{0}));
}

TEST_P(EveryScorer, SpanNodeKeepsTheGangOnOneNode) {
  const Cluster c = make_uniform_cluster(1, 1, 3, 4);
  ClusterState s(c);
  s.allocate(testing::whole_gpus(c, 0, 0, 2));
  s.allocate(testing::whole_gpus(c, 2, 0, 3));
  const JobSpec job = with_span(gang("g", 3), Level::kNode);
  Allocation a;
  ASSERT_TRUE(scorer->place(s, job, 3, rng, a));
  expect_valid(c, a, job, 3);
  EXPECT_EQ(a.member_node, (std::vector<NodeId>{1, 1, 1}));
}

TEST_P(EveryScorer, SpanNvlinkKeepsTheGangInOneDomain) {
  // One node of 8 GPUs in two NVLink domains of 4; GPUs 0 and 4 are busy, so no domain has
  // more than 3 free although the node has 6.
  const Cluster c = make_uniform_cluster(1, 1, 1, 8, "V100", 64000, 512 * 1024, 4);
  ClusterState s(c);
  s.allocate(testing::whole_gpus(c, 0, 0, 1));
  s.allocate(testing::whole_gpus(c, 0, 4, 1));
  const JobSpec job = with_span(gang("g", 3), Level::kNvlDomain);
  Allocation a;
  ASSERT_TRUE(scorer->place(s, job, 3, rng, a));
  expect_valid(c, a, job, 3);
  std::set<GpuId> domains;
  for (const GpuShare& g : a.shares) domains.insert(g.gpu / 4);
  EXPECT_EQ(domains.size(), 1u);
  Allocation b;
  EXPECT_FALSE(scorer->place(s, with_span(gang("h", 4), Level::kNvlDomain), 4, rng, b));
}

// ---- node restriction (JobSpec::eligible_nodes) ----

JobSpec only_on(JobSpec job, std::initializer_list<NodeId> nodes) {
  job.eligible_nodes = std::make_shared<const NodeSet>(nodes);
  return job;
}

void expect_only_on(const Allocation& a, const NodeSet& nodes) {
  for (NodeId n : a.member_node) EXPECT_TRUE(nodes.contains(n)) << "member on node " << n;
}

void expect_same_state(const ClusterState& s, const ClusterState& before) {
  EXPECT_EQ(s.allocated_milli(), before.allocated_milli());
  for (GpuId g = 0; g < s.cluster().num_gpus(); ++g) EXPECT_EQ(s.gpu_free(g), before.gpu_free(g));
  for (NodeId n = 0; n < s.cluster().nodes().size(); ++n) {
    EXPECT_EQ(s.node_free_cpu(n), before.node_free_cpu(n));
    EXPECT_EQ(s.node_free_mem(n), before.node_free_mem(n));
  }
}

TEST_P(EveryScorer, RestrictedWholeGpuGangsLandOnlyOnEligibleNodes) {
  // 2 racks x 2 nodes x 4 GPUs, all free; the jobs may use nodes 1 and 3 only.
  const Cluster c = make_uniform_cluster(1, 2, 2, 4);
  ClusterState s(c);
  // A multi-node gang of 2-GPU members: 6 of the 8 GPUs on nodes 1 and 3.
  const JobSpec multi = only_on(gang("m", 3, 2), {1, 3});
  Allocation a;
  ASSERT_TRUE(scorer->place(s, multi, 3, rng, a));
  expect_valid(c, a, multi, 3);
  expect_only_on(a, *multi.eligible_nodes);
  // A gang of single GPUs takes the last 2.
  const JobSpec small = only_on(gang("s", 2), {1, 3});
  Allocation b;
  ASSERT_TRUE(scorer->place(s, small, 2, rng, b));
  expect_valid(c, b, small, 2);
  expect_only_on(b, *small.eligible_nodes);
  // Nothing left on nodes 1 and 3, 8 GPUs free elsewhere: a restricted job does not fit, and
  // the state is as it was.
  const ClusterState before = s;
  Allocation d;
  EXPECT_FALSE(scorer->place(s, only_on(gang("x", 1), {1, 3}), 1, rng, d));
  EXPECT_TRUE(d.empty());
  expect_same_state(s, before);
}

TEST_P(EveryScorer, RestrictionThatLeavesTooLittleFailsAndLeavesStateUnchanged) {
  const Cluster c = make_uniform_cluster(1, 1, 3, 4);
  ClusterState s(c);
  s.allocate(testing::whole_gpus(c, 1, 0, 1));
  const ClusterState before = s;
  // 11 GPUs free, 7 of them on nodes 0 and 1: a gang of 8 does not fit there.
  Allocation a;
  EXPECT_FALSE(scorer->place(s, only_on(gang("g", 8), {0, 1}), 8, rng, a));
  EXPECT_TRUE(a.empty());
  expect_same_state(s, before);
  // ... nor does a span-constrained one, nor a set no node of the cluster is in.
  EXPECT_FALSE(scorer->place(s, with_span(only_on(gang("r", 8), {0, 1}), Level::kRack), 8, rng, a));
  EXPECT_FALSE(scorer->place(s, only_on(gang("n", 1), {7, 100}), 1, rng, a));
  EXPECT_FALSE(scorer->place(s, only_on(gang("e", 1), {}), 1, rng, a));
  expect_same_state(s, before);
  // 7 do.
  ASSERT_TRUE(scorer->place(s, only_on(gang("g", 7), {0, 1}), 7, rng, a));
  expect_only_on(a, NodeSet{0, 1});
}

TEST_P(EveryScorer, RestrictedFractionalSharesStayOnEligibleNodes) {
  // Two nodes of one GPU; node 0's GPU is partly used, so packing would prefer it.
  const Cluster c = make_uniform_cluster(1, 1, 2, 1);
  ClusterState s(c);
  Allocation half;
  half.gpus_per_member = 1;
  half.member_node = {0};
  half.shares = {{c.node(0).first_gpu, 500}};
  s.allocate(half);
  int placed = 0;
  for (int i = 0; i < 5; ++i) {
    const JobSpec job = only_on(fractional("f" + std::to_string(i), 300), {1});
    Allocation a;
    if (scorer->place(s, job, 1, rng, a)) {
      expect_valid(c, a, job, 1);
      expect_only_on(a, *job.eligible_nodes);
      ++placed;
    }
  }
  EXPECT_EQ(placed, 3);  // three 300-milli shares on node 1's GPU
  EXPECT_EQ(s.gpu_free(c.node(0).first_gpu), 500);
}

TEST_P(EveryScorer, RestrictedCpuOnlyMembersStayOnEligibleNodes) {
  const Cluster c = make_uniform_cluster(1, 1, 3, 4, "V100", 8000, 65536);
  ClusterState s(c);
  JobSpec job = only_on(gang("cpu", 3, 0), {2});
  job.demand.cpu_milli = 2000;
  Allocation a;
  ASSERT_TRUE(scorer->place(s, job, 3, rng, a));
  expect_valid(c, a, job, 3);
  EXPECT_EQ(a.member_node, (std::vector<NodeId>{2, 2, 2}));
  // Node 2 has room for one more member of 2000 mCPU, not two.
  const ClusterState before = s;
  Allocation b;
  EXPECT_FALSE(scorer->place(s, job, 2, rng, b));
  expect_same_state(s, before);
  ASSERT_TRUE(scorer->place(s, job, 1, rng, b));
  EXPECT_EQ(b.member_node, (std::vector<NodeId>{2}));
}

TEST_P(EveryScorer, RestrictedSpanRackCountsOnlyEligibleNodes) {
  // 2 racks x 2 nodes x 4 GPUs, all free; one eligible node per rack.
  const Cluster c = make_uniform_cluster(1, 2, 2, 4);
  ClusterState s(c);
  const ClusterState before = s;
  Allocation a;
  // 8 free GPUs in each rack, but only 4 on eligible nodes: a rack-spanned gang of 5 does not
  // fit, although it would unrestricted, and so would it across both racks.
  EXPECT_FALSE(scorer->place(s, with_span(only_on(gang("g", 5), {0, 2}), Level::kRack), 5, rng, a));
  expect_same_state(s, before);
  ASSERT_TRUE(scorer->place(s, only_on(gang("g", 5), {0, 2}), 5, rng, a));
  expect_only_on(a, NodeSet{0, 2});
  s.release(a);
  const JobSpec job = with_span(only_on(gang("h", 4), {0, 3}), Level::kRack);
  Allocation b;
  ASSERT_TRUE(scorer->place(s, job, 4, rng, b));
  expect_valid(c, b, job, 4);
  expect_only_on(b, *job.eligible_nodes);
  EXPECT_EQ(racks_of(c, b).size(), 1u);
}

TEST_P(EveryScorer, RestrictedSpanNodeUsesOnlyEligibleNodes) {
  const Cluster c = make_uniform_cluster(1, 1, 3, 4);
  ClusterState s(c);
  s.allocate(testing::whole_gpus(c, 0, 0, 2));
  // Node 1 (4 free) is not eligible, node 0 has 2 free: the gang of 3 goes to node 2.
  const JobSpec job = with_span(only_on(gang("g", 3), {0, 2}), Level::kNode);
  Allocation a;
  ASSERT_TRUE(scorer->place(s, job, 3, rng, a));
  expect_valid(c, a, job, 3);
  EXPECT_EQ(a.member_node, (std::vector<NodeId>{2, 2, 2}));
  const ClusterState before = s;
  Allocation b;
  EXPECT_FALSE(scorer->place(s, job, 3, rng, b));  // node 0: 2 free, node 2: 1
  expect_same_state(s, before);
}

TEST_P(EveryScorer, RestrictedSpanNvlinkUsesOnlyEligibleNodes) {
  // Two nodes of 8 GPUs in NVLink domains of 4; node 1 has GPU 0 busy.
  const Cluster c = make_uniform_cluster(1, 1, 2, 8, "V100", 64000, 512 * 1024, 4);
  ClusterState s(c);
  s.allocate(testing::whole_gpus(c, 1, 0, 1));
  const JobSpec job = with_span(only_on(gang("g", 4), {1}), Level::kNvlDomain);
  Allocation a;
  ASSERT_TRUE(scorer->place(s, job, 4, rng, a));
  expect_valid(c, a, job, 4);
  EXPECT_EQ(a.member_node, (std::vector<NodeId>{1, 1, 1, 1}));
  std::set<GpuId> domains;
  for (const GpuShare& g : a.shares) domains.insert(g.gpu / 4);
  EXPECT_EQ(domains, (std::set<GpuId>{3}));  // node 1's second domain, the only one with 4 free
  // Node 1 has 3 free (in one domain), node 0 has 8: a domain-spanned gang of 4 restricted to
  // node 1 does not fit.
  const ClusterState before = s;
  Allocation b;
  EXPECT_FALSE(scorer->place(s, job, 4, rng, b));
  expect_same_state(s, before);
  ASSERT_TRUE(
      scorer->place(s, with_span(only_on(gang("h", 3), {1}), Level::kNvlDomain), 3, rng, b));
  EXPECT_EQ(b.member_node, (std::vector<NodeId>{1, 1, 1}));
}

TEST_P(EveryScorer, SpanNodeNeverSpillsIntoTheRestOfTheRack) {
  // Node 0 has every GPU free but CPU for one member; node 1 has one GPU free. A gang of 2
  // spanned to one node fits no node, although node 0 and node 1 together could host it.
  const Cluster c = make_uniform_cluster(1, 1, 2, 4, "V100", 8000, 65536);
  ClusterState s(c);
  Allocation cpu;
  cpu.member_node = {0};
  cpu.cpu_milli_per_member = 3000;
  s.allocate(cpu);
  s.allocate(testing::whole_gpus(c, 1, 0, 3));
  JobSpec job = with_span(gang("g", 2), Level::kNode);
  job.demand.cpu_milli = 3000;
  const ClusterState before = s;
  Allocation a;
  EXPECT_FALSE(scorer->place(s, job, 2, rng, a));
  expect_same_state(s, before);
  job.max_span = Level::kRack;
  ASSERT_TRUE(scorer->place(s, job, 2, rng, a));
}

TEST_P(EveryScorer, EveryNodeEligibleDecidesAsNoRestriction) {
  // The same sequence of jobs placed with no restriction and restricted to every node, from
  // the same state and seed, lands on the same GPUs.
  const Cluster c = make_uniform_cluster(2, 2, 3, 8, "V100", 64000, 512 * 1024, 4);
  const auto every = std::make_shared<const NodeSet>(
      NodeSet::matching(c.nodes().size(), [](NodeId) { return true; }));
  ClusterState plain(c), restricted(c);
  Rng r1(11), r2(11);
  const Level spans[] = {Level::kCluster, Level::kRack, Level::kNode, Level::kNvlDomain,
                         Level::kSpine};
  for (int i = 0; i < 60; ++i) {
    JobSpec job =
        i % 7 == 3 ? fractional("f", 250 + 50 * (i % 5)) : gang("g", 1 + i % 5, 1 + i % 3);
    job.max_span = spans[i % 5];
    if (i % 11 == 5) {
      job.demand.gpus = 0;
      job.demand.cpu_milli = 1000;
    }
    JobSpec same = job;
    same.eligible_nodes = every;
    Allocation a, b;
    const bool pa = scorer->place(plain, job, job.min_members, r1, a);
    const bool pb = scorer->place(restricted, same, same.min_members, r2, b);
    ASSERT_EQ(pa, pb) << i;
    EXPECT_EQ(a.member_node, b.member_node) << i;
    EXPECT_EQ(a.shares, b.shares) << i;
  }
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

TEST(Placement, TopologyFillsAPartlyUsedNvlinkDomainFirst) {
  // Two 8-GPU nodes in NVLink domains of 4. Node 1 has 3 free GPUs: GPU 3 in domain 0 and
  // GPUs 6, 7 in domain 1; node 0 is empty. The tightest node is node 1, where a member-by-
  // member pick would straddle both domains; the gang of 2 goes to domain 1 whole.
  const Cluster c = make_uniform_cluster(1, 1, 2, 8, "V100", 64000, 512 * 1024, 4);
  ClusterState s(c);
  for (int g : {0, 1, 2, 4, 5}) s.allocate(testing::whole_gpus(c, 1, g, 1));
  Rng rng(1);
  Allocation a;
  ASSERT_TRUE(make_topology_scorer()->place(s, gang("g", 2), 2, rng, a));
  ASSERT_EQ(a.shares.size(), 2u);
  EXPECT_EQ(a.shares[0].gpu, c.node(1).first_gpu + 6);
  EXPECT_EQ(a.shares[1].gpu, c.node(1).first_gpu + 7);
  // Node 0 stays whole for a large gang.
  EXPECT_EQ(s.node_free_whole(0), 8);
}

TEST(Placement, TopologyKeepsWholeNodesForLargeGangs) {
  // One rack of three 8-GPU nodes: node 2 has 4 free. A gang of 12 takes one whole node and
  // the partly used one, leaving the other whole node free.
  const Cluster c = make_uniform_cluster(1, 1, 3, 8);
  ClusterState s(c);
  s.allocate(testing::whole_gpus(c, 2, 0, 4));
  Rng rng(1);
  Allocation a;
  ASSERT_TRUE(make_topology_scorer()->place(s, gang("g", 12), 12, rng, a));
  const std::set<NodeId> nodes(a.member_node.begin(), a.member_node.end());
  EXPECT_EQ(nodes.size(), 2u);
  EXPECT_TRUE(nodes.count(2));
  EXPECT_EQ(s.node_free_whole(0) + s.node_free_whole(1), 8);
}

TEST(Placement, TopologyPrefersOneRackOverTwo) {
  // 2 racks x 2 nodes x 8 GPUs: rack 0 has 6 free (3 per node), rack 1 has 10 (8 + 2). A
  // gang of 10 fits rack 1 alone; bestfit, blind to racks, may mix.
  const Cluster c = make_uniform_cluster(1, 2, 2, 8);
  ClusterState s(c);
  s.allocate(testing::whole_gpus(c, 0, 0, 5));
  s.allocate(testing::whole_gpus(c, 1, 0, 5));
  s.allocate(testing::whole_gpus(c, 3, 0, 6));
  Rng rng(1);
  Allocation a;
  ASSERT_TRUE(make_topology_scorer()->place(s, gang("g", 10), 10, rng, a));
  EXPECT_EQ(racks_of(c, a), (std::set<RackId>{1}));
}

TEST(Placement, SpanIsInfeasibleWhenNoSubtreeIsLargeEnough) {
  // 2 racks x 2 nodes x 4 GPUs, NVLink domains of 2.
  const Cluster c = make_uniform_cluster(1, 2, 2, 4, "V100", 64000, 512 * 1024, 2);
  EXPECT_FALSE(infeasible_reason(c, with_span(gang("r", 8), Level::kRack)).has_value());
  const auto rack = infeasible_reason(c, with_span(gang("r", 9), Level::kRack));
  ASSERT_TRUE(rack.has_value());
  EXPECT_NE(rack->find("rack"), std::string::npos) << *rack;
  EXPECT_FALSE(infeasible_reason(c, with_span(gang("s", 16), Level::kSpine)).has_value());
  EXPECT_FALSE(infeasible_reason(c, with_span(gang("n", 4), Level::kNode)).has_value());
  EXPECT_TRUE(infeasible_reason(c, with_span(gang("n", 5), Level::kNode)).has_value());
  EXPECT_FALSE(infeasible_reason(c, with_span(gang("d", 2), Level::kNvlDomain)).has_value());
  EXPECT_TRUE(infeasible_reason(c, with_span(gang("d", 3), Level::kNvlDomain)).has_value());
  EXPECT_TRUE(infeasible_reason(c, with_span(gang("d", 1, 4), Level::kNvlDomain)).has_value());
  // Unconstrained, 9 members fit the cluster.
  EXPECT_FALSE(infeasible_reason(c, gang("u", 9)).has_value());
}

// A member no node can hold says what the largest node has, not only what it asked for.
TEST(Placement, AMemberLargerThanEveryNodeSaysWhatTheLargestHas) {
  const Cluster c = make_uniform_cluster(1, 1, 2, 4, "V100", 16000, 64 * 1024, 2);
  JobSpec cpu = gang("c", 1);
  cpu.demand.cpu_milli = 64000;
  EXPECT_EQ(infeasible_reason(c, cpu).value_or(""),
            "each member asks for 64 CPUs, but the largest node with a GPU of an allowed type has "
            "16");
  JobSpec mem = gang("m", 1);
  mem.demand.mem_mib = 96 * 1024;
  EXPECT_EQ(infeasible_reason(c, mem).value_or(""),
            "each member asks for 96 GiB of memory, but the largest node with a GPU of an allowed "
            "type has 64");
}

TEST(Placement, JsonlSpanKey) {
  const std::string text =
      R"({"name": "a", "submit": 0, "members": 4, "work": 10, "span": "rack"})"
      "\n"
      R"({"name": "b", "submit": 1, "members": 2, "work": 10, "span": "nvlink"})"
      "\n"
      R"({"name": "c", "submit": 2, "members": 2, "work": 10})"
      "\n";
  const Workload w = parse_workload(text, "t.jsonl", TraceFormat::kJsonl, {});
  ASSERT_EQ(w.jobs.size(), 3u);
  EXPECT_EQ(w.jobs[0].max_span, Level::kRack);
  EXPECT_EQ(w.jobs[1].max_span, Level::kNvlDomain);
  EXPECT_EQ(w.jobs[2].max_span, Level::kCluster);
  std::ostringstream out;
  write_jsonl(w, out);
  const Workload back = parse_workload(out.str(), "back.jsonl", TraceFormat::kJsonl, {});
  ASSERT_EQ(back.jobs.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(back.jobs[i].max_span, w.jobs[i].max_span);
  try {
    parse_workload(R"({"name": "a", "submit": 0, "work": 10, "span": "row"})", "bad.jsonl",
                   TraceFormat::kJsonl, {});
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("span"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("bad.jsonl:1"), std::string::npos) << e.what();
  }
}

TEST(Placement, SimulateRejectsASpanNoSubtreeCanHost) {
  // The default cluster: 4 racks of 4 nodes x 4 GPUs, 16 GPUs per rack.
  const auto dir = std::filesystem::temp_directory_path() / "tessera_span_test";
  std::filesystem::create_directories(dir);
  const auto trace = dir / "w.jsonl";
  std::ofstream(trace)
      << R"({"name": "ok", "submit": 0, "members": 16, "work": 60, "span": "rack"})"
      << "\n"
      << R"({"name": "wide", "submit": 1, "members": 17, "work": 60, "span": "rack"})"
      << "\n";
  const auto r = testing::run_tessera("simulate --quiet --workload " + trace.string());
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("w.jsonl:2"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rack"), std::string::npos) << r.output;
  std::filesystem::remove_all(dir);
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

namespace tessera {
namespace {

// The topology scorer's domain search bounds its scan with the cluster's NVLink slack
// (not one scanned per gang). On random clusters mixing nodes of one, two and four NVLink
// domains, randomly filled, a gang that fits one domain still goes to the tightest one: the
// fewest free GPUs among the domains that hold it, as a brute-force scan finds.
TEST(TopologyDomains, AGangGoesToTheTightestDomainThatHoldsIt) {
  Rng rng(2026);
  const auto scorer = make_scorer("topology");
  for (int trial = 0; trial < 200; ++trial) {
    ClusterBuilder b;
    const int nodes = 4 + static_cast<int>(rng.below(12));
    for (int n = 0; n < nodes; ++n) {
      const uint16_t dom = static_cast<uint16_t>(8 >> rng.below(3));  // 8, 4 or 2
      b.add_node("s", "r" + std::to_string(n % 3), "n" + std::to_string(n), 0, 8, 64000, 512 * 1024,
                 dom);
    }
    const Cluster c = b.build();
    ClusterState s(c);
    for (GpuId g = 0; g < c.num_gpus(); ++g) {
      if (rng.below(2) == 0) {
        Allocation a;
        a.gpus_per_member = 1;
        a.member_node = {c.node_of_gpu(g)};
        a.shares = {GpuShare{g, 1000}};
        s.allocate(a);
      }
    }
    const int members = 2 + static_cast<int>(rng.below(3));
    // Brute force: the fewest free GPUs of a domain holding `members`.
    int best = INT32_MAX;
    for (const Node& node : c.nodes()) {
      const int dom = node.gpus_per_nvl_domain;
      for (GpuId first = node.first_gpu; first < node.first_gpu + node.num_gpus; first += dom) {
        int free = 0;
        for (GpuId g = first; g < first + dom; ++g) free += s.gpu_free(g) == 1000;
        if (free >= members) best = std::min(best, free);
      }
    }
    if (best == INT32_MAX) continue;
    Allocation a;
    ASSERT_TRUE(scorer->place(s, gang("g", members), members, rng, a)) << "trial " << trial;
    // Every member in one domain, and that domain had `best` free before.
    const Node& node = c.node(a.member_node.front());
    const GpuId first = node.first_gpu + (a.shares.front().gpu - node.first_gpu) /
                                             node.gpus_per_nvl_domain * node.gpus_per_nvl_domain;
    int free_before = members;  // what it took, plus what it left free there
    for (const GpuShare& g : a.shares) {
      EXPECT_EQ(c.node_of_gpu(g.gpu), a.member_node.front());
      EXPECT_GE(g.gpu, first);
      EXPECT_LT(g.gpu, first + node.gpus_per_nvl_domain);
    }
    for (GpuId g = first; g < first + node.gpus_per_nvl_domain; ++g) {
      free_before += s.gpu_free(g) == 1000;
    }
    EXPECT_EQ(free_before, best) << "trial " << trial;
  }
}

}  // namespace
}  // namespace tessera
