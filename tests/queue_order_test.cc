// One behaviour suite run against every queue order, then what each one promises.
#include "engine/queue_order.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "test_util.h"

namespace tessera {
namespace {

using testing::gang;
using testing::World;

class EveryOrder : public ::testing::TestWithParam<std::string> {
 protected:
  std::unique_ptr<QueueOrder> order = make_queue_order(GetParam());
  World world{make_uniform_cluster(1, 1, 4, 4)};
};

TEST_P(EveryOrder, ReturnsAPermutationOfPending) {
  for (int i = 0; i < 20; ++i) {
    JobSpec s = gang("j" + std::to_string(i), 1 + i % 3, 1, 100.0 - i, i % 3);
    s.duration_estimate = i % 4 == 0 ? kUnknown : 10.0 * (i % 7);
    world.add_pending(s, 1000.0 * (i % 5));
  }
  auto idx = order->order(world.snapshot());
  ASSERT_EQ(idx.size(), 20u);
  std::sort(idx.begin(), idx.end());
  for (uint32_t i = 0; i < 20; ++i) EXPECT_EQ(idx[i], i);
}

TEST_P(EveryOrder, HigherPriorityClassComesFirst) {
  world.add_pending(gang("low", 1, 1, 0, 0, PriorityClass::kBestEffort));
  world.add_pending(gang("high", 1, 1, 50, 1, PriorityClass::kProduction));
  world.add_pending(gang("mid", 1, 1, 10, 2, PriorityClass::kResearch));
  const auto idx = order->order(world.snapshot());
  EXPECT_EQ(world.pending[idx[0]].spec->name, "high");
  EXPECT_EQ(world.pending[idx[2]].spec->name, "low");
}

TEST_P(EveryOrder, IsDeterministic) {
  for (int i = 0; i < 10; ++i) world.add_pending(gang("j" + std::to_string(i), 1, 1, 5, i % 2));
  EXPECT_EQ(order->order(world.snapshot()), order->order(world.snapshot()));
}

TEST_P(EveryOrder, EqualJobsRunInArrivalOrder) {
  for (int i = 0; i < 5; ++i) world.add_pending(gang("j" + std::to_string(i), 1, 1, i));
  const auto idx = order->order(world.snapshot());
  for (uint32_t i = 0; i < 5; ++i) EXPECT_EQ(idx[i], i);
}

TEST_P(EveryOrder, OutranksOnlyLowerPriorityClassesAtEqualService) {
  const JobSpec hi = gang("hi", 1, 1, 0, 0, PriorityClass::kProduction);
  const JobSpec lo = gang("lo", 1, 1, 0, 0, PriorityClass::kResearch);
  EXPECT_GT(order->rank(hi, 0), order->rank(lo, 0));
  EXPECT_EQ(order->rank(lo, 0), order->rank(lo, 0));
}

INSTANTIATE_TEST_SUITE_P(QueueOrder, EveryOrder, ::testing::ValuesIn(queue_order_names()));

TEST(QueueOrder, SjfPutsShortKnownJobsFirst) {
  World w(make_uniform_cluster(1, 1, 1, 4));
  JobSpec a = gang("long", 1, 1, 0);
  a.duration_estimate = 500;
  JobSpec b = gang("short", 1, 1, 10);
  b.duration_estimate = 5;
  JobSpec c = gang("unknown", 1, 1, 1);
  w.add_pending(a);
  w.add_pending(b);
  w.add_pending(c);
  const auto idx = make_sjf_order()->order(w.snapshot());
  EXPECT_EQ(w.pending[idx[0]].spec->name, "short");
  EXPECT_EQ(w.pending[idx[2]].spec->name, "unknown");
}

TEST(QueueOrder, QssfOrdersByGpusTimesPredictedDuration) {
  World w(make_uniform_cluster(1, 1, 2, 8));
  JobSpec wide = gang("wide-short", 8, 1, 0);  // 8 GPUs x 100 s = 800 GPU-s
  wide.duration_estimate = 100;
  JobSpec narrow = gang("narrow-long", 1, 1, 1);  // 1 GPU x 500 s = 500 GPU-s
  narrow.duration_estimate = 500;
  JobSpec tiny = gang("tiny", 1, 2, 2);  // 2 GPUs x 10 s = 20 GPU-s
  tiny.duration_estimate = 10;
  JobSpec tie = gang("tie", 5, 1, 3);  // 5 GPUs x 100 s = 500 GPU-s: after narrow-long (FIFO)
  tie.duration_estimate = 100;
  JobSpec unknown = gang("unknown", 1, 1, 4);
  for (const JobSpec& s : {wide, narrow, tiny, tie, unknown}) w.add_pending(s);
  const auto idx = make_queue_order("qssf")->order(w.snapshot());
  std::string seq;
  for (uint32_t i : idx) seq += w.pending[i].spec->name + " ";
  EXPECT_EQ(seq, "tiny narrow-long tie wide-short unknown ");
  // sjf, by duration alone, puts the wide short job first of the long ones.
  const auto sjf = make_sjf_order()->order(w.snapshot());
  EXPECT_EQ(w.pending[sjf[0]].spec->name, "tiny");
  EXPECT_EQ(w.pending[sjf[1]].spec->name, "wide-short");
}

TEST(QueueOrder, LasPutsLeastAttainedQueueFirstAndDemotedJobsRankLower) {
  World w(make_uniform_cluster(1, 1, 1, 4));
  w.add_pending(gang("veteran", 1, 1, 0), 100000);
  w.add_pending(gang("newcomer", 1, 1, 50), 0);
  const auto las = make_las_order({3600});
  const auto idx = las->order(w.snapshot());
  EXPECT_EQ(w.pending[idx[0]].spec->name, "newcomer");
  const JobSpec j = gang("x", 1);
  EXPECT_GT(las->rank(j, 0), las->rank(j, 4000));
  EXPECT_EQ(las->rank(j, 0), las->rank(j, 3599));
}

TEST(QueueOrder, DrfInterleavesTenantsByDominantShare) {
  World w(make_uniform_cluster(1, 1, 4, 4));
  // Tenant 0 already runs 8 GPUs; tenant 1 runs none. Both have three 4-GPU jobs waiting.
  w.add_running(gang("busy", 2, 4, 0, 0), [&] {
    Allocation a = testing::whole_gpus(w.cluster, 0, 0, 4);
    Allocation b = testing::whole_gpus(w.cluster, 1, 0, 4);
    a.member_node.push_back(1);
    a.shares.insert(a.shares.end(), b.shares.begin(), b.shares.end());
    return a;
  }());
  for (int i = 0; i < 3; ++i) {
    w.add_pending(gang("a" + std::to_string(i), 1, 4, i, 0));
    w.add_pending(gang("b" + std::to_string(i), 1, 4, 10 + i, 1));
  }
  const auto idx = make_drf_order()->order(w.snapshot());
  std::string seq;
  for (uint32_t i : idx) seq += w.pending[i].spec->name.substr(0, 1);
  // Tenant 1 catches up first (0 -> 4 -> 8 GPUs); at equal shares the lower tenant id goes.
  EXPECT_EQ(seq, "bbabaa");
}

TEST(QueueOrder, DrfHonoursWeights) {
  World w(make_uniform_cluster(1, 1, 4, 4));
  Interner tenants;
  tenants.intern("a");
  tenants.intern("b");
  QueueTree tree = QueueTree::flat(tenants.names(), {2.0, 1.0});
  tree.bind(tenants, "test");
  w.queues = &tree;
  for (int i = 0; i < 3; ++i) {
    w.add_pending(gang("a" + std::to_string(i), 1, 4, i, 0));
    w.add_pending(gang("b" + std::to_string(i), 1, 4, 10 + i, 1));
  }
  const auto idx = make_drf_order()->order(w.snapshot());
  std::string seq;
  for (uint32_t i : idx) seq += w.pending[i].spec->name.substr(0, 1);
  // Weight 2 halves a's share per GPU: it reaches b's share after two jobs to b's one.
  EXPECT_EQ(seq, "abaabb");
}

}  // namespace
}  // namespace tessera
