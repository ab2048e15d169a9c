// The cycle machinery serve and kube share (control/cycle_driver.h): when a cycle walks the whole
// queue, what the engine is offered and what it leaves wanting a reason, the long-term usage
// account, the cycle histogram and the pacing of goodput rounds.
#include "control/cycle_driver.h"

#include <gtest/gtest.h>

#include "engine/policy.h"
#include "model/cluster_spec.h"
#include "test_util.h"

namespace tessera {
namespace {

using testing::gang;
using testing::whole_gpus;
using testing::World;

TEST(CycleHistogram, CountsEachCycleUnderEveryBoundItFits) {
  CycleHistogram h({0.001, 0.01, 0.1});
  h.observe(0.0005);
  h.observe(0.05);
  h.observe(3);
  EXPECT_EQ(h.cycles, 3u);
  EXPECT_DOUBLE_EQ(h.seconds_sum, 3.0505);
  EXPECT_EQ(h.counts, (std::vector<uint64_t>{1, 1, 2}));
}

TEST(RoundPacer, ARoundIsDueFirstThenEveryIntervalOrWhenAJobWaitsUnplanned) {
  RoundPacer p(60);
  EXPECT_TRUE(p.due(0, [] { return false; }));
  p.began(100);
  EXPECT_FALSE(p.due(159, [] { return false; }));
  EXPECT_TRUE(p.due(159, [] { return true; }));
  EXPECT_TRUE(p.due(160, [] { return false; }));
  EXPECT_TRUE(p.due(161, [] {
    ADD_FAILURE() << "the waiting jobs were walked though the interval had passed";
    return false;
  }));
  EXPECT_EQ(p.planned(), 1u);
  EXPECT_EQ(p.planned(), 2u);
  EXPECT_EQ(p.rounds(), 2u);
}

struct Fixture {
  Cluster cluster = make_uniform_cluster(1, 1, 2, 4);
  QueueTree tree = QueueTree::flat(std::vector<std::string>{"a", "b"});
  Fixture(double half_life) {
    tree.settings().half_life_seconds = half_life;
    Interner names;
    names.intern("a");
    names.intern("b");
    tree.bind(names, "test");
  }
};

TEST(LongTermUsage, AnIntervalCountsWhatWasHeldAtItsStart) {
  Fixture f(3600);
  LongTermUsage u;
  u.reshape(f.tree);
  ASSERT_TRUE(u.on());
  const JobSpec a = gang("a", 1, 4, 0, 0);
  const JobSpec b = gang("b", 1, 4, 0, 1);
  const Allocation on0 = whole_gpus(f.cluster, 0, 0, 4);
  const Allocation on1 = whole_gpus(f.cluster, 1, 0, 4);
  // From 100 a holds 4 GPUs; at 1000 b starts too.
  u.fold(100);
  u.hold(f.tree, f.cluster, a, on0);
  u.fold(1000);
  u.hold(f.tree, f.cluster, a, on0);
  u.hold(f.tree, f.cluster, b, on1);
  const QueueId qa = f.tree.leaf_of(0), qb = f.tree.leaf_of(1);
  EXPECT_GT(u.decayed().view()[qa][kGpuDim], 0);
  EXPECT_EQ(u.decayed().view()[qb][kGpuDim], 0) << "b started at the interval's end";
  u.fold(1900);
  EXPECT_GT(u.decayed().view()[qb][kGpuDim], 0);
  EXPECT_GT(u.decayed().view()[qa][kGpuDim], u.decayed().view()[qb][kGpuDim]);
}

TEST(LongTermUsage, OffWithoutAHalfLife) {
  Fixture f(0);
  LongTermUsage u;
  u.reshape(f.tree);
  EXPECT_FALSE(u.on());
  u.fold(1);
  u.hold(f.tree, f.cluster, gang("a", 1, 4), whole_gpus(f.cluster, 0, 0, 4));
  u.fold(1000);
  EXPECT_TRUE(u.decayed().view().empty());
}

TEST(LongTermUsage, AGrownTreeKeepsEachQueuesUsage) {
  Fixture f(3600);
  LongTermUsage u;
  u.reshape(f.tree);
  u.fold(1);
  u.hold(f.tree, f.cluster, gang("a", 1, 4), whole_gpus(f.cluster, 0, 0, 4));
  u.fold(1000);
  const Amounts before = u.decayed().view()[f.tree.leaf_of(0)];
  QueueTree grown = QueueTree::flat(std::vector<std::string>{"a", "b", "c"});
  grown.settings().half_life_seconds = 3600;
  u.reshape(grown);
  EXPECT_EQ(u.decayed().view().size(), grown.size());
  EXPECT_EQ(u.decayed().view()[f.tree.leaf_of(0)], before);
}

TEST(CycleDriver, WalksTheWholeQueueFirstAndEveryRefreshInterval) {
  const Policy policy = make_policy("fifo", 1);
  CycleDriver d(policy, CycleDriver::Options{30, {0.1}, 60});
  EXPECT_TRUE(d.begin(100).refresh);
  EXPECT_FALSE(d.begin(110).refresh);
  EXPECT_FALSE(d.begin(129).refresh);
  const CycleDriver::Cycle c = d.begin(130);
  EXPECT_TRUE(c.refresh);
  EXPECT_EQ(c.number, 4u);
}

TEST(CycleDriver, AJobGivenItsReasonWantsNoneUntilTheNextRefresh) {
  // Two 8-GPU jobs on 8 GPUs: the first starts, the second waits and is told why once.
  World w(make_uniform_cluster(1, 1, 2, 4));
  const Policy policy = make_policy("fifo", 1);
  CycleDriver d(policy, CycleDriver::Options{30, {0.1}, 60});
  const JobId first = w.add_pending(gang("first", 2, 4, 0));
  const JobId second = w.add_pending(gang("second", 2, 4, 1));
  for (const PendingJob& p : w.pending) {
    PendingJob wanting = p;
    wanting.wants_reason = true;
    d.queue().add(wanting);
  }
  Snapshot snap = w.snapshot();
  const CycleDriver::Cycle c1 = d.begin(0);
  const CycleDriver::Outcome o1 = d.decide(c1, snap);
  EXPECT_EQ(snap.cycle, c1.number);
  ASSERT_EQ(o1.decisions.starts.size(), 1u);
  EXPECT_EQ(o1.decisions.starts[0].job, first);
  ASSERT_NE(testing::find_reason(o1.decisions, second), nullptr);
  d.settle(o1);
  EXPECT_EQ(d.histogram().cycles, 1u);
  // The start is the front end's to apply: the first leaves the queue, its GPUs taken.
  d.queue().remove(first);
  w.state.allocate(o1.decisions.starts[0].alloc);
  EXPECT_FALSE(d.queue().find(second)->wants_reason);

  Snapshot snap2 = w.snapshot();
  const CycleDriver::Outcome o2 = d.decide(d.begin(5), snap2);
  EXPECT_EQ(testing::find_reason(o2.decisions, second), nullptr) << "told already";
  d.settle(o2);
  Snapshot snap3 = w.snapshot();
  const CycleDriver::Outcome o3 = d.decide(d.begin(31), snap3);
  EXPECT_NE(testing::find_reason(o3.decisions, second), nullptr) << "a refresh tells it again";
}

TEST(CycleDriver, ACycleNotWorthRunningDecidesNothingButIsCounted) {
  World w(make_uniform_cluster(1, 1, 1, 4));
  const Policy policy = make_policy("fifo", 1);
  CycleDriver d(policy, CycleDriver::Options{30, {0.1}, 60});
  w.add_pending(gang("j", 1, 1));
  d.queue().add(w.pending[0]);
  Snapshot snap = w.snapshot();
  const CycleDriver::Outcome o = d.decide(d.begin(0), snap, false);
  EXPECT_TRUE(o.decisions.starts.empty());
  d.settle(o);
  ServiceMetrics m;
  d.report(m);
  EXPECT_EQ(m.cycles, 1u);
  EXPECT_EQ(m.cycle_bucket_bounds, (std::vector<double>{0.1}));
  EXPECT_EQ(m.cycle_bucket_counts, (std::vector<uint64_t>{1}));
}

}  // namespace
}  // namespace tessera
