// The running set a caller keeps between cycles (engine/running_set.h): its sums against a pass
// over its jobs as they start, change and stop, and the queue shares a cycle computes from it
// against those computed from the jobs themselves.
#include "engine/running_set.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "engine/fair_share.h"
#include "engine/queue_order.h"
#include "test_util.h"

namespace tessera {
namespace {

using testing::gang;
using testing::World;

// Jobs of a few tenants and every class on a cluster of two GPU types (throughput-counted
// usage differs by type), each on some GPUs of one node.
void fill(World& w, std::mt19937_64& rng, int jobs) {
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint64_t>(n)); };
  const Cluster& c = w.cluster;
  for (int i = 0; i < jobs; ++i) {
    JobSpec s = gang("r" + std::to_string(i), 1, 1 + pick(2), 0, static_cast<TenantId>(pick(5)),
                     static_cast<PriorityClass>(pick(4)));
    if (pick(2) == 0) s.type_speed = {1.0F, 2.5F};
    const auto n = static_cast<NodeId>(pick(static_cast<int>(c.nodes().size())));
    Allocation a = testing::whole_gpus(c, n, 0, s.demand.gpus);
    a.cpu_milli_per_member = 1000 * (1 + pick(4));
    w.specs.push_back(std::move(s));
    w.allocs.push_back(std::move(a));
    RunningJob r;
    r.id = static_cast<JobId>(w.specs.size() - 1);
    r.spec = &w.specs.back();
    r.alloc = &w.allocs.back();
    w.running.push_back(r);
  }
}

Cluster two_types() {
  ClusterBuilder b;
  for (int n = 0; n < 6; ++n) {
    b.add_node("s", "r" + std::to_string(n % 2), "n" + std::to_string(n),
               static_cast<GpuTypeId>(n % 2), 4, 32000, 256000);
  }
  return b.build();
}

TEST(RunningSet, KeepsItsSumsAndOrderAsJobsStartChangeAndStop) {
  for (const FairCount count : {FairCount::kGpus, FairCount::kThroughput}) {
    std::mt19937_64 rng(static_cast<uint64_t>(count) + 3);
    World w(two_types());
    fill(w, rng, 80);
    FairnessSettings fs;
    fs.count = count;
    const auto order = make_fifo_order();
    RunningSet set(w.cluster, fs, order.get());
    std::vector<JobId> in;  // the order a caller's own list keeps: swap with the last to remove
    for (int step = 0; step < 3000; ++step) {
      RunningJob& r = w.running[rng() % w.running.size()];
      const auto at = std::find(in.begin(), in.end(), r.id);
      if (at == in.end()) {
        set.add(r);
        in.push_back(r.id);
      } else if (rng() % 3 == 0) {
        // Resized in place: one member more or fewer on the same node.
        Allocation& a = w.allocs[r.id];
        const int gpus = a.gpus_per_member == 1 ? 2 : 1;
        a = testing::whole_gpus(w.cluster, a.member_node[0], 0, gpus);
        r.start_time += 1;
        set.update(r);
      } else {
        set.remove(r.id);
        *at = in.back();
        in.pop_back();
      }
    }
    ASSERT_EQ(set.size(), in.size());
    std::vector<Amounts> usage(8, kZeroAmounts), demand(8, kZeroAmounts);
    std::vector<uint32_t> jobs(8, 0);
    std::array<size_t, 4> by_class{};
    int64_t lowest = std::numeric_limits<int64_t>::max();
    for (size_t i = 0; i < in.size(); ++i) {
      const RunningJob& r = set.jobs()[i];
      EXPECT_EQ(r.id, in[i]);
      EXPECT_EQ(&set.at(r.id), &r);
      EXPECT_EQ(r.start_time, w.running[r.id].start_time);
      const Amounts a = fair_amounts_of(fs, w.cluster, *r.spec, *r.alloc);
      const TenantId t = r.spec->tenant;
      usage[t] = usage[t] + a;
      if (r.spec->priority != PriorityClass::kBestEffort) demand[t] = demand[t] + a;
      ++jobs[t];
      ++by_class[static_cast<size_t>(r.spec->priority)];
      lowest = std::min(lowest, order->rank(*r.spec, 0));
    }
    for (TenantId t = 0; t < 8; ++t) {
      EXPECT_EQ(set.usage(t), usage[t]) << "tenant " << t;
      EXPECT_EQ(set.demand(t), demand[t]) << "tenant " << t;
      EXPECT_EQ(set.count(t), jobs[t]) << "tenant " << t;
    }
    for (size_t c = 0; c < 4; ++c) EXPECT_EQ(set.count(static_cast<PriorityClass>(c)), by_class[c]);
    EXPECT_TRUE(set.ranks_for(*order));
    EXPECT_EQ(set.min_rank(), lowest);
    EXPECT_THROW(set.add(set.jobs()[0]), std::invalid_argument);
    EXPECT_THROW(set.remove(1u << 30), std::invalid_argument);
    EXPECT_THROW(set.update(RunningJob{.id = 1u << 30}), std::invalid_argument);
  }
}

// Ranks that move with attained service (LAS) are not kept: the cycle ranks every job.
TEST(RunningSet, KeepsNoRanksForAnOrderThatMovesWithService) {
  World w(two_types());
  const auto las = make_las_order();
  const auto fifo = make_fifo_order();
  RunningSet set(w.cluster, FairnessSettings{}, las.get());
  EXPECT_FALSE(set.ranks_for(*las));
  EXPECT_FALSE(set.ranks_for(*fifo));
}

TEST(RunningSet, GivesTheQueueSharesOfItsJobs) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    std::mt19937_64 rng(seed);
    World w(two_types());
    fill(w, rng, 12);
    for (int i = 0; i < 10; ++i) {
      w.add_pending(gang("p" + std::to_string(i), 1, 2, 0, static_cast<TenantId>(rng() % 6)));
    }
    FairnessSettings fs;
    RunningSet set(w.cluster, fs);
    for (const RunningJob& r : w.running) set.add(r);
    const Snapshot plain = w.snapshot();
    Snapshot kept = plain;
    kept.running = set.jobs();
    kept.running_set = &set;
    const QueueShares want = compute_queue_shares(plain);
    const QueueShares got = compute_queue_shares(kept);
    EXPECT_EQ(got.tree->size(), want.tree->size()) << "seed " << seed;
    EXPECT_EQ(got.usage, want.usage) << "seed " << seed;
    EXPECT_EQ(got.demand, want.demand) << "seed " << seed;
    EXPECT_EQ(got.entitled, want.entitled) << "seed " << seed;
  }
}

}  // namespace
}  // namespace tessera
