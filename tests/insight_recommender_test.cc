// The interference model (IndSD / PacSav per cluster pair, online updates) and the
// recommender's objectives, bin-packing, tie-break and exploration.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "insight/interference_model.h"
#include "insight/recommender.h"

namespace tessera {
namespace {

Candidate cand(uint32_t cluster, double util = 10, double mem = 10, double unc = 1) {
  Candidate c;
  c.cluster = cluster;
  c.uncertainty = unc;
  c.features = {util, mem, 5};
  return c;
}

// Three clusters: 0 pairs well with everyone, 2 is bad beside 1.
InterferenceModel three_clusters() {
  InterferenceModel m(3);
  m.observe(0, 0, 0.05, 0.05, 0.45);
  m.observe(0, 1, 0.10, 0.10, 0.40);
  m.observe(0, 2, 0.02, 0.02, 0.48);
  m.observe(1, 1, 0.30, 0.30, 0.30);
  m.observe(1, 2, 0.80, 0.60, 0.10);
  m.observe(2, 2, 0.20, 0.20, 0.35);
  return m;
}

TEST(InterferenceModel, SpeedsGiveTheSeedStudysDefinitions) {
  InterferenceModel m(2);
  m.observe_speeds(0, 1, 0.5, 0.5);
  EXPECT_DOUBLE_EQ(m.indsd(0, 1), 1.0);   // twice as long
  EXPECT_DOUBLE_EQ(m.pacsav(0, 1), 0.0);  // no saving
  EXPECT_DOUBLE_EQ(m.pair_speed(1, 0), 0.5);
  EXPECT_DOUBLE_EQ(InterferenceModel::pacsav_of_speeds(1, 1), 0.5);
  // Unobserved pairs fall back to the mean of everything observed.
  EXPECT_DOUBLE_EQ(m.indsd(0, 0), 1.0);
  EXPECT_DOUBLE_EQ(m.runs(0, 0), 0);
}

TEST(InterferenceModel, UpdatesAfterARunAndReRanks) {
  InterferenceModel m = three_clusters();
  const auto before = m.ranking(Objective::kMinIndSD);
  EXPECT_EQ(before.front().a, 0u);
  EXPECT_EQ(before.front().b, 2u);
  // Many slow co-located runs of 0 with 2 are observed: the pair drops down the ranking.
  for (int i = 0; i < 20; ++i) m.observe_speeds(0, 2, 0.4, 0.4);
  EXPECT_GT(m.indsd(0, 2), 1.0);
  EXPECT_EQ(m.runs(0, 2), 21);
  const auto after = m.ranking(Objective::kMinIndSD);
  EXPECT_FALSE(after.front().a == 0 && after.front().b == 2);
}

TEST(Recommender, MinIndSDPicksTheLowestIndSDPartner) {
  const InterferenceModel m = three_clusters();
  std::mt19937_64 rng(1);
  const std::vector<Candidate> residents = {cand(1)};
  const std::vector<Candidate> queue = {cand(2), cand(1), cand(0), cand(2)};
  RecommendOptions o;
  o.objective = Objective::kMinIndSD;
  const auto r = recommend(residents, queue, m, o, rng);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->index, 2u);  // cluster 0: IndSD 10 % beside 1
  EXPECT_FALSE(r->explored);
  o.objective = Objective::kMaxPacSav;
  EXPECT_EQ(recommend(residents, queue, m, o, rng)->index, 2u);
}

TEST(Recommender, LowerUncertaintyWinsTies) {
  const InterferenceModel m = three_clusters();
  std::mt19937_64 rng(1);
  const std::vector<Candidate> residents = {cand(1)};
  const std::vector<Candidate> queue = {cand(0, 10, 10, 9), cand(0, 10, 10, 2), cand(0, 10, 10, 5)};
  EXPECT_EQ(recommend(residents, queue, m, {}, rng)->index, 1u);
}

TEST(Recommender, PacSavObjectiveRespectsTheBinPackingCapacity) {
  const InterferenceModel m = three_clusters();
  std::mt19937_64 rng(1);
  const std::vector<Candidate> residents = {cand(1, 70, 60)};
  // Cluster 0 is the best partner, but only the last candidate fits beside the resident.
  const std::vector<Candidate> queue = {cand(0, 40, 20), cand(0, 20, 50), cand(2, 25, 30)};
  RecommendOptions o;
  o.objective = Objective::kMaxPacSav;
  o.packing = Packing::kGpuUtil;
  auto r = recommend(residents, queue, m, o, rng);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->index, 1u);  // 70 + 20 <= 100
  o.packing = Packing::kMemory;
  r = recommend(residents, queue, m, o, rng);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->index, 0u);  // 60 + 20 <= 100
  EXPECT_FALSE(fits(residents, queue[1], Packing::kMemory));
  EXPECT_FALSE(fits(residents, queue[0], Packing::kGpuUtil));
  // Nothing fits: no recommendation under strict packing, the best one otherwise.
  const std::vector<Candidate> big = {cand(0, 90, 90), cand(2, 95, 95)};
  EXPECT_FALSE(recommend(residents, big, m, o, rng));
  o.strict_packing = false;
  EXPECT_EQ(recommend(residents, big, m, o, rng)->index, 0u);
}

TEST(Recommender, EpsilonZeroNeverExploresEpsilonOneAlwaysDoes) {
  const InterferenceModel m = three_clusters();
  std::mt19937_64 rng(3);
  const std::vector<Candidate> residents = {cand(1)};
  const std::vector<Candidate> queue = {cand(2), cand(1), cand(0), cand(2), cand(1)};
  RecommendOptions o;
  o.objective = Objective::kMinIndSD;
  for (int i = 0; i < 200; ++i) {
    const auto r = recommend(residents, queue, m, o, rng);
    EXPECT_FALSE(r->explored);
    EXPECT_EQ(r->index, 2u);
  }
  o.epsilon = 1;
  int off_best = 0;
  for (int i = 0; i < 200; ++i) {
    const auto r = recommend(residents, queue, m, o, rng);
    EXPECT_TRUE(r->explored);
    off_best += r->index != 2u;
  }
  EXPECT_GT(off_best, 100);  // uniform over 5 candidates: about 160
}

Candidate timed(uint32_t cluster, double estimate, double remaining, double unc = 1) {
  Candidate c = cand(cluster, 10, 10, unc);
  c.estimate = estimate;
  c.remaining = remaining;
  return c;
}

TEST(InterferenceModel, PacSavOfWorkGeneralisesEqualWork) {
  EXPECT_DOUBLE_EQ(InterferenceModel::pacsav_of_work(1, 1, 0.8, 0.6),
                   InterferenceModel::pacsav_of_speeds(0.8, 0.6));
  // 100 s and 300 s of work at 0.5 each: the first ends at 200, the other has 200 left alone.
  EXPECT_NEAR(InterferenceModel::pacsav_of_work(100, 300, 0.5, 0.5), (400.0 - 400) / 400, 1e-12);
  // Equal remaining times at speed 0.8: both end at 125 of 200 s of work.
  EXPECT_NEAR(InterferenceModel::pacsav_of_work(100, 100, 0.8, 0.8), 75.0 / 200, 1e-12);
  EXPECT_DOUBLE_EQ(InterferenceModel::pacsav_of_work(0, 0, 1, 1), 0);
  // IndSD per second of work: (0.5 / 100 + 0.5 / 200) / (0.5 + 0.5).
  EXPECT_NEAR(InterferenceModel::indsd_per_work(100, 200, 0.5, 0.5), 0.0075, 1e-12);
}

TEST(Recommender, DurationAwarePacSavTakesTheBestMatchingRemainingTime) {
  // One cluster: every pair interferes alike, so only the durations tell candidates apart.
  InterferenceModel m(1);
  m.observe_speeds(0, 0, 0.8, 0.8);
  std::mt19937_64 rng(1);
  const std::vector<Candidate> residents = {timed(0, 900, 300)};
  const std::vector<Candidate> queue = {timed(0, 1000, 1000), timed(0, 500, 500),
                                        timed(0, 310, 310), timed(0, 60, 60)};
  RecommendOptions o;
  o.objective = Objective::kMaxPacSav;
  EXPECT_EQ(recommend(residents, queue, m, o, rng)->index, 0u);  // a tie: queue order
  o.objective = Objective::kMaxPacSavDuration;
  const auto r = recommend(residents, queue, m, o, rng);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->index, 2u);
  EXPECT_NEAR(r->score, InterferenceModel::pacsav_of_work(300, 310, 0.8, 0.8), 1e-12);
  // Queue-aware with the candidate alone in the queue: the survivor would run alone, the same.
  o.queue_aware = true;
  const std::vector<Candidate> one = {queue[2]};
  EXPECT_NEAR(recommend(residents, one, m, o, rng)->score, r->score, 1e-12);
  // Without estimates the objective is the cluster-level PacSav.
  const std::vector<Candidate> blind = {cand(0), cand(0)};
  EXPECT_NEAR(pair_score(residents, blind[0], m, o), m.pacsav(0, 0), 1e-12);
}

TEST(Recommender, DurationAwareIndSDSparesTheShortJob) {
  // Beside cluster 1 a cluster-0 job runs at 0.5 (cluster 1 unharmed); beside cluster 2 the
  // cluster-0 job is unharmed and the cluster-2 job runs at 0.4. By cluster means pair 0-1
  // (IndSD 50 %) beats 0-2 (75 %). But the resident is short (100 s) and the candidates long
  // (2000 s): halving the short job's speed costs far more IndSD per second of work.
  InterferenceModel m(3);
  m.observe_speeds(0, 1, 0.5, 1.0);
  m.observe_speeds(0, 2, 1.0, 0.4);
  std::mt19937_64 rng(1);
  const std::vector<Candidate> residents = {timed(0, 100, 100)};
  const std::vector<Candidate> queue = {timed(1, 2000, 2000), timed(2, 2000, 2000)};
  RecommendOptions o;
  o.objective = Objective::kMinIndSD;
  EXPECT_EQ(recommend(residents, queue, m, o, rng)->index, 0u);
  o.objective = Objective::kMinIndSDDuration;
  const auto r = recommend(residents, queue, m, o, rng);
  EXPECT_EQ(r->index, 1u);
  EXPECT_NEAR(r->score, -InterferenceModel::indsd_per_work(100, 2000, 1.0, 0.4), 1e-12);
}

TEST(Recommender, DirectedExplorationStaysWithinTheModelsConfidence) {
  // A well-measured model: exploring never leaves the best cluster.
  InterferenceModel m(2);
  for (int i = 0; i < 50; ++i) {
    m.observe_speeds(0, 0, 0.95 + 0.001 * (i % 3), 0.95);
    m.observe_speeds(0, 1, 0.6 + 0.001 * (i % 3), 0.6);
    m.observe_speeds(1, 1, 0.5 + 0.001 * (i % 3), 0.5);
  }
  std::mt19937_64 rng(5);
  const std::vector<Candidate> residents = {cand(0)};
  const std::vector<Candidate> queue = {cand(1), cand(0), cand(1)};
  RecommendOptions o;
  o.objective = Objective::kMinIndSD;
  o.epsilon = 1;
  o.directed_exploration = true;
  for (int i = 0; i < 50; ++i) EXPECT_EQ(recommend(residents, queue, m, o, rng)->index, 1u);
  // A model that has seen nothing cannot tell the candidates apart: exploring takes the
  // least-observed pair, so after pair 0-0 is seen once it tries 0-1.
  InterferenceModel cold(2);
  auto r = recommend(residents, queue, cold, o, rng);
  ASSERT_TRUE(r);
  cold.observe_speeds(0, r->index == 1 ? 0 : 1, 0.9, 0.9);
  const auto next = recommend(residents, queue, cold, o, rng);
  EXPECT_NE(queue[next->index].cluster, queue[r->index].cluster);
  EXPECT_TRUE(next->explored || next->index == r->index);
}

TEST(Recommender, OpportunityCostPairsComplementaryClusters) {
  // Light jobs (0) hardly slow anyone; heavy jobs (1) are terrible together.
  InterferenceModel m(2);
  m.observe_speeds(0, 0, 0.97, 0.97);
  m.observe_speeds(0, 1, 0.9, 0.9);
  m.observe_speeds(1, 1, 0.3, 0.3);
  std::mt19937_64 rng(1);
  const std::vector<Candidate> light = {cand(0)};
  const std::vector<Candidate> queue = {cand(0), cand(1), cand(1), cand(0)};
  RecommendOptions o;
  o.objective = Objective::kMinIndSD;
  // Greedy: a light resident takes another light job and strands the heavy ones.
  EXPECT_EQ(recommend(light, queue, m, o, rng)->index, 0u);
  // With the opportunity cost it takes a heavy job, which has no better partner.
  o.opportunity_cost = true;
  EXPECT_EQ(recommend(light, queue, m, o, rng)->index, 1u);
}

}  // namespace
}  // namespace tessera
