// Goodput-aware allocation in the engine (docs/goodput.md): the goodput model a job's reports
// teach the scheduler, and the round's GPU allocation over the jobs' speedup curves.
#include <gtest/gtest.h>

#include <cmath>
#include <deque>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "engine/goodput_allocation.h"
#include "engine/goodput_model.h"
#include "engine/goodput_round.h"
#include "engine/placement.h"
#include "engine/rng.h"
#include "model/cluster_spec.h"
#include "test_util.h"

namespace tessera {
namespace {

using testing::gang;

BatchLimits limits() {
  BatchLimits l;
  l.init_batch = 128;
  l.max_batch = 4096;
  l.min_local = 16;
  l.max_local = 256;
  return l;
}

TEST(GoodputSplits, StayInsideTheBatchLimits) {
  const BatchLimits l = limits();
  for (int replicas : {1, 2, 4, 8, 16}) {
    const std::vector<BatchSplit> splits = candidate_splits(l, replicas);
    ASSERT_FALSE(splits.empty()) << replicas;
    for (const BatchSplit& s : splits) {
      EXPECT_GE(s.atomic_bsz, l.min_local);
      EXPECT_LE(s.atomic_bsz, l.max_local);
      EXPECT_GE(s.batch(replicas), std::max(l.init_batch, l.min_local * replicas));
      // The ceil() of a split may round a little above the largest batch, never more than one
      // atomic batch per accumulation step and replica.
      EXPECT_LE(s.batch(replicas), l.max_batch + replicas * (s.accum_steps + 1));
      // A single GPU above the initial batch accumulates (its gradient statistics need two
      // micro-batches).
      if (replicas == 1 && s.batch(1) > l.init_batch) {
        EXPECT_GE(s.accum_steps, 1);
      }
    }
  }
  // 300 GPUs need at least 300 x 16 samples: more than the largest batch.
  EXPECT_TRUE(candidate_splits(l, 300).empty());
}

TEST(GoodputSplits, FixedBatchSplitsAsPollux) {
  BatchLimits l = limits();
  l.fixed_batch = 2048;
  const std::vector<BatchSplit> splits = candidate_splits(l, 4);
  ASSERT_EQ(splits.size(), 1u);
  // 2048 / 4 = 512 per GPU, above 256: one accumulation step of 256.
  EXPECT_EQ(splits[0].atomic_bsz, 256);
  EXPECT_EQ(splits[0].accum_steps, 1);
  EXPECT_EQ(splits[0].batch(4), 2048);
}

// Reports from a job whose step is 10 ms + 1 ms per sample of compute, and 40 ms of
// synchronisation within a node, 100 ms across nodes.
void report_profile(GoodputModel& m) {
  const auto step = [](int nodes, int replicas, int atomic) {
    const double compute = 0.010 + 0.001 * atomic;
    const double sync = nodes > 1 ? 0.100 : replicas > 1 ? 0.040 : 0.002;
    return StepReport{nodes, replicas, atomic, compute + sync, sync};
  };
  m.report(step(1, 1, 64));
  m.report(step(1, 1, 128));
  m.report(step(1, 4, 128));
  m.report(step(2, 8, 128));
}

TEST(GoodputModel, AJobThatHasNotReportedScalesPerfectly) {
  GoodputModel m(limits());
  EXPECT_FALSE(m.profiled());
  EXPECT_DOUBLE_EQ(m.speedup(2, 8), 8.0);
  EXPECT_LT(m.remaining_gpu_seconds(), 0);
}

TEST(GoodputModel, FitsTheReportedStepTimes) {
  GoodputModel m(limits());
  report_profile(m);
  m.report(GradientStats{1.0, 100.0});
  ASSERT_TRUE(m.profiled());
  EXPECT_EQ(m.max_profiled_replicas(), 8);
  // Reported configurations are predicted as reported (compute + sync).
  EXPECT_NEAR(m.iteration_time(1, 1, BatchSplit{64, 0}), 0.010 + 0.064 + 0.002, 1e-9);
  EXPECT_NEAR(m.iteration_time(1, 4, BatchSplit{128, 0}), 0.138 + 0.040, 1e-9);
  EXPECT_NEAR(m.iteration_time(2, 8, BatchSplit{128, 0}), 0.138 + 0.100, 1e-9);
  // An accumulation step repeats the compute, not the synchronisation.
  EXPECT_NEAR(m.iteration_time(1, 4, BatchSplit{128, 1}), 2 * 0.138 + 0.040, 1e-9);
  // More GPUs help, across nodes less than within one.
  EXPECT_GT(m.speedup(1, 4), 1.5);
  EXPECT_GT(m.speedup(2, 8), m.speedup(1, 4));
  EXPECT_LT(m.speedup(2, 8), 8.0);
}

TEST(GoodputModel, EfficiencyFollowsTheGradientNoise) {
  GoodputModel m(limits());
  report_profile(m);
  // At the initial batch the efficiency is 1 whatever the noise.
  m.report(GradientStats{1.0, 0.0});
  EXPECT_DOUBLE_EQ(m.efficiency(128), 1.0);
  // No noise: a batch 4x larger makes 1/4 the progress per sample.
  EXPECT_NEAR(m.efficiency(512), 0.25, 1e-12);
  const int quiet = m.best(2, 8).split.batch(8);
  // Much noise (a large gradient noise scale): a larger batch loses almost nothing.
  m.report(GradientStats{1.0, 1e6});
  EXPECT_GT(m.efficiency(512), 0.99);
  const int noisy = m.best(2, 8).split.batch(8);
  // So the best batch on the same GPUs grows with the noise.
  EXPECT_GT(noisy, quiet);
}

TEST(GoodputModel, RemainingTimeFromProgress) {
  GoodputModel m(limits());
  report_profile(m);
  m.report(GradientStats{1.0, 100.0});
  m.report_progress(250, 1000);
  const double per_second = m.best(1, 1).goodput / 128;  // progress per second on one GPU
  EXPECT_NEAR(m.remaining_gpu_seconds(), 750 / per_second, 1e-6);
  m.report_progress(1000, 1000);
  EXPECT_DOUBLE_EQ(m.remaining_gpu_seconds(), 0.0);
}

TEST(GoodputModel, RefusesBadInput) {
  BatchLimits bad = limits();
  bad.max_batch = 64;  // below the initial batch
  EXPECT_THROW(GoodputModel{bad}, std::invalid_argument);
  GoodputModel m(limits());
  EXPECT_THROW(m.report(StepReport{1, 1, 64, 0.1, 0.2}), std::invalid_argument);  // sync > step
  EXPECT_THROW(m.report(StepReport{1, 0, 64, 0.1, 0.0}), std::invalid_argument);
  EXPECT_THROW(m.report_progress(-1, 10), std::invalid_argument);
}

// ---- allocation ----

GoodputDemand linear(int max, double attained = 0, int current = 0) {
  GoodputDemand d;
  d.speedup.resize(static_cast<size_t>(max) + 1);
  std::iota(d.speedup.begin(), d.speedup.end(), 0.0);
  d.attained_gpu_seconds = attained;
  d.current = current;
  return d;
}

// Speedup n^0.5: each GPU adds less.
GoodputDemand diminishing(int max) {
  GoodputDemand d;
  for (int n = 0; n <= max; ++n) d.speedup.push_back(std::sqrt(static_cast<double>(n)));
  return d;
}

GoodputAllocationOptions las() {
  GoodputAllocationOptions o;
  o.priority = GoodputPriority::kLeastAttained;
  o.service_scale = 3600;
  return o;
}

TEST(GoodputAllocation, NeverMoreThanTheClusterOrAJobsMaximum) {
  std::vector<GoodputDemand> jobs = {linear(8), diminishing(16), linear(2), diminishing(64)};
  for (int gpus : {0, 1, 3, 7, 16, 100}) {
    const std::vector<int> n = allocate_goodput(jobs, gpus, las());
    ASSERT_EQ(n.size(), jobs.size());
    EXPECT_LE(std::accumulate(n.begin(), n.end(), 0), gpus);
    for (size_t j = 0; j < jobs.size(); ++j) {
      EXPECT_GE(n[j], 0);
      EXPECT_LE(n[j], static_cast<int>(jobs[j].speedup.size()) - 1);
    }
  }
  // Enough GPUs for every job's maximum: all get it (any speedup gain is worth a GPU).
  const std::vector<int> all = allocate_goodput(jobs, 100, las());
  EXPECT_EQ(all, (std::vector<int>{8, 16, 2, 64}));
}

TEST(GoodputAllocation, ScalableJobsGetMoreOfTheGpus) {
  // Equal weights: 8 GPUs between a job that scales linearly and one with diminishing returns.
  const std::vector<GoodputDemand> jobs = {diminishing(8), linear(8)};
  const std::vector<int> n = allocate_goodput(jobs, 8, las());
  EXPECT_GT(n[1], n[0]);
  EXPECT_GE(n[0], 1);  // its first GPU is worth as much as anyone's
  EXPECT_EQ(n[0] + n[1], 8);
}

TEST(GoodputAllocation, RigidGangsAllOrNothing) {
  GoodputDemand gang;
  gang.speedup = {0, 0, 0, 0, 4};
  gang.rigid = true;
  std::vector<GoodputDemand> jobs = {gang, linear(8, /*attained=*/1e6)};
  // 3 GPUs: the gang cannot run, the other job takes them.
  std::vector<int> n = allocate_goodput(jobs, 3, las());
  EXPECT_EQ(n[0], 0);
  EXPECT_EQ(n[1], 3);
  // 6 GPUs: the gang (less served, so weighted more) gets its 4.
  n = allocate_goodput(jobs, 6, las());
  EXPECT_EQ(n[0], 4);
  EXPECT_EQ(n[1], 2);
}

TEST(GoodputAllocation, LeastAttainedServiceFirst) {
  // Two identical jobs, 4 GPUs: the one with less service gets them.
  const std::vector<GoodputDemand> jobs = {linear(4, 100000), linear(4, 0)};
  const std::vector<int> n = allocate_goodput(jobs, 4, las());
  EXPECT_EQ(n, (std::vector<int>{0, 4}));
}

TEST(GoodputAllocation, ShortestRemainingFirst) {
  GoodputAllocationOptions o;
  o.priority = GoodputPriority::kShortestRemaining;
  o.service_scale = 3600;
  std::vector<GoodputDemand> jobs = {linear(4), linear(4), linear(4)};
  jobs[0].remaining_gpu_seconds = 50000;
  jobs[1].remaining_gpu_seconds = 600;
  jobs[2].remaining_gpu_seconds = -1;  // no progress reported: weighted by attained service
  jobs[2].attained_gpu_seconds = 1e7;
  const std::vector<int> n = allocate_goodput(jobs, 4, o);
  EXPECT_EQ(n, (std::vector<int>{0, 4, 0}));
}

TEST(GoodputAllocation, ARestartMustPayForItself) {
  GoodputAllocationOptions o = las();
  o.min_restart_penalty = o.max_restart_penalty = 0.3;
  // Holding 4 with a speedup of 3; 8 would give 3.9 (30 % more): not worth a restart at 30 %.
  GoodputDemand d;
  d.speedup = {0, 1, 1.8, 2.5, 3.0, 3.3, 3.5, 3.7, 3.9};
  d.current = 4;
  d.run_seconds = 10000;
  GoodputDemand other = linear(4, 1e9);  // wants the GPUs, but weighs little
  std::vector<GoodputDemand> jobs = {d, other};
  EXPECT_EQ(allocate_goodput(jobs, 8, o)[0], 4);
  // Without the penalty it grows to all 8 (its GPUs 5-8 outweigh the other job's).
  o.min_restart_penalty = o.max_restart_penalty = 0;
  EXPECT_EQ(allocate_goodput(jobs, 8, o)[0], 8);
}

TEST(GoodputAllocation, IdleGpusGoToJobsThatRanLong) {
  GoodputAllocationOptions o = las();
  o.max_restart_penalty = o.min_restart_penalty = 0.3;
  GoodputDemand d;
  d.speedup = {0, 1, 1.8, 2.5, 3.0, 3.3, 3.5, 3.7, 3.9};
  d.current = 4;
  d.run_seconds = 3000;  // 30 s of restart is 1 % of what it has run
  std::vector<GoodputDemand> jobs = {d};
  // Nobody else wants GPUs 5-8: at the floor they would idle, at 1 % it takes them.
  o.min_restart_penalty = 0.3;
  EXPECT_EQ(allocate_goodput(jobs, 8, o)[0], 8);
}

TEST(GoodputAllocation, DeterministicAndRefusesBadOptions) {
  const std::vector<GoodputDemand> jobs = {linear(4), linear(4), linear(4)};
  // Equal jobs: ties go to the lower index, every time.
  EXPECT_EQ(allocate_goodput(jobs, 4, las()), (std::vector<int>{4, 0, 0}));
  EXPECT_EQ(allocate_goodput(jobs, 4, las()), allocate_goodput(jobs, 4, las()));
  GoodputAllocationOptions bad;
  bad.max_restart_penalty = 1.0;
  EXPECT_THROW(allocate_goodput(jobs, 4, bad), std::invalid_argument);
  bad = GoodputAllocationOptions{};
  bad.service_scale = 0;
  EXPECT_THROW(allocate_goodput(jobs, 4, bad), std::invalid_argument);
}

TEST(GoodputAllocation, EachGroupGetsItsEntitlementBeforeAnyBorrows) {
  // Group 0 has three jobs that gain more (they have attained nothing), group 1 one that has run
  // long; entitled to 4 GPUs each of 8.
  std::vector<GoodputDemand> jobs = {linear(8), linear(8), linear(8), linear(8, 1e6)};
  GoodputGroups groups;
  groups.groups_of = {{0}, {0}, {0}, {1}};
  groups.entitled = {4, 4};
  const std::vector<int> blind = allocate_goodput(jobs, 8, las());
  EXPECT_EQ(blind[3], 0);  // without groups the long-running job gets nothing
  const std::vector<int> n = allocate_goodput(jobs, 8, las(), &groups);
  EXPECT_EQ(n[3], 4);
  EXPECT_EQ(n[0] + n[1] + n[2], 4);
  // What a group cannot use, others borrow.
  jobs[3] = linear(1, 1e6);
  const std::vector<int> b = allocate_goodput(jobs, 8, las(), &groups);
  EXPECT_EQ(b[3], 1);
  EXPECT_EQ(b[0] + b[1] + b[2], 7);
}

// ---- a round over live jobs (engine/goodput_round.h) ----

// Invariants of a goodput round, under each priority, over random clusters of running and
// waiting adaptive gangs and a queue tree: every job gets 0 or a size in its range (a rigid gang
// all or nothing), the sizes fit the GPUs the round plans on, and the answer is the same for
// the same seed.
class EveryGoodputPriority : public ::testing::TestWithParam<GoodputPriority> {};

TEST_P(EveryGoodputPriority, KeepsGangsWholeWithinTheGpusAndIsDeterministic) {
  QueueTree t;
  const QueueId research = t.add(kRootQueue, testing::queue_spec("research", 2, 4));
  t.add(kRootQueue, testing::queue_spec("prod", 1, 4));
  t.add(research, testing::queue_spec("nlp", 1));
  t.add(research, testing::queue_spec("vision", 1));
  t.finish();
  Interner tenants;
  for (const char* name : {"nlp", "vision", "prod"}) tenants.intern(name);
  t.bind(tenants, "test");
  GoodputAllocationOptions o;
  o.priority = GetParam();
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    const Cluster c = make_uniform_cluster(1, 2, 2, 4);  // 16 GPUs
    ClusterState ledger(c);
    Rng rng(seed);
    std::deque<JobSpec> specs;
    std::deque<Allocation> allocs;
    std::deque<GoodputModel> models;
    std::vector<GoodputRoundJob> jobs;
    for (int i = 0; i < 8; ++i) {
      const int per = 1 + static_cast<int>(rng.below(2));
      const int min = 1 + static_cast<int>(rng.below(2));
      const int max = rng.below(4) == 0 ? min : min + static_cast<int>(rng.below(4));
      specs.push_back(
          gang("j" + std::to_string(i), min, per, 0, static_cast<TenantId>(rng.below(3))));
      specs.back().max_members = max;
      models.emplace_back(limits());
      if (rng.below(2) == 0) report_profile(models.back());
      GoodputRoundJob j;
      j.spec = &specs.back();
      j.model = &models.back();
      Allocation a;
      if (rng.below(2) == 0 && make_scorer("bestfit")->place(ledger, specs.back(), min, rng, a)) {
        allocs.push_back(a);
        j.alloc = &allocs.back();
        j.run_seconds = 100.0 * static_cast<double>(rng.below(50));
        j.attained_gpu_seconds = j.run_seconds * a.members() * per;
      } else if (!a.empty()) {
        ledger.release(a);
      }
      jobs.push_back(j);
    }
    const auto bestfit = make_scorer("bestfit");
    const std::vector<int32_t> m = plan_goodput_round(jobs, ledger, *bestfit, o, seed, &t);
    EXPECT_EQ(m, plan_goodput_round(jobs, ledger, *bestfit, o, seed, &t)) << seed;
    ASSERT_EQ(m.size(), jobs.size());
    int gpus = 0;
    for (size_t k = 0; k < jobs.size(); ++k) {
      const JobSpec& s = *jobs[k].spec;
      if (m[k] != 0) {
        EXPECT_GE(m[k], s.min_members) << "seed " << seed << " job " << k;
        EXPECT_LE(m[k], s.max_members) << "seed " << seed << " job " << k;
      }
      if (s.min_members == s.max_members) {
        EXPECT_TRUE(m[k] == 0 || m[k] == s.max_members);
      }
      gpus += m[k] * s.demand.gpus;
    }
    EXPECT_LE(gpus, 16) << "seed " << seed;
  }
}

INSTANTIATE_TEST_SUITE_P(Priority, EveryGoodputPriority,
                         ::testing::Values(GoodputPriority::kShortestRemaining,
                                           GoodputPriority::kLeastAttained));

TEST(GoodputRound, EqualQueuesShareTheGpusWhateverTheirJobCounts) {
  QueueTree t;
  t.add(kRootQueue, testing::queue_spec("a", 1));
  t.add(kRootQueue, testing::queue_spec("b", 1));
  t.finish();
  Interner tenants;
  tenants.intern("a");
  tenants.intern("b");
  t.bind(tenants, "test");
  const Cluster c = make_uniform_cluster(1, 1, 2, 4);  // 8 GPUs
  ClusterState ledger(c);
  std::deque<JobSpec> specs;
  std::deque<GoodputModel> models;
  std::vector<GoodputRoundJob> jobs;
  // Tenant a: three waiting jobs; tenant b: one. All unprofiled (4 GPUs each at most).
  for (TenantId tenant : {0, 0, 0, 1}) {
    specs.push_back(gang("j", 1, 1, 0, tenant));
    specs.back().max_members = 8;
    models.emplace_back(limits());
    jobs.push_back(GoodputRoundJob{&models.back(), &specs.back(), nullptr, 0, 0});
  }
  const auto bestfit = make_scorer("bestfit");
  const std::vector<int32_t> m = plan_goodput_round(jobs, ledger, *bestfit, {}, 1, &t);
  EXPECT_EQ(m[3], 4);  // b's one job: its half
  EXPECT_EQ(m[0] + m[1] + m[2], 4);
}

}  // namespace
}  // namespace tessera
