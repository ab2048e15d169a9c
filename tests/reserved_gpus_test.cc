// Reserved GPUs in the scheduling cycle (model/gpu_reservation.h, engine/reserved_gpus.h): inside
// its window a reservation's GPUs go only to its tenant's (or user's) jobs; before it, only to
// jobs whose time limit ends by its start; preemption never frees them for anyone else; and the
// caller's ledger comes back unchanged.
#include <gtest/gtest.h>

#include <set>

#include "engine/cycle.h"
#include "model/cluster_spec.h"
#include "test_util.h"

namespace tessera {
namespace {

using testing::find_start;
using testing::gang;
using testing::World;

// One node of 8 GPUs; GPUs 4..7 reserved for tenant 1 over [1000, 2000).
struct ReservedWorld {
  ReservedWorld() : w(make_uniform_cluster(1, 1, 1, 8)) {
    r.name = "deadline";
    r.tenant = 1;
    r.start = 1000;
    r.end = 2000;
    r.gpus = {4, 5, 6, 7};
  }
  Snapshot snapshot() const {
    Snapshot snap = w.snapshot();
    snap.reservations = std::span(&r, 1);
    return snap;
  }
  World w;
  GpuReservation r;
};

std::set<GpuId> gpus_of(const Start& s) {
  std::set<GpuId> out;
  for (const GpuShare& g : s.alloc.shares) out.insert(g.gpu);
  return out;
}

const PendingReason* reason_of(const Decisions& d, JobId id) {
  for (const PendingReason& r : d.pending) {
    if (r.job == id) return &r;
  }
  return nullptr;
}

TEST(ReservedGpus, InsideTheWindowOnlyTheTenantsJobsUseThem) {
  ReservedWorld rw;
  rw.w.now = 1500;
  const JobId other = rw.w.add_pending(gang("other", 1, 6, 0, /*tenant=*/0));
  const JobId small = rw.w.add_pending(gang("small", 1, 4, 1, /*tenant=*/0));
  const JobId owner = rw.w.add_pending(gang("owner", 1, 4, 2, /*tenant=*/1));
  Policy p = make_policy("fifo", 1);
  p.backfill = Backfill::kGreedy;  // (under EASY the blocked head would hold the rest back)
  const Decisions d = schedule_cycle(rw.snapshot(), p);
  // The other tenant's 6-GPU job does not fit the 4 unreserved GPUs, and says why.
  const PendingReason* why = reason_of(d, other);
  ASSERT_NE(why, nullptr);
  EXPECT_EQ(why->code, PendingCode::kReservedGpus);
  EXPECT_EQ(why->reservation, 0u);
  EXPECT_EQ(why->reserved_gpu_milli, 4000);
  EXPECT_EQ(why->free_gpu_milli, 8000 - 4000);
  EXPECT_NE(describe(*why, "deadline").find("reservation deadline"), std::string::npos);
  // Its 4-GPU job takes the unreserved GPUs; the owner's takes the reserved ones.
  const Start* s = find_start(d, small);
  ASSERT_NE(s, nullptr);
  for (GpuId g : gpus_of(*s)) EXPECT_LT(g, 4u);
  const Start* o = find_start(d, owner);
  ASSERT_NE(o, nullptr);
  EXPECT_EQ(gpus_of(*o), (std::set<GpuId>{4, 5, 6, 7}));
}

TEST(ReservedGpus, AJobKeptFromThemSaysSoAndHoldsNothingBackWhileTheirOwnerUsesThem) {
  ReservedWorld rw;
  rw.w.now = 1500;
  // The owner runs on the reserved GPUs: when it ends they are still not the others'.
  rw.w.add_running(gang("owner", 1, 4, 0, 1), testing::whole_gpus(rw.w.cluster, 0, 4, 4), 1000);
  const JobId big = rw.w.add_pending(gang("big", 1, 6, 0, 0));
  const JobId small = rw.w.add_pending(gang("small", 1, 2, 1, 0));  // no estimate
  // (fair: big is over its share of 4 GPUs too, and may not reclaim; the reservation is the
  // nearer cause.)
  for (const char* policy : {"fifo", "fair"}) {
    SCOPED_TRACE(policy);
    const Decisions d = schedule_cycle(rw.snapshot(), make_policy(policy, 1));  // EASY
    ASSERT_NE(reason_of(d, big), nullptr);
    EXPECT_EQ(reason_of(d, big)->code, PendingCode::kReservedGpus);
    EXPECT_EQ(reason_of(d, big)->reserved_gpu_milli, 4000);
    // big waits for the window, not for running jobs: it is not EASY's head, and small starts.
    EXPECT_NE(find_start(d, small), nullptr);
  }
}

TEST(ReservedGpus, BeforeTheWindowOnlyJobsThatEndByItsStart) {
  for (const double limit : {kUnknown, 600.0, 400.0}) {
    SCOPED_TRACE("time limit " + std::to_string(limit));
    ReservedWorld rw;
    rw.w.now = 500;  // the window begins in 500 s
    JobSpec big = gang("big", 1, 8, 0, /*tenant=*/0);
    big.time_limit = limit;
    big.duration_estimate = 100;  // an estimate is not a promise: only the limit counts
    const JobId id = rw.w.add_pending(big);
    const Decisions d = schedule_cycle(rw.snapshot(), make_policy("fifo", 1));
    const bool ends_in_time = limit >= 0 && limit <= 500;
    EXPECT_EQ(find_start(d, id) != nullptr, ends_in_time);
    if (!ends_in_time) {
      EXPECT_EQ(reason_of(d, id)->code, PendingCode::kReservedGpus);
    }
  }
}

TEST(ReservedGpus, AfterTheWindowTheyAreEveryonesAgain) {
  ReservedWorld rw;
  rw.w.now = 2000;
  const JobId id = rw.w.add_pending(gang("big", 1, 8, 0, /*tenant=*/0));
  EXPECT_NE(find_start(schedule_cycle(rw.snapshot(), make_policy("fifo", 1)), id), nullptr);
}

TEST(ReservedGpus, AUsersReservationIsForThatUserOnly) {
  ReservedWorld rw;
  rw.r.user = 7;
  rw.w.now = 1500;
  JobSpec mine = gang("mine", 1, 2, 0, 1);
  mine.user = 7;
  JobSpec colleague = gang("colleague", 1, 6, 1, 1);
  colleague.user = 8;
  const JobId c = rw.w.add_pending(colleague);
  const JobId m = rw.w.add_pending(mine);
  Policy p = make_policy("fifo", 1);
  p.backfill = Backfill::kGreedy;
  const Decisions d = schedule_cycle(rw.snapshot(), p);
  EXPECT_EQ(find_start(d, c), nullptr);
  EXPECT_EQ(reason_of(d, c)->code, PendingCode::kReservedGpus);
  ASSERT_NE(find_start(d, m), nullptr);
}

TEST(ReservedGpus, PreemptionNeverFreesThemForAnotherTenant) {
  ReservedWorld rw;
  rw.w.now = 1500;
  // The owner runs on the reserved GPUs, a research job on the rest.
  rw.w.add_running(gang("owner", 1, 4, 0, 1), testing::whole_gpus(rw.w.cluster, 0, 4, 4), 1000);
  const JobId low = rw.w.add_running(gang("low", 1, 4, 0, 0, PriorityClass::kBestEffort),
                                     testing::whole_gpus(rw.w.cluster, 0, 0, 4), 0);
  // A production job of tenant 0 needs 6 GPUs: preempting the best-effort job frees 4, and
  // the owner's reserved GPUs are not its to take, so nothing is preempted for it.
  const JobId big = rw.w.add_pending(gang("big", 1, 6, 10, 0, PriorityClass::kProduction));
  Policy p = make_policy("fifo", 1);
  p.preemption = true;
  p.reclaim = true;
  const Decisions d = schedule_cycle(rw.snapshot(), p);
  EXPECT_EQ(find_start(d, big), nullptr);
  EXPECT_TRUE(d.preemptions.empty());
  // A 4-GPU production job does preempt the best-effort one, and lands outside the reservation.
  ReservedWorld rw2;
  rw2.w.now = 1500;
  rw2.w.add_running(gang("owner", 1, 2, 0, 1), testing::whole_gpus(rw2.w.cluster, 0, 4, 2), 1000);
  const JobId low2 = rw2.w.add_running(gang("low", 1, 4, 0, 0, PriorityClass::kBestEffort),
                                       testing::whole_gpus(rw2.w.cluster, 0, 0, 4), 0);
  const JobId four = rw2.w.add_pending(gang("four", 1, 4, 10, 0, PriorityClass::kProduction));
  const Decisions d2 = schedule_cycle(rw2.snapshot(), p);
  ASSERT_EQ(d2.preemptions.size(), 1u);
  EXPECT_EQ(d2.preemptions[0].job, low2);
  const Start* s = find_start(d2, four);
  ASSERT_NE(s, nullptr);
  for (GpuId g : gpus_of(*s)) EXPECT_LT(g, 4u);
  (void)low;
}

TEST(ReservedGpus, TheCallersLedgerComesBackUnchanged) {
  ReservedWorld rw;
  rw.w.now = 1500;
  rw.w.add_running(gang("half", 1, 2, 0, 0), testing::whole_gpus(rw.w.cluster, 0, 3, 2), 0);
  rw.w.add_pending(gang("a", 1, 3, 0, 0));
  rw.w.add_pending(gang("b", 1, 2, 1, 1));
  ClusterState ledger = rw.w.state;
  Snapshot snap = rw.snapshot();
  snap.scratch = &ledger;
  schedule_cycle(snap, make_policy("fifo", 1));
  for (GpuId g = 0; g < rw.w.cluster.num_gpus(); ++g) {
    EXPECT_EQ(ledger.gpu_free(g), rw.w.state.gpu_free(g)) << "GPU " << g;
  }
  EXPECT_EQ(ledger.allocated_milli(), rw.w.state.allocated_milli());
}

}  // namespace
}  // namespace tessera
