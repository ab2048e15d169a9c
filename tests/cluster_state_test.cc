#include "model/cluster_state.h"

#include <gtest/gtest.h>

#include <random>

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

// The journal a cycle uses on the caller's ledger (Snapshot::scratch): random allocations and
// releases, whole and fractional, undone, leave every GPU, node, index and aggregate as before.
TEST(ClusterState, UndoingTheJournalGivesTheLedgerBackExactly) {
  const Cluster c = make_uniform_cluster(1, 2, 4, 4);
  std::mt19937_64 rng(11);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint64_t>(n)); };
  auto share_of = [&](NodeId n, int gpu, int32_t milli) {
    Allocation a;
    a.gpus_per_member = 1;
    a.member_node = {n};
    a.shares = {{c.node(n).first_gpu + static_cast<GpuId>(gpu), milli}};
    a.cpu_milli_per_member = 100;
    return a;
  };
  ClusterState s(c);
  std::vector<Allocation> held;
  auto step = [&]() {
    if (!held.empty() && pick(3) == 0) {
      const size_t i = static_cast<size_t>(pick(static_cast<int>(held.size())));
      s.release(held[i]);
      held.erase(held.begin() + static_cast<std::ptrdiff_t>(i));
      return;
    }
    const auto n = static_cast<NodeId>(pick(8));
    const Allocation a =
        pick(2) == 0 ? share_of(n, pick(4), 250 * (1 + pick(3))) : whole_gpus(c, n, pick(4), 1);
    if (!s.fits(a)) return;
    s.allocate(a);
    held.push_back(a);
  };
  for (int i = 0; i < 40; ++i) step();  // a ledger in use
  for (int round = 0; round < 20; ++round) {
    const ClusterState before = s;
    const std::vector<Allocation> held_before = held;
    s.start_journal();
    EXPECT_THROW(s.start_journal(), std::logic_error);
    for (int i = 0; i < 30; ++i) step();
    s.undo_journal();
    held = held_before;
    EXPECT_FALSE(s.journaling());
    expect_consistent(s);
    EXPECT_EQ(s.allocated_milli(), before.allocated_milli());
    for (GpuId g = 0; g < c.num_gpus(); ++g) ASSERT_EQ(s.gpu_free(g), before.gpu_free(g));
    for (NodeId n = 0; n < c.nodes().size(); ++n) {
      EXPECT_EQ(s.node_free_cpu(n), before.node_free_cpu(n));
      EXPECT_EQ(s.node_free_whole(n), before.node_free_whole(n));
    }
    for (int k = 0; k <= c.max_node_gpus(); ++k) {
      const auto a = s.bucket(0, k), b = before.bucket(0, k);
      EXPECT_EQ(std::vector<NodeId>(a.begin(), a.end()), std::vector<NodeId>(b.begin(), b.end()));
    }
    const auto ap = s.partial_nodes(0), bp = before.partial_nodes(0);
    EXPECT_EQ(std::vector<NodeId>(ap.begin(), ap.end()), std::vector<NodeId>(bp.begin(), bp.end()));
    for (int i = 0; i < 5; ++i) step();  // moves on outside the journal
  }
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
