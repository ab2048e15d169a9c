// Reclaim that weighs its price (preemption.reclaim_cost_ratio): a queue under its fair share
// takes GPUs back only while the GPU time it would go without, waiting for the jobs that could
// give way to end (what it lacks of its share x that wait), is worth what stopping the victims
// wastes; a guarantee is always taken back.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/cycle.h"
#include "test_util.h"

namespace tessera {
namespace {

using testing::gang;
using testing::whole_gpus;
using testing::World;

QueueTree two_queues(double ratio, int64_t b_guarantee = 0) {
  QueueTree t;
  t.add(kRootQueue, testing::queue_spec("a"));
  t.add(kRootQueue, testing::queue_spec("b", 1, b_guarantee));
  t.finish();
  t.settings().reclaim_cost_ratio = ratio;
  Interner in;
  in.intern("a");
  in.intern("b");
  t.bind(in, "test");
  return t;
}

// Tenant a runs one 1-GPU job on each of 16 GPUs, expected to end at `end` (kUnknown: not
// known); stopping one wastes `preemption_seconds` of its GPU. Tenant b waits with 16 jobs.
void setup(World& w, double end, double preemption_seconds, int checkpoint_interval = 0) {
  for (NodeId n = 0; n < 4; ++n) {
    for (int g = 0; g < 4; ++g) {
      JobSpec s = gang("a" + std::to_string(n * 4 + g), 1, 1, 0, 0);
      s.checkpoint_interval = checkpoint_interval;
      w.add_running(s, whole_gpus(w.cluster, n, g, 1), /*start=*/n * 4 + g, end);
      w.running.back().preemption_seconds = preemption_seconds;
    }
  }
  for (int i = 0; i < 16; ++i) w.add_pending(gang("b" + std::to_string(i), 1, 1, 100 + i, 1));
  w.now = 200;
}

const PendingReason* reason_of(const Decisions& d, JobId id) {
  for (const PendingReason& r : d.pending) {
    if (r.job == id) return &r;
  }
  return nullptr;
}

TEST(ReclaimCost, AReclaimWorthItsPriceGoesAheadAndSaysWhatItCost) {
  World w(make_uniform_cluster(1, 1, 4, 4));
  QueueTree t = two_queues(1);
  w.queues = &t;
  // a's jobs run for another 10,000 s; a restart wastes 90 s of a GPU.
  setup(w, 10200, 90);
  const Decisions d = schedule_cycle(w.snapshot(), make_policy("fair", 1));
  ASSERT_EQ(d.preemptions.size(), 8u);
  for (size_t k = 0; k < d.preemptions.size(); ++k) {
    const Preemption& p = d.preemptions[k];
    EXPECT_EQ(p.cause, PreemptionCause::kReclaim);
    EXPECT_DOUBLE_EQ(p.price_gpu_seconds, 90);
    // b lacks 8 GPUs of its share, then 7, ...: each for the 10,000 s a's jobs still run.
    EXPECT_DOUBLE_EQ(p.deficit_gpu_seconds, 10000.0 * static_cast<double>(8 - k));
    EXPECT_NE(describe_price(p).find("reclaim costs 2 GPU-minutes"), std::string::npos)
        << describe_price(p);
  }
}

TEST(ReclaimCost, AQueueWhoseGpusFreeSoonerThanTheVictimsRestartWaits) {
  for (const double ratio : {0.0, 1.0, 4.0}) {
    World w(make_uniform_cluster(1, 1, 4, 4));
    QueueTree t = two_queues(ratio);
    w.queues = &t;
    // a's jobs end in 60 s: b goes without 8 GPUs x 60 s = 480 GPU-s; stopping one of a's
    // jobs wastes 600.
    setup(w, 260, 600);
    const Decisions d = schedule_cycle(w.snapshot(), make_policy("fair", 1));
    if (ratio == 0) {
      EXPECT_EQ(d.preemptions.size(), 8u) << "cost-blind reclaim";
      continue;
    }
    EXPECT_TRUE(d.preemptions.empty()) << ratio;
    EXPECT_TRUE(d.starts.empty()) << ratio;
    const PendingReason* r = reason_of(d, 16);  // b's first job
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(r->code, PendingCode::kInsufficientGpus);
    EXPECT_DOUBLE_EQ(r->reclaim_price_gpu_seconds, 600);
    EXPECT_DOUBLE_EQ(r->reclaim_deficit_gpu_seconds, 480);
    EXPECT_NE(describe(*r).find("not reclaiming"), std::string::npos) << describe(*r);
    // Under EASY the next job waits behind it; where every job is tried (greedy backfill),
    // the next of the same shape is refused from the cycle's cache, and says why too.
    EXPECT_EQ(reason_of(d, 17)->code, PendingCode::kWaitingForReservation);
    Policy greedy = make_policy("fair", 1);
    greedy.backfill = Backfill::kGreedy;
    const Decisions g = schedule_cycle(w.snapshot(), greedy);
    EXPECT_TRUE(g.preemptions.empty());
    const PendingReason* next = reason_of(g, 17);
    ASSERT_NE(next, nullptr);
    EXPECT_EQ(next->code, PendingCode::kInsufficientGpus);
    EXPECT_DOUBLE_EQ(next->reclaim_price_gpu_seconds, 600);
  }
}

TEST(ReclaimCost, TheRatioSetsWhereTheLineIs) {
  // b lacks n GPUs for 60 s (n x 60 GPU-s) against 240 GPU-s a victim: at ratio 1 it takes
  // GPUs back while n >= 4 (5 of them), at ratio 2 while n >= 8 (one), at 3 never.
  for (const auto& [ratio, taken] : {std::pair{1.0, 5u}, {2.0, 1u}, {3.0, 0u}}) {
    World w(make_uniform_cluster(1, 1, 4, 4));
    QueueTree t = two_queues(ratio);
    w.queues = &t;
    setup(w, 260, 240);
    const Decisions d = schedule_cycle(w.snapshot(), make_policy("fair", 1));
    EXPECT_EQ(d.preemptions.size(), taken) << ratio;
  }
}

TEST(ReclaimCost, WorkLostSinceTheLastCheckpointIsPartOfThePrice) {
  // Free restarts, but jobs that checkpoint every hour lose what they did since they started
  // (185-200 GPU-s each): more than b's 8 GPUs x 15 s of waiting.
  World w(make_uniform_cluster(1, 1, 4, 4));
  QueueTree t = two_queues(1);
  w.queues = &t;
  setup(w, 215, 0, /*checkpoint_interval=*/3600);
  const Decisions d = schedule_cycle(w.snapshot(), make_policy("fair", 1));
  EXPECT_TRUE(d.preemptions.empty());
  const PendingReason* r = reason_of(d, 16);
  ASSERT_NE(r, nullptr);
  EXPECT_GT(r->reclaim_price_gpu_seconds, 184);  // the youngest started at 15: 185 s lost
}

TEST(ReclaimCost, AGuaranteeIsTakenBackWhateverItCosts) {
  World w(make_uniform_cluster(1, 1, 4, 4));
  QueueTree t = two_queues(1, /*b_guarantee=*/4);
  w.queues = &t;
  setup(w, 260, 600);
  const Decisions d = schedule_cycle(w.snapshot(), make_policy("fair", 1));
  // The guarantee (4) comes back; the rest of b's share (8: 4 x 60 GPU-s) is not worth 600.
  EXPECT_EQ(d.preemptions.size(), 4u);
  EXPECT_EQ(d.starts.size(), 4u);
}

TEST(ReclaimCost, UnknownEndsMeanTheWaitIsUnboundedAndReclaimGoesAhead) {
  World w(make_uniform_cluster(1, 1, 4, 4));
  QueueTree t = two_queues(1);
  w.queues = &t;
  setup(w, kUnknown, 3600);
  const Decisions d = schedule_cycle(w.snapshot(), make_policy("fair", 1));
  ASSERT_EQ(d.preemptions.size(), 8u);
  for (const Preemption& p : d.preemptions) {
    EXPECT_DOUBLE_EQ(p.price_gpu_seconds, 3600);
    EXPECT_LT(p.deficit_gpu_seconds, 0);
    EXPECT_NE(describe_price(p).find("no running job was expected"), std::string::npos);
  }
}

TEST(ReclaimCost, AGangWaitsForItsWholeNeedNotTheFirstGpuToFree) {
  // b wants one 8-GPU gang. a's jobs end one by one, 100 s apart: the 8th GPU frees after
  // 800 s, so waiting costs 8 x 800 GPU-s, more than 8 restarts of 500 s: reclaim.
  World w(make_uniform_cluster(1, 1, 4, 4));
  QueueTree t = two_queues(1);
  w.queues = &t;
  for (NodeId n = 0; n < 4; ++n) {
    for (int g = 0; g < 4; ++g) {
      const int k = n * 4 + g;
      w.add_running(gang("a" + std::to_string(k), 1, 1, 0, 0), whole_gpus(w.cluster, n, g, 1), k,
                    200 + 100.0 * (k + 1));
      w.running.back().preemption_seconds = 500;
    }
  }
  w.add_pending(gang("b-gang", 2, 4, 100, 1));
  w.now = 200;
  const Decisions d = schedule_cycle(w.snapshot(), make_policy("fair", 1));
  ASSERT_EQ(d.starts.size(), 1u);
  ASSERT_EQ(d.preemptions.size(), 8u);
  EXPECT_DOUBLE_EQ(d.preemptions[0].deficit_gpu_seconds, 8 * 800);
}

}  // namespace
}  // namespace tessera
