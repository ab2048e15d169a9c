// Gavel's rounds (engine/round_plan.h): over many rounds each job's time on each type
// approaches its LP share; a round never over-commits a type; a job runs on one type at most.
#include "engine/round_plan.h"

#include <gtest/gtest.h>

#include "engine/rng.h"

namespace tessera {
namespace {

// Plays `rounds` rounds, each job's received fractions updated after each; returns the rounds
// each job spent on each type.
std::vector<std::vector<int>> play(std::vector<RoundJob> jobs, const std::vector<double>& capacity,
                                   int rounds) {
  std::vector<std::vector<int>> got(jobs.size(), std::vector<int>(capacity.size(), 0));
  for (int r = 1; r <= rounds; ++r) {
    const std::vector<int32_t> plan = plan_round(jobs, capacity);
    std::vector<double> used(capacity.size(), 0.0);
    for (size_t j = 0; j < jobs.size(); ++j) {
      jobs[j].running_on = plan[j];
      if (plan[j] >= 0) {
        ++got[j][plan[j]];
        used[plan[j]] += jobs[j].gpus;
      }
      for (size_t t = 0; t < capacity.size(); ++t) {
        jobs[j].received[t] = static_cast<double>(got[j][t]) / r;
      }
    }
    for (size_t t = 0; t < capacity.size(); ++t) EXPECT_LE(used[t], capacity[t]);
  }
  return got;
}

TEST(RoundPlan, TwoJobsWithHalfAV100EachTakeTurns) {
  std::vector<RoundJob> jobs(2);
  for (RoundJob& j : jobs) {
    j.share = {0.5, 0};
    j.received = {0, 0};
  }
  const auto got = play(jobs, {1, 0}, 10);
  EXPECT_EQ(got[0][0], 5);
  EXPECT_EQ(got[1][0], 5);
}

TEST(RoundPlan, TimeOnEachTypeFollowsTheShares) {
  // Three jobs on one V100 and one K80: shares as an LP might give them.
  std::vector<RoundJob> jobs(3);
  jobs[0].share = {0.6, 0.2};
  jobs[1].share = {0.3, 0.4};
  jobs[2].share = {0.1, 0.4};
  for (RoundJob& j : jobs) j.received = {0, 0};
  const int rounds = 100;
  const auto got = play(jobs, {1, 1}, rounds);
  for (size_t j = 0; j < 3; ++j) {
    for (size_t t = 0; t < 2; ++t) {
      EXPECT_NEAR(static_cast<double>(got[j][t]) / rounds, jobs[j].share[t], 0.06)
          << "job " << j << " type " << t;
    }
  }
}

TEST(RoundPlan, GangsFitWholeAndTiesKeepAJobWhereItRuns) {
  // A 4-GPU gang and two 1-GPU jobs on 4 GPUs: the gang never shares the type with them.
  std::vector<RoundJob> jobs(3);
  jobs[0].gpus = 4;
  for (RoundJob& j : jobs) {
    j.share = {1.0 / 3};
    j.received = {0};
  }
  const auto plan = plan_round(jobs, {4});
  EXPECT_EQ(plan, (std::vector<int32_t>{0, -1, -1}));
  // Equal priorities: the job already on a type stays there.
  std::vector<RoundJob> two(2);
  for (RoundJob& j : two) {
    j.share = {0.5, 0.5};
    j.received = {0.5, 0.5};
  }
  two[1].running_on = 0;
  two[0].running_on = 1;
  EXPECT_EQ(plan_round(two, {1, 1}), (std::vector<int32_t>{1, 0}));
}

// A stay factor keeps a running job in place against a claim that is not clearly stronger.
TEST(RoundPlan, AStayFactorKeepsARunningJobAgainstAWeakerClaim) {
  std::vector<RoundJob> jobs(2);
  for (RoundJob& j : jobs) j.share = {0.5};
  jobs[0].running_on = 0;
  jobs[0].received = {0.6};  // priority 0.83, x 2 staying = 1.67
  jobs[1].received = {0.4};  // priority 1.25
  EXPECT_EQ(plan_round(jobs, {1}, 1.0), (std::vector<int32_t>{-1, 0}));
  EXPECT_EQ(plan_round(jobs, {1}, 2.0), (std::vector<int32_t>{0, -1}));
}

}  // namespace
}  // namespace tessera
