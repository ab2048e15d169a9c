// Goodput-aware allocation in the engine (docs/goodput.md): the goodput model a job's reports
// teach the scheduler, and the round's GPU allocation over the jobs' speedup curves.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "engine/goodput_allocation.h"
#include "engine/goodput_model.h"

namespace tessera {
namespace {

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

}  // namespace
}  // namespace tessera
