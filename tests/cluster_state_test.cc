#include "model/cluster_state.h"

#include <gtest/gtest.h>

#include "test_util.h"

namespace tessera {
namespace {

using testing::whole_gpus;

// Checks every invariant stated in cluster_state.h against a recount from scratch.
void expect_consistent(const ClusterState& s) {
  const Cluster& c = s.cluster();
  std::vector<uint32_t> rack(c.racks().size()), spine(c.spines().size());
  for (NodeId n = 0; n < c.nodes().size(); ++n) {
    const Node& node = c.node(n);
    int whole = 0, partial = 0;
    for (GpuId g = node.first_gpu; g < node.first_gpu + node.num_gpus; ++g) {
      ASSERT_GE(s.gpu_free(g), 0);
      ASSERT_LE(s.gpu_free(g), kMilliPerGpu);
      whole += s.gpu_free(g) == kMilliPerGpu;
      partial += s.gpu_free(g) > 0 && s.gpu_free(g) < kMilliPerGpu;
    }
    EXPECT_EQ(s.node_free_whole(n), whole);
    const auto b = s.bucket(node.gpu_type, whole);
    EXPECT_NE(std::find(b.begin(), b.end(), n), b.end()) << "node " << n << " not in its bucket";
    const auto p = s.partial_nodes(node.gpu_type);
    EXPECT_EQ(std::find(p.begin(), p.end(), n) != p.end(), partial > 0);
    rack[node.rack] += whole;
    spine[c.racks()[node.rack].spine] += whole;
  }
  for (RackId r = 0; r < rack.size(); ++r) EXPECT_EQ(s.rack_free_whole(r), rack[r]);
  for (SpineId sp = 0; sp < spine.size(); ++sp) EXPECT_EQ(s.spine_free_whole(sp), spine[sp]);
}

TEST(ClusterState, AllocateReleaseKeepsIndexesAndReturnsToStart) {
  const Cluster c = make_uniform_cluster(2, 2, 2, 4);
  ClusterState s(c);
  const ClusterState empty = s;
  expect_consistent(s);
  Allocation a = whole_gpus(c, 3, 0, 3);
  s.allocate(a);
  EXPECT_EQ(s.node_free_whole(3), 1);
  expect_consistent(s);
  Allocation f;
  f.gpus_per_member = 1;
  f.member_node = {5};
  f.shares = {{c.node(5).first_gpu + 2, 300}};
  s.allocate(f);
  EXPECT_EQ(s.gpu_free(c.node(5).first_gpu + 2), 700);
  expect_consistent(s);
  s.release(a);
  s.release(f);
  expect_consistent(s);
  for (GpuId g = 0; g < c.num_gpus(); ++g) EXPECT_EQ(s.gpu_free(g), empty.gpu_free(g));
  EXPECT_EQ(s.allocated_milli(), 0);
}

TEST(ClusterState, OverCommitThrowsInsteadOfCorrupting) {
  const Cluster c = make_uniform_cluster(1, 1, 1, 2);
  ClusterState s(c);
  Allocation a;
  a.gpus_per_member = 1;
  a.member_node = {0};
  a.shares = {{0, 600}};
  s.allocate(a);
  EXPECT_THROW(s.allocate(a), std::logic_error);
}

TEST(ClusterState, CapacityCountsFractionalSlots) {
  const Cluster c = make_uniform_cluster(1, 1, 1, 2);
  ClusterState s(c);
  MemberDemand half;
  half.gpu_milli = 500;
  EXPECT_EQ(s.capacity_for(0, half), 4);
  MemberDemand two;
  two.gpus = 2;
  EXPECT_EQ(s.capacity_for(0, two), 1);
  MemberDemand cpu_heavy;
  cpu_heavy.cpu_milli = c.node(0).cpu_milli;
  EXPECT_EQ(s.capacity_for(0, cpu_heavy), 1);
}

}  // namespace
}  // namespace tessera
