// fairness.count: throughput — fair-share usage in V100-equivalent GPUs (each GPU share weighted
// by the job's speed on that GPU's type), entitlements over the cluster's V100-equivalent
// capacity; fairness.count: gpus (the default) counts raw GPUs as before.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/cycle.h"
#include "engine/fair_share.h"
#include "engine/placement.h"
#include "input_error_util.h"
#include "model/cluster_spec.h"
#include "test_util.h"

namespace tessera {
namespace {

using testing::gang;
using testing::whole_gpus;
using testing::World;

// One 4-GPU K80 node (node 0) and one 4-GPU V100 node (node 1).
struct Mixed {
  GpuTypeId k80 = 0, v100 = 0;
  Cluster cluster;
};

Mixed mixed_cluster() {
  Mixed m;
  ClusterBuilder cb;
  m.k80 = cb.gpu_types().intern("K80");
  m.v100 = cb.gpu_types().intern("V100");
  cb.add_node("s", "r", "k0", m.k80, 4, 64000, 1 << 20);
  cb.add_node("s", "r", "v0", m.v100, 4, 64000, 1 << 20);
  m.cluster = cb.build();
  return m;
}

// A 1-GPU job of `tenant` that runs at 0.3 of a V100 on a K80.
JobSpec measured(const Mixed& m, const std::string& name, TenantId tenant) {
  JobSpec s = gang(name, 1, 1, 0, tenant);
  s.type_speed.assign(m.cluster.gpu_types().size(), 1.0f);
  s.type_speed[m.k80] = 0.3f;
  return s;
}

QueueTree two_queues(FairCount count) {
  QueueTree t;
  t.add(kRootQueue, testing::queue_spec("a"));
  t.add(kRootQueue, testing::queue_spec("b"));
  t.finish();
  t.settings().count = count;
  Interner in;
  in.intern("a");
  in.intern("b");
  t.bind(in, "test");
  return t;
}

// Tenant a (0) holds the 4 K80s, tenant b (1) the 4 V100s; a wants one more GPU.
void fill(World& w, const Mixed& m) {
  for (int g = 0; g < 4; ++g) {
    w.add_running(measured(m, "a" + std::to_string(g), 0), whole_gpus(w.cluster, 0, g, 1), g);
    w.add_running(measured(m, "b" + std::to_string(g), 1), whole_gpus(w.cluster, 1, g, 1), g);
  }
  w.add_pending(measured(m, "a-next", 0));
  w.now = 100;
}

TEST(EffectiveFairness, HelperWeightsSharesByTheJobsSpeed) {
  const Mixed m = mixed_cluster();
  const Allocation k = whole_gpus(m.cluster, 0, 0, 4);
  const Allocation v = whole_gpus(m.cluster, 1, 0, 2);
  EXPECT_EQ(effective_gpu_milli(m.cluster, measured(m, "x", 0), k), 1200);
  EXPECT_EQ(effective_gpu_milli(m.cluster, measured(m, "x", 0), v), 2000);
  // Without type_speed: raw. A type missing from type_speed: the table's relative speed.
  EXPECT_EQ(effective_gpu_milli(m.cluster, gang("x", 1), k), 4000);
  JobSpec partial = gang("x", 1);
  partial.type_speed = {2.0f};  // type 0 only
  const double k80_table = m.cluster.gpu_types().at(m.k80).relative_speed;
  EXPECT_EQ(effective_gpu_milli(m.cluster, partial, k),
            m.k80 == 0 ? 8000 : std::llround(4000 * k80_table));

  FairnessSettings fs;  // count: gpus
  EXPECT_EQ(fair_amounts_of(fs, m.cluster, measured(m, "x", 0), k), amounts_of(k));
  EXPECT_EQ(fair_capacity(fs, m.cluster), cluster_capacity(m.cluster));
  fs.count = FairCount::kThroughput;
  EXPECT_EQ(fair_amounts_of(fs, m.cluster, measured(m, "x", 0), k)[kGpuDim], 1200);
  EXPECT_EQ(fair_capacity(fs, m.cluster)[kGpuDim], std::llround(4000 * k80_table) + 4000);
  EXPECT_EQ(fair_capacity(fs, m.cluster)[kCpuDim], cluster_capacity(m.cluster)[kCpuDim]);
}

TEST(EffectiveFairness, SharesCountThroughputOnlyWhenAsked) {
  const Mixed m = mixed_cluster();
  for (const FairCount count : {FairCount::kGpus, FairCount::kThroughput}) {
    World w(m.cluster);
    QueueTree t = two_queues(count);
    w.queues = &t;
    fill(w, m);
    const QueueShares s = compute_queue_shares(w.snapshot());
    if (count == FairCount::kGpus) {
      // Even: 4 GPUs each, and each is entitled to 4 of the 8.
      EXPECT_EQ(s.usage[1][kGpuDim], 4000);
      EXPECT_EQ(s.usage[2][kGpuDim], 4000);
      EXPECT_EQ(s.entitled[1][kGpuDim], 4000);
      EXPECT_EQ(s.entitled[2][kGpuDim], 4000);
    } else {
      // a's 4 K80s are worth 1.2 V100s to its jobs; b's 4 V100s are 4.
      EXPECT_EQ(s.usage[1][kGpuDim], 1200);
      EXPECT_EQ(s.usage[2][kGpuDim], 4000);
      EXPECT_LT(dominant_ratio(s.usage[1], s.entitled[1]), 1.0);
      EXPECT_GT(dominant_ratio(s.usage[2], s.entitled[2]), 1.0);
    }
  }
}

TEST(EffectiveFairness, ATenantOnSlowGpusReclaimsOnlyWhenThroughputCounts) {
  const Mixed m = mixed_cluster();
  for (const FairCount count : {FairCount::kGpus, FairCount::kThroughput}) {
    World w(m.cluster);
    QueueTree t = two_queues(count);
    w.queues = &t;
    fill(w, m);
    const Decisions d = schedule_cycle(w.snapshot(), make_policy("fair", 1));
    if (count == FairCount::kGpus) {
      EXPECT_TRUE(d.preemptions.empty());
      EXPECT_TRUE(d.starts.empty());
      bool over_share = false;
      for (const PendingReason& r : d.pending) {
        over_share = over_share || r.code == PendingCode::kOverFairShare;
      }
      EXPECT_TRUE(over_share);
    } else {
      ASSERT_EQ(d.preemptions.size(), 1u);
      EXPECT_EQ(w.specs[d.preemptions[0].job].tenant, 1u);  // one of b's V100 jobs
      ASSERT_EQ(d.starts.size(), 1u);
      EXPECT_EQ(w.specs[d.starts[0].job].name, "a-next");
    }
  }
}

TEST(EffectiveFairness, YamlKey) {
  EXPECT_EQ(parse_queue_tree_yaml("queues: [{name: a}]\n", "q.yaml").settings().count,
            FairCount::kGpus);
  EXPECT_EQ(parse_queue_tree_yaml("fairness: {count: gpus}\nqueues: [{name: a}]\n", "q.yaml")
                .settings()
                .count,
            FairCount::kGpus);
  EXPECT_EQ(parse_queue_tree_yaml("fairness:\n  count: throughput\nqueues: [{name: a}]\n", "q.yaml")
                .settings()
                .count,
            FairCount::kThroughput);
  const std::string e = testing::error_of(
      [] { parse_queue_tree_yaml("queues: [{name: a}]\nfairness:\n  count: flops\n", "q.yaml"); });
  EXPECT_TRUE(testing::Contains(e, "q.yaml:3: field fairness.count:"));
  EXPECT_TRUE(testing::Contains(e, "'gpus' or 'throughput'"));
  EXPECT_TRUE(testing::Contains(e, "flops"));
}

}  // namespace
}  // namespace tessera
