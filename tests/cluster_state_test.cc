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
  for (GpuTypeId t = 0; t < c.gpu_types().size(); ++t) {
    const auto p = s.partial_nodes(t);
    EXPECT_TRUE(std::adjacent_find(p.begin(), p.end(), std::greater_equal<>()) == p.end())
        << "partial list not strictly ascending";
    for (int k = 0; k <= c.max_node_gpus(); ++k) {
      const auto b = s.bucket(t, k);
      EXPECT_TRUE(std::adjacent_find(b.begin(), b.end(), std::greater_equal<>()) == b.end())
          << "bucket not strictly ascending";
    }
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

// Placement reads the indexes in order, so they must not remember history: the same
// allocations reached in any order (or after trying and undoing others) index identically.
TEST(ClusterState, IndexesDependOnlyOnWhatIsAllocated) {
  const Cluster c = make_uniform_cluster(1, 2, 4, 4);
  std::vector<Allocation> allocs;
  for (NodeId n = 0; n < 8; ++n) allocs.push_back(whole_gpus(c, n, 0, 1 + n % 3));
  Allocation share;
  share.gpus_per_member = 1;
  share.member_node = {6};
  share.shares = {{c.node(6).first_gpu + 3, 250}};
  ClusterState forward(c), backward(c);
  for (const auto& a : allocs) forward.allocate(a);
  forward.allocate(share);
  backward.allocate(share);
  for (auto it = allocs.rbegin(); it != allocs.rend(); ++it) {
    backward.allocate(whole_gpus(c, 7, 3, 1));  // tried and undone
    backward.release(whole_gpus(c, 7, 3, 1));
    backward.allocate(*it);
  }
  expect_consistent(forward);
  expect_consistent(backward);
  for (int k = 0; k <= c.max_node_gpus(); ++k) {
    const auto f = forward.bucket(0, k), b = backward.bucket(0, k);
    EXPECT_EQ(std::vector<NodeId>(f.begin(), f.end()), std::vector<NodeId>(b.begin(), b.end()));
  }
  const auto fp = forward.partial_nodes(0), bp = backward.partial_nodes(0);
  EXPECT_EQ(std::vector<NodeId>(fp.begin(), fp.end()), std::vector<NodeId>(bp.begin(), bp.end()));
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
