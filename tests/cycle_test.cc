// The scheduling cycle: gangs, preemption, backfill, reasons, determinism.
#include "engine/cycle.h"

#include <gtest/gtest.h>

#include "engine/admission.h"
#include "test_util.h"

namespace tessera {
namespace {

using testing::apply;
using testing::find_reason;
using testing::find_start;
using testing::gang;
using testing::whole_gpus;
using testing::World;

Policy policy(const std::string& name, Backfill b = Backfill::kEasy) {
  Policy p = make_policy(name, 1);
  p.backfill = b;
  return p;
}

TEST(Cycle, TwoGangsThatCannotBothFitNeverHalfPlace) {
  // 150 GPUs worth of room (here: 12), two gangs of 8: exactly one runs, whole.
  World w(make_uniform_cluster(1, 1, 3, 4));
  const JobId a = w.add_pending(gang("a", 8, 1, 0));
  const JobId b = w.add_pending(gang("b", 8, 1, 1));
  const Decisions d = schedule_cycle(w.snapshot(), policy("fifo"));
  ASSERT_EQ(d.starts.size(), 1u);
  EXPECT_EQ(d.starts[0].job, a);
  EXPECT_EQ(d.starts[0].alloc.members(), 8);
  ASSERT_NE(find_reason(d, b), nullptr);
  EXPECT_EQ(find_reason(d, b)->code, PendingCode::kInsufficientGpus);
  apply(w, d);
}

TEST(Cycle, EveryPendingJobGetsAStartOrAReason) {
  World w(make_uniform_cluster(1, 2, 2, 4));
  for (int i = 0; i < 12; ++i) w.add_pending(gang("j" + std::to_string(i), 1 + i % 4, 1, i));
  for (const char* p : {"fifo", "drf", "las", "sjf"}) {
    const Decisions d = schedule_cycle(w.snapshot(), policy(p));
    EXPECT_EQ(d.starts.size() + d.pending.size(), w.pending.size()) << p;
    apply(w, d);
  }
}

TEST(Cycle, GangCannotFitIsDistinguishedFromTooFewGpus) {
  World w(make_uniform_cluster(1, 1, 2, 4));
  w.add_running(gang("x", 1, 2), whole_gpus(w.cluster, 0, 0, 2));
  w.add_running(gang("y", 1, 2), whole_gpus(w.cluster, 1, 0, 2));
  // 4 GPUs free (2 + 2) but a member wants 4 on one node.
  const JobId j = w.add_pending(gang("big", 1, 4));
  const Decisions d = schedule_cycle(w.snapshot(), policy("fifo", Backfill::kGreedy));
  ASSERT_NE(find_reason(d, j), nullptr);
  EXPECT_EQ(find_reason(d, j)->code, PendingCode::kGangCannotFit);
  EXPECT_EQ(find_reason(d, j)->free_gpu_milli, 4000);
}

TEST(Cycle, HigherPriorityPreemptsTheLeastValuableVictims) {
  World w(make_uniform_cluster(1, 1, 2, 4));
  const JobId old_low = w.add_running(gang("old", 1, 4, 0, 0, PriorityClass::kBestEffort),
                                      whole_gpus(w.cluster, 0, 0, 4), /*start=*/0);
  const JobId young_low = w.add_running(gang("young", 1, 4, 0, 0, PriorityClass::kBestEffort),
                                        whole_gpus(w.cluster, 1, 0, 4), /*start=*/50);
  const JobId hi = w.add_pending(gang("hi", 1, 4, 60, 1, PriorityClass::kProduction));
  w.now = 60;
  const Decisions d = schedule_cycle(w.snapshot(), policy("fifo"));
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_EQ(d.preemptions[0].job, young_low);  // equal rank and loss: the youngest goes
  EXPECT_EQ(d.preemptions[0].for_job, hi);
  ASSERT_NE(find_start(d, hi), nullptr);
  (void)old_low;
  apply(w, d);
}

TEST(Cycle, VictimsWithLessLostWorkGoFirst) {
  World w(make_uniform_cluster(1, 1, 2, 4));
  JobSpec ckpt = gang("ckpt", 1, 4, 0, 0, PriorityClass::kBestEffort);
  ckpt.checkpoint_interval = 600;
  // Started long ago, so it would lose far more work than the young one.
  const JobId a = w.add_running(ckpt, whole_gpus(w.cluster, 0, 0, 4), /*start=*/0);
  JobSpec fresh = ckpt;
  fresh.name = "fresh";
  const JobId b = w.add_running(fresh, whole_gpus(w.cluster, 1, 0, 4), /*start=*/990);
  w.add_pending(gang("hi", 1, 4, 0, 0, PriorityClass::kProduction));
  w.now = 1000;
  const Decisions d = schedule_cycle(w.snapshot(), policy("fifo"));
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_EQ(d.preemptions[0].job, b);
  (void)a;
}

TEST(Cycle, NoPreemptionOfEqualPriority) {
  World w(make_uniform_cluster(1, 1, 1, 4));
  w.add_running(gang("r", 1, 4), whole_gpus(w.cluster, 0, 0, 4));
  const JobId p = w.add_pending(gang("p", 1, 4, 10));
  const Decisions d = schedule_cycle(w.snapshot(), policy("fifo"));
  EXPECT_TRUE(d.preemptions.empty());
  EXPECT_EQ(find_start(d, p), nullptr);
}

TEST(Cycle, PreemptionFreesOnlyWhatIsNeeded) {
  World w(make_uniform_cluster(1, 1, 4, 4));
  for (NodeId n = 0; n < 4; ++n) {
    w.add_running(gang("low" + std::to_string(n), 1, 4, 0, 0, PriorityClass::kBestEffort),
                  whole_gpus(w.cluster, n, 0, 4), 0);
  }
  w.add_pending(gang("hi", 2, 4, 0, 1, PriorityClass::kProduction));
  const Decisions d = schedule_cycle(w.snapshot(), policy("fifo"));
  EXPECT_EQ(d.preemptions.size(), 2u);
  apply(w, d);
}

TEST(Cycle, LasPreemptsJobsThatHaveHadTheirShare) {
  World w(make_uniform_cluster(1, 1, 1, 4));
  w.add_running(gang("veteran", 1, 4), whole_gpus(w.cluster, 0, 0, 4), 0, kUnknown, 1e6);
  const JobId fresh = w.add_pending(gang("fresh", 1, 4, 10));
  const Decisions d = schedule_cycle(w.snapshot(), policy("las"));
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_NE(find_start(d, fresh), nullptr);
}

TEST(Cycle, EasyBackfillNeverDelaysTheReservedJob) {
  // 12 GPUs, 8 held by jobs that end at t=100; the head wants all 12 -> reserved at t=100.
  World w(make_uniform_cluster(1, 1, 3, 4));
  w.add_running(gang("r1", 1, 4), whole_gpus(w.cluster, 0, 0, 4), 0, 100);
  w.add_running(gang("r2", 1, 4), whole_gpus(w.cluster, 1, 0, 4), 0, 100);
  const JobId head = w.add_pending(gang("head", 12, 1, 1));
  JobSpec short_job = gang("short", 2, 1, 2);
  short_job.duration_estimate = 50;  // ends before t=100: may backfill
  JobSpec long_job = gang("long", 2, 1, 3);
  long_job.duration_estimate = 500;  // would hold GPUs past t=100: must wait
  const JobId s = w.add_pending(short_job);
  const JobId l = w.add_pending(long_job);
  const Decisions d = schedule_cycle(w.snapshot(), policy("fifo", Backfill::kEasy));
  EXPECT_EQ(find_start(d, head), nullptr);
  ASSERT_NE(find_start(d, s), nullptr);
  EXPECT_TRUE(find_start(d, s)->backfilled);
  ASSERT_NE(find_reason(d, l), nullptr);
  EXPECT_EQ(find_reason(d, l)->code, PendingCode::kWaitingForReservation);
  EXPECT_EQ(find_reason(d, l)->blocker, head);
}

TEST(Cycle, BackfillOntoGpuTypesTheReservationDoesNotNeed) {
  ClusterBuilder b;
  const GpuTypeId v100 = b.gpu_types().intern("V100");
  const GpuTypeId t4 = b.gpu_types().intern("T4");
  b.add_node("s", "r", "v", v100, 4, 64000, 1 << 20);
  b.add_node("s", "r", "t", t4, 4, 64000, 1 << 20);
  World w(b.build());
  w.add_running(gang("r", 1, 4), whole_gpus(w.cluster, 0, 0, 4), 0, 100);
  JobSpec head = gang("head", 1, 4, 1);
  head.allowed_types = GpuTypeMask{1} << v100;
  const JobId h = w.add_pending(head);
  JobSpec any = gang("any-type", 2, 1, 2);
  any.duration_estimate = 500;  // outlasts the reservation, and no V100 is spare at t=100
  const JobId a = w.add_pending(any);
  const Decisions d = schedule_cycle(w.snapshot(), policy("fifo", Backfill::kEasy));
  EXPECT_EQ(find_start(d, h), nullptr);
  ASSERT_NE(find_start(d, a), nullptr) << "T4s are free and the head cannot use them";
  for (NodeId n : find_start(d, a)->alloc.member_node) EXPECT_EQ(w.cluster.node(n).gpu_type, t4);
}

TEST(Cycle, StrictOrderBlocksEverythingBehindTheHead) {
  World w(make_uniform_cluster(1, 1, 1, 4));
  w.add_running(gang("r", 1, 2), whole_gpus(w.cluster, 0, 0, 2));
  const JobId head = w.add_pending(gang("head", 4, 1, 0));
  const JobId small = w.add_pending(gang("small", 1, 1, 1));
  const Decisions none = schedule_cycle(w.snapshot(), policy("fifo", Backfill::kNone));
  EXPECT_TRUE(none.starts.empty());
  EXPECT_EQ(find_reason(none, small)->code, PendingCode::kBlockedByHead);
  EXPECT_EQ(find_reason(none, small)->blocker, head);
  const Decisions greedy = schedule_cycle(w.snapshot(), policy("fifo", Backfill::kGreedy));
  EXPECT_NE(find_start(greedy, small), nullptr);
}

TEST(Cycle, ElasticGangStartsSmallerWhenMaxDoesNotFit) {
  World w(make_uniform_cluster(1, 1, 1, 4));
  JobSpec e = gang("elastic", 8);
  e.min_members = 2;
  const JobId id = w.add_pending(e);
  const Decisions d = schedule_cycle(w.snapshot(), policy("fifo"));
  ASSERT_NE(find_start(d, id), nullptr);
  EXPECT_EQ(find_start(d, id)->alloc.members(), 2);
}

TEST(Cycle, SameSnapshotAndSeedGiveTheSameDecisions) {
  World w(make_uniform_cluster(2, 2, 4, 8));
  for (int i = 0; i < 40; ++i) w.add_pending(gang("j" + std::to_string(i), 1 + i % 5, 1, i, i % 3));
  for (const char* p : {"fifo+random", "drf+spread", "las+topology", "sjf+bestfit"}) {
    const Decisions a = schedule_cycle(w.snapshot(5), policy(p));
    const Decisions b = schedule_cycle(w.snapshot(5), policy(p));
    ASSERT_EQ(a.starts.size(), b.starts.size()) << p;
    for (size_t i = 0; i < a.starts.size(); ++i) {
      EXPECT_EQ(a.starts[i].job, b.starts[i].job);
      EXPECT_EQ(a.starts[i].alloc.shares, b.starts[i].alloc.shares);
    }
  }
}

TEST(Admission, RejectsJobsNoClusterStateCouldHost) {
  const Cluster c = make_uniform_cluster(1, 1, 2, 4);
  EXPECT_FALSE(infeasible_reason(c, gang("ok", 8)).has_value());
  const auto too_many = infeasible_reason(c, gang("big", 9));
  ASSERT_TRUE(too_many.has_value());
  EXPECT_NE(too_many->find("9 GPUs"), std::string::npos) << *too_many;
  EXPECT_TRUE(infeasible_reason(c, gang("wide", 1, 5)).has_value());
  JobSpec cpu = gang("cpu", 1);
  cpu.demand.cpu_milli = c.node(0).cpu_milli + 1;
  EXPECT_TRUE(infeasible_reason(c, cpu).has_value());
}

TEST(Policy, ParsesOrderAndPlacementAndRejectsUnknownNames) {
  EXPECT_EQ(make_policy("las+topology", 1).name(), "las+topology");
  EXPECT_EQ(make_policy("fifo", 1).name(), "fifo+bestfit");
  try {
    make_policy("lifo", 1);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("lifo"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("fifo"), std::string::npos);
  }
  EXPECT_THROW(make_policy("fifo+nowhere", 1), std::invalid_argument);
}

}  // namespace
}  // namespace tessera
