// Gavel's heterogeneity LP (engine/type_shares.h) on small cases whose optimum is known by hand,
// and the constraints on random ones.
#include "engine/type_shares.h"

#include <gtest/gtest.h>

#include "engine/rng.h"
#include "input_error_util.h"

namespace tessera {
namespace {

// Types: 0 = V100 (fast), 1 = K80 (slow).
TEST(TypeShares, MaxThroughputGivesTheFastTypeToWhoGainsMostFromIt) {
  // Job 0 runs 10x faster on a V100, job 1 only 1.25x; one GPU of each type.
  TypeShareInput in;
  in.throughput = {{10, 1}, {1.25, 1}};
  in.gpus = {1, 1};
  in.capacity = {1, 1};
  const TypeShares s = solve_type_shares(in, TypeShareObjective::kMaxThroughput);
  EXPECT_NEAR(s.x[0][0], 1.0, 1e-6);
  EXPECT_NEAR(s.x[1][1], 1.0, 1e-6);
  EXPECT_NEAR(s.x[0][1] + s.x[1][0], 0.0, 1e-6);
  // Max-min does not: job 1 would fall below what an equal share gives it (half of each type).
  const TypeShares f = solve_type_shares(in, TypeShareObjective::kMaxMinFairness);
  EXPECT_NEAR(f.x[0][0], 0.5, 1e-6);
  EXPECT_NEAR(f.objective, 1.0, 1e-6);
}

// Gavel's sharing incentive: every job at least as well off as under an equal share, and jobs
// whose speed-ups differ trade time so that some are better off. V100, P100, K80, one of each.
TEST(TypeShares, MaxMinFairnessTradesTimeSoThatNobodyLosesAndSomeGain) {
  TypeShareInput in;
  in.throughput = {{4, 2, 1}, {3, 2.5, 1}, {1, 1, 1}};
  in.gpus = {1, 1, 1};
  in.capacity = {1, 1, 1};
  const TypeShares s = solve_type_shares(in, TypeShareObjective::kMaxMinFairness);
  const double equal[] = {7.0 / 3, 6.5 / 3, 1.0};
  for (size_t j = 0; j < 3; ++j) {
    EXPECT_GE(effective_throughput(in, s, j), equal[j] - 1e-6) << j;
  }
  EXPECT_GE(s.objective, 1 - 1e-6);
  EXPECT_GT(effective_throughput(in, s, 0), equal[0] + 0.5);  // the V100's keenest user gains
}

TEST(TypeShares, MaxMinFairnessSharesTheFastTypeBetweenEqualJobs) {
  // Two identical jobs that only run on the one V100: half of its time each.
  TypeShareInput in;
  in.throughput = {{4, 0}, {4, 0}};
  in.gpus = {1, 1};
  in.capacity = {1, 3};
  const TypeShares s = solve_type_shares(in, TypeShareObjective::kMaxMinFairness);
  EXPECT_NEAR(s.x[0][0], 0.5, 1e-6);
  EXPECT_NEAR(s.x[1][0], 0.5, 1e-6);
  EXPECT_EQ(s.x[0][1], 0.0);  // it cannot run on a K80
}

TEST(TypeShares, WeightsScaleTheFloor) {
  // One V100, two identical jobs, job 0 of weight 2: it gets half as much (the floor is on
  // throughput / weight), so 1/3 against 2/3.
  TypeShareInput in;
  in.throughput = {{1, 0}, {1, 0}};
  in.gpus = {1, 1};
  in.capacity = {1, 0};
  in.weight = {2, 1};
  const TypeShares s = solve_type_shares(in, TypeShareObjective::kMaxMinFairness);
  EXPECT_NEAR(s.x[0][0], 2.0 / 3, 1e-6);
  EXPECT_NEAR(s.x[1][0], 1.0 / 3, 1e-6);
}

TEST(TypeShares, LeftoverCapacityGoesToWhoCanUseIt) {
  // Three K80s and one V100; job 0 runs only on the V100, job 1 on both. The max-min floor is
  // set by job 0 (the V100 alone); the second stage gives job 1 the K80s as well, not idle.
  TypeShareInput in;
  in.throughput = {{2, 0}, {2, 1}};
  in.gpus = {1, 1};
  in.capacity = {1, 3};
  const TypeShares s = solve_type_shares(in, TypeShareObjective::kMaxMinFairness);
  EXPECT_NEAR(s.x[0][0] + s.x[1][0], 1.0, 1e-6);  // the V100 is used all the time
  EXPECT_NEAR(s.x[1][0] + s.x[1][1], 1.0, 1e-6);  // job 1 runs all the time
}

TEST(TypeShares, ConstraintsHoldOnRandomProblems) {
  Rng rng(7);
  for (int round = 0; round < 20; ++round) {
    TypeShareInput in;
    const size_t types = 1 + rng.below(3);
    const size_t jobs = 1 + rng.below(30);
    for (size_t t = 0; t < types; ++t) in.capacity.push_back(static_cast<double>(rng.below(9)));
    in.capacity[0] = std::max(in.capacity[0], 8.0);  // every job fits somewhere
    for (size_t j = 0; j < jobs; ++j) {
      std::vector<double> row;
      for (size_t t = 0; t < types; ++t) row.push_back(static_cast<double>(rng.below(5)));
      row[0] = 1 + row[0];
      in.throughput.push_back(row);
      in.gpus.push_back(static_cast<double>(1 << rng.below(4)));
    }
    for (const auto objective :
         {TypeShareObjective::kMaxMinFairness, TypeShareObjective::kMaxThroughput}) {
      const TypeShares s = solve_type_shares(in, objective);
      std::vector<double> used(types, 0.0);
      for (size_t j = 0; j < jobs; ++j) {
        double time = 0;
        for (size_t t = 0; t < types; ++t) {
          EXPECT_GE(s.x[j][t], 0.0);
          if (in.throughput[j][t] == 0 || in.gpus[j] > in.capacity[t]) {
            EXPECT_EQ(s.x[j][t], 0.0);
          }
          time += s.x[j][t];
          used[t] += in.gpus[j] * s.x[j][t];
        }
        EXPECT_LE(time, 1 + 1e-6);
        // Max-min: nobody is left with nothing.
        if (objective == TypeShareObjective::kMaxMinFairness) {
          EXPECT_GT(effective_throughput(in, s, j), 0.0);
        }
      }
      for (size_t t = 0; t < types; ++t) EXPECT_LE(used[t], in.capacity[t] + 1e-6);
    }
  }
}

// Gavel's continuous setup near saturation: hundreds of jobs of a few models. Such LPs are so
// degenerate that GLPK's simplex method stalled on them for minutes; jobs alike are solved as
// one class, and each gets the same shares.
TEST(TypeShares, ManyJobsAlikeGetTheSameShares) {
  const std::vector<std::vector<double>> models = {
      {1.0, 0.5, 0.2}, {1.0, 0.8, 0.5}, {1.0, 1.0, 1.0}, {1.0, 0.4, 0.1}};
  TypeShareInput in;
  in.capacity = {36, 36, 36};
  for (int j = 0; j < 600; ++j) {
    in.throughput.push_back(models[static_cast<size_t>(j) % models.size()]);
    in.gpus.push_back(1);
  }
  const TypeShares s = solve_type_shares(in, TypeShareObjective::kMaxMinFairness);
  ASSERT_EQ(s.x.size(), 600u);
  std::vector<double> used(3, 0.0);
  for (size_t j = 0; j < s.x.size(); ++j) {
    EXPECT_EQ(s.x[j], s.x[j % models.size()]) << j;  // alike: the same shares
    double time = 0;
    for (size_t t = 0; t < 3; ++t) time += s.x[j][t], used[t] += s.x[j][t];
    EXPECT_LE(time, 1 + 1e-9);
    EXPECT_GT(effective_throughput(in, s, j), 0);  // nobody starves
  }
  for (size_t t = 0; t < 3; ++t) EXPECT_NEAR(used[t], 36, 1e-6);  // nothing idles
  EXPECT_GT(s.objective, 0);
}

TEST(TypeShares, MalformedInputIsNamed) {
  TypeShareInput in;
  in.throughput = {{1, 0}};
  in.gpus = {4};
  in.capacity = {2, 8};
  const auto error = [&](TypeShareObjective o) {
    try {
      solve_type_shares(in, o);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_TRUE(testing::Contains(error(TypeShareObjective::kMaxMinFairness),
                                "job 0 has no GPU type it can run on"));
  in.gpus = {1, 1};
  EXPECT_TRUE(testing::Contains(error(TypeShareObjective::kMaxThroughput),
                                "gpus has 2 entries for 1 jobs"));
}

}  // namespace
}  // namespace tessera
