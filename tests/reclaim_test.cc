// Queue-aware scheduling in one cycle: quotas, reclaim of borrowed GPUs, priority classes
// across queues, and invariants every queue order keeps under a queue tree.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <set>

#include "engine/cycle.h"
#include "engine/fair_share.h"
#include "engine/placement.h"
#include "engine/rng.h"
#include "model/node_set.h"
#include "test_util.h"

namespace tessera {
namespace {

using testing::gang;
using testing::whole_gpus;
using testing::World;

// Binds tenants 0..n-1 to the tree's leaves named in `names`.
void bind(QueueTree& t, const std::vector<std::string>& names) {
  Interner in;
  for (const std::string& n : names) in.intern(n);
  t.bind(in, "test");
}

QueueTree two_queues(int64_t a_guarantee = 0, int64_t a_limit = -1) {
  QueueTree t;
  t.add(kRootQueue, testing::queue_spec("a", 1, a_guarantee, a_limit));
  t.add(kRootQueue, testing::queue_spec("b"));
  t.finish();
  bind(t, {"a", "b"});
  return t;
}

const PendingReason* reason_of(const Decisions& d, JobId id) {
  for (const PendingReason& r : d.pending) {
    if (r.job == id) return &r;
  }
  return nullptr;
}

// Tenant 0 runs one 1-GPU job on every GPU of a 4 x 4 cluster.
void fill_with_tenant_a(World& w, PriorityClass p = PriorityClass::kResearch) {
  for (NodeId n = 0; n < 4; ++n) {
    for (int g = 0; g < 4; ++g) {
      w.add_running(gang("a" + std::to_string(n * 4 + g), 1, 1, 0, 0, p),
                    whole_gpus(w.cluster, n, g, 1), /*start=*/n * 4 + g);
    }
  }
}

int64_t gpus_by_tenant_after(const World& w, const Decisions& d, TenantId t) {
  int64_t milli = 0;
  for (const RunningJob& r : w.running) {
    bool evicted = false;
    for (const Preemption& p : d.preemptions) evicted = evicted || p.job == r.id;
    if (!evicted && r.spec->tenant == t) milli += r.alloc->gpu_milli();
  }
  for (const Start& s : d.starts) {
    if (w.specs[s.job].tenant == t) milli += s.alloc.gpu_milli();
  }
  return milli / kMilliPerGpu;
}

TEST(Reclaim, AQueueUnderItsShareTakesBackExactlyItsShare) {
  World w(make_uniform_cluster(1, 1, 4, 4));
  QueueTree t = two_queues();
  w.queues = &t;
  fill_with_tenant_a(w);
  for (int i = 0; i < 16; ++i) w.add_pending(gang("b" + std::to_string(i), 1, 1, 100 + i, 1));
  w.now = 200;
  const Decisions d = schedule_cycle(w.snapshot(), make_policy("fair", 1));
  EXPECT_EQ(d.preemptions.size(), 8u);
  EXPECT_EQ(gpus_by_tenant_after(w, d, 0), 8);
  EXPECT_EQ(gpus_by_tenant_after(w, d, 1), 8);
  // The youngest of a's jobs give way (equal class, nothing lost on checkpoint).
  for (const Preemption& p : d.preemptions) EXPECT_GE(w.specs[p.job].name.size(), 2u);
  for (const Preemption& p : d.preemptions) {
    EXPECT_GE(std::stoi(w.specs[p.job].name.substr(1)), 8) << w.specs[p.job].name;
  }
  // The first of b that waits (the rest wait behind its reservation) names fair share and
  // its queue.
  const PendingReason* r = reason_of(d, w.pending[8].id);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->code, PendingCode::kOverFairShare);
  EXPECT_EQ(t.queue(r->queue).name, "b");
  EXPECT_NE(describe(*r, "", t.queue(r->queue).path).find("queue b"), std::string::npos);
}

TEST(Reclaim, FifoAndDrfNeverPreemptAcrossEqualClasses) {
  for (const char* name : {"fifo", "drf"}) {
    World w(make_uniform_cluster(1, 1, 4, 4));
    QueueTree t = two_queues();
    w.queues = &t;
    fill_with_tenant_a(w);
    w.add_pending(gang("b", 1, 1, 100, 1));
    EXPECT_TRUE(schedule_cycle(w.snapshot(), make_policy(name, 1)).preemptions.empty()) << name;
  }
}

TEST(Reclaim, GuaranteeIsReclaimedEvenAgainstEqualWeights) {
  World w(make_uniform_cluster(1, 1, 4, 4));
  QueueTree t;
  t.add(kRootQueue, testing::queue_spec("a"));
  t.add(kRootQueue, testing::queue_spec("b", 1, 12));
  t.finish();
  bind(t, {"a", "b"});
  w.queues = &t;
  fill_with_tenant_a(w);
  for (int i = 0; i < 16; ++i) w.add_pending(gang("b" + std::to_string(i), 1, 1, 100 + i, 1));
  const Decisions d = schedule_cycle(w.snapshot(), make_policy("fair", 1));
  // b: guarantee 12 + half of the remaining 4 = 14.
  EXPECT_EQ(gpus_by_tenant_after(w, d, 1), 14);
}

// reclaim_min_runtime spares jobs that started recently from reclaim above the guarantee, but
// never delays taking the guarantee back.
TEST(Reclaim, ReclaimMinRuntimeSparesYoungJobsButNotTheGuarantee) {
  for (const double min_runtime : {0.0, 10.0}) {
    World w(make_uniform_cluster(1, 1, 4, 4));
    QueueTree t;
    t.add(kRootQueue, testing::queue_spec("a"));
    t.add(kRootQueue, testing::queue_spec("b", 1, 4));
    t.finish();
    t.settings().reclaim_min_runtime_seconds = min_runtime;
    bind(t, {"a", "b"});
    w.queues = &t;
    fill_with_tenant_a(w);  // a's jobs started at 0, 1, ..., 15
    for (int i = 0; i < 16; ++i) w.add_pending(gang("b" + std::to_string(i), 1, 1, 100 + i, 1));
    w.now = 12;  // only a0, a1, a2 have run 10 s
    const Decisions d = schedule_cycle(w.snapshot(), make_policy("fair", 1));
    // b is entitled to its guarantee 4 plus half of the other 12: 10.
    if (min_runtime == 0) {
      EXPECT_EQ(gpus_by_tenant_after(w, d, 1), 10);
      continue;
    }
    // The guarantee comes back at once (the youngest give way), the rest only from jobs that
    // have run long enough.
    EXPECT_EQ(gpus_by_tenant_after(w, d, 1), 7);
    int old = 0;
    for (const Preemption& p : d.preemptions) old += w.running[p.job].start_time <= 2 ? 1 : 0;
    EXPECT_EQ(old, 3);
  }
}

// reclaim_after: a deficit above the guarantee is acted on only once the job has waited that
// long; the guarantee comes back at once. Every preemption here is a reclaim.
TEST(Reclaim, ReclaimAfterWaitsOutMomentaryDeficitsButNotTheGuarantee) {
  for (const double now : {200.0, 800.0}) {
    World w(make_uniform_cluster(1, 1, 4, 4));
    QueueTree t;
    t.add(kRootQueue, testing::queue_spec("a"));
    t.add(kRootQueue, testing::queue_spec("b", 1, 4));
    t.finish();
    t.settings().reclaim_after_seconds = 600;
    bind(t, {"a", "b"});
    w.queues = &t;
    fill_with_tenant_a(w);
    for (int i = 0; i < 16; ++i) w.add_pending(gang("b" + std::to_string(i), 1, 1, 100, 1));
    w.now = now;
    const Decisions d = schedule_cycle(w.snapshot(), make_policy("fair", 1));
    // b's guarantee (4) at once; its fair share (4 + half of the other 12) after 600 s.
    EXPECT_EQ(gpus_by_tenant_after(w, d, 1), now < 700 ? 4 : 10) << now;
    for (const Preemption& p : d.preemptions) EXPECT_EQ(p.cause, PreemptionCause::kReclaim);
  }
}

// reclaim_tolerance: a queue keeps up to (1 + tolerance) x its fair share against reclaim
// above guarantees; a guarantee is still taken back exactly.
TEST(Reclaim, ReclaimToleranceLeavesABorrowerWithinTheBand) {
  for (const int64_t b_guarantee : {0, 8}) {
    for (const double tolerance : {0.0, 0.25, 1.0}) {
      World w(make_uniform_cluster(1, 1, 4, 4));
      QueueTree t;
      t.add(kRootQueue, testing::queue_spec("a"));
      t.add(kRootQueue, testing::queue_spec("b", 1, b_guarantee));
      t.finish();
      t.settings().reclaim_tolerance = tolerance;
      bind(t, {"a", "b"});
      w.queues = &t;
      fill_with_tenant_a(w);
      for (int i = 0; i < 16; ++i) w.add_pending(gang("b" + std::to_string(i), 1, 1, 100, 1));
      w.now = 200;
      const Decisions d = schedule_cycle(w.snapshot(), make_policy("fair", 1));
      const int64_t b = gpus_by_tenant_after(w, d, 1);
      if (b_guarantee == 0) {
        // Shares 8 / 8: a keeps what is within 8 x (1 + tolerance).
        EXPECT_EQ(b, tolerance == 0 ? 8 : tolerance == 0.25 ? 6 : 0) << tolerance;
      } else {
        // b is entitled to its 8 plus half of the other 8 (a: 4); the guarantee comes back
        // whatever the band, the rest only past a's 4 x (1 + tolerance).
        EXPECT_EQ(b, tolerance == 0 ? 12 : tolerance == 0.25 ? 11 : 8) << tolerance;
      }
    }
  }
}

// borrow_max_runtime: past its fair share a queue starts only jobs expected to end soon, so
// that what it borrows comes back without a reclaim; within its share anything starts.
TEST(Reclaim, BorrowMaxRuntimeLendsOnlyToShortJobsPastTheShare) {
  World w(make_uniform_cluster(1, 1, 4, 4));
  QueueTree t = two_queues();
  t.settings().borrow_max_runtime_seconds = 3600;
  w.queues = &t;
  // a holds its fair share (8 of 16, nodes 0 and 1): b wants 8 more, on node 0 only (full), so
  // it waits without reclaiming (a is not over its share) and nodes 2 and 3 stay free.
  for (int g = 0; g < 8; ++g) {
    w.add_running(gang("a-run" + std::to_string(g), 1), whole_gpus(w.cluster, g / 4, g % 4, 1), 0);
  }
  const auto node0 = std::make_shared<const NodeSet>(NodeSet{0});
  for (int i = 0; i < 2; ++i) {
    JobSpec b = gang("b" + std::to_string(i), 1, 4, 5, 1);
    b.eligible_nodes = node0;
    w.add_pending(b);
  }
  JobSpec long_job = gang("a-long", 1, 1, 10, 0);
  long_job.duration_estimate = 4 * 3600;
  JobSpec short_job = gang("a-short", 1, 1, 11, 0);
  short_job.duration_estimate = 600;
  JobSpec unknown = gang("a-unknown", 1, 1, 12, 0);
  // Inference-critical jobs are not held: they preempt across queues anyway.
  JobSpec serving = gang("a-serving", 1, 1, 13, 0, PriorityClass::kInferenceCritical);
  serving.duration_estimate = 4 * 3600;
  const JobId l = w.add_pending(long_job);
  const JobId sh = w.add_pending(short_job);
  const JobId u = w.add_pending(unknown);
  const JobId sv = w.add_pending(serving);
  w.now = 20;
  const Decisions d = schedule_cycle(w.snapshot(), make_policy("fair", 1));
  std::set<JobId> started;
  for (const Start& st : d.starts) started.insert(st.job);
  EXPECT_TRUE(started.contains(sh));
  EXPECT_TRUE(started.contains(sv));
  EXPECT_FALSE(started.contains(l));
  EXPECT_FALSE(started.contains(u));  // no estimate: not lent to
  const PendingReason* r = reason_of(d, l);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->code, PendingCode::kOverFairShare);
  EXPECT_EQ(t.queue(r->queue).name, "a");
  EXPECT_NE(describe(*r, "", "a").find("expected to end within 3600 s"), std::string::npos)
      << describe(*r, "", "a");
  // Without b's demand a's share is the whole cluster: the long job starts.
  World alone(make_uniform_cluster(1, 1, 4, 4));
  alone.queues = &t;
  const JobId l2 = alone.add_pending(long_job);
  const Decisions d2 = schedule_cycle(alone.snapshot(), make_policy("fair", 1));
  ASSERT_EQ(d2.starts.size(), 1u);
  EXPECT_EQ(d2.starts[0].job, l2);
}

TEST(Reclaim, TwoGangsLargerThanHalfTheClusterDoNotDeadlock) {
  // Two 8-GPU gangs on 12 GPUs with equal weights (the 100-GPU gangs on 150 GPUs, scaled):
  // the running one keeps running; the other waits whole, with a reason naming fair share.
  World w(make_uniform_cluster(1, 1, 3, 4));
  QueueTree t = two_queues();
  w.queues = &t;
  Allocation a = whole_gpus(w.cluster, 0, 0, 4);
  const Allocation b = whole_gpus(w.cluster, 1, 0, 4);
  a.member_node.push_back(1);
  a.shares.insert(a.shares.end(), b.shares.begin(), b.shares.end());
  w.add_running(gang("big-a", 2, 4, 0, 0), a);
  const JobId big_b = w.add_pending(gang("big-b", 2, 4, 10, 1));
  for (int cycle = 0; cycle < 3; ++cycle) {
    const Decisions d = schedule_cycle(w.snapshot(cycle), make_policy("fair", 1));
    EXPECT_TRUE(d.preemptions.empty());
    EXPECT_TRUE(d.starts.empty());
    ASSERT_NE(reason_of(d, big_b), nullptr);
    EXPECT_EQ(reason_of(d, big_b)->code, PendingCode::kOverFairShare);
  }
}

TEST(Reclaim, BestEffortGoesFirstAndInferenceCriticalNeverGoes) {
  World w(make_uniform_cluster(1, 1, 4, 4));
  QueueTree t = two_queues();
  w.queues = &t;
  // a holds everything: 4 inference-critical, 8 research, 4 best-effort GPUs.
  std::map<JobId, PriorityClass> cls;
  for (NodeId n = 0; n < 4; ++n) {
    const PriorityClass p = n == 0   ? PriorityClass::kInferenceCritical
                            : n == 3 ? PriorityClass::kBestEffort
                                     : PriorityClass::kResearch;
    for (int g = 0; g < 4; ++g) {
      cls[w.add_running(gang("a", 1, 1, 0, 0, p), whole_gpus(w.cluster, n, g, 1), n * 4 + g)] = p;
    }
  }
  for (int i = 0; i < 16; ++i) w.add_pending(gang("b", 1, 1, 100 + i, 1));
  const Decisions d = schedule_cycle(w.snapshot(), make_policy("fair", 1));
  ASSERT_EQ(d.preemptions.size(), 8u);
  int best_effort = 0;
  for (const Preemption& p : d.preemptions) {
    EXPECT_NE(cls[p.job], PriorityClass::kInferenceCritical);
    best_effort += cls[p.job] == PriorityClass::kBestEffort;
  }
  EXPECT_EQ(best_effort, 4);
}

TEST(Reclaim, InferenceCriticalPreemptsLowerClassesInOtherQueues) {
  World w(make_uniform_cluster(1, 1, 4, 4));
  QueueTree t = two_queues();
  w.queues = &t;
  // b already holds its whole share, so it could not reclaim; its SLA class may still preempt.
  for (NodeId n = 0; n < 4; ++n) {
    for (int g = 0; g < 4; ++g) {
      w.add_running(gang("x", 1, 1, 0, n < 2 ? 0 : 1), whole_gpus(w.cluster, n, g, 1), 0);
    }
  }
  const JobId ic = w.add_pending(gang("ic", 1, 2, 10, 1, PriorityClass::kInferenceCritical));
  const Decisions d = schedule_cycle(w.snapshot(), make_policy("fair", 1));
  EXPECT_EQ(d.preemptions.size(), 2u);
  for (const Preemption& p : d.preemptions) EXPECT_EQ(p.cause, PreemptionCause::kPriority);
  ASSERT_EQ(d.starts.size(), 1u);
  EXPECT_EQ(d.starts[0].job, ic);
}

TEST(Reclaim, BestEffortDoesNotReclaim) {
  World w(make_uniform_cluster(1, 1, 4, 4));
  QueueTree t = two_queues();
  w.queues = &t;
  fill_with_tenant_a(w);
  w.add_pending(gang("be", 1, 1, 100, 1, PriorityClass::kBestEffort));
  EXPECT_TRUE(schedule_cycle(w.snapshot(), make_policy("fair", 1)).preemptions.empty());
}

TEST(Reclaim, SiblingsReclaimFromEachOtherBeforeTheRestOfTheTree) {
  // research (nlp, vision) and prod, equal weights on 16 GPUs: prod 8, research 8 (4 + 4).
  // vision holds 8 and prod 8; nlp arrives: it takes back from vision, not from prod, which
  // holds exactly its share.
  World w(make_uniform_cluster(1, 1, 4, 4));
  QueueTree t;
  const QueueId research = t.add(kRootQueue, testing::queue_spec("research"));
  t.add(kRootQueue, testing::queue_spec("prod"));
  t.add(research, testing::queue_spec("nlp"));
  t.add(research, testing::queue_spec("vision"));
  t.finish();
  bind(t, {"nlp", "vision", "prod"});
  w.queues = &t;
  for (NodeId n = 0; n < 4; ++n) {
    for (int g = 0; g < 4; ++g) {
      w.add_running(gang("r", 1, 1, 0, n < 2 ? 1 : 2), whole_gpus(w.cluster, n, g, 1), 0);
    }
  }
  for (int i = 0; i < 8; ++i) w.add_pending(gang("nlp", 1, 1, 10, 0));
  const Decisions d = schedule_cycle(w.snapshot(), make_policy("fair", 1));
  EXPECT_EQ(d.preemptions.size(), 4u);
  for (const Preemption& p : d.preemptions) EXPECT_EQ(w.specs[p.job].tenant, 1u);
  EXPECT_EQ(gpus_by_tenant_after(w, d, 2), 8);
}

TEST(Reclaim, AGangLargerThanItsShareGetsATurnOnceStarving) {
  // b's only job needs the whole cluster, twice its share: plain reclaim can never start it.
  World w(make_uniform_cluster(1, 1, 4, 4));
  QueueTree t = two_queues();
  t.settings().starving_after_seconds = 3600;
  w.queues = &t;
  fill_with_tenant_a(w);
  const JobId big = w.add_pending(gang("big", 16, 1, 0, 1));
  w.add_pending(gang("a-more", 1, 1, 0, 0));
  w.now = 600;
  Decisions d = schedule_cycle(w.snapshot(), make_policy("fair", 1));
  EXPECT_TRUE(d.preemptions.empty());
  w.now = 3600;
  d = schedule_cycle(w.snapshot(), make_policy("fair", 1));
  EXPECT_EQ(d.preemptions.size(), 16u);
  ASSERT_EQ(d.starts.size(), 1u);
  EXPECT_EQ(d.starts[0].job, big);
  EXPECT_TRUE(d.starts[0].starving);
  // While it is protected, a (now far under its share) cannot take its turn back.
  World after(make_uniform_cluster(1, 1, 4, 4));
  after.queues = &t;
  after.add_running(gang("big", 16, 1, 0, 1), d.starts[0].alloc, 3600);
  after.running.back().reclaim_protected_until = 3600 + 1800;
  after.add_pending(gang("a-more", 1, 1, 0, 0));
  after.now = 4000;
  EXPECT_TRUE(schedule_cycle(after.snapshot(), make_policy("fair", 1)).preemptions.empty());
  after.now = 5400;
  EXPECT_EQ(schedule_cycle(after.snapshot(), make_policy("fair", 1)).preemptions.size(), 1u);
}

// b is promised 4 A100s. It holds all 8 V100s, its whole share (a wants only the 8 it holds),
// so the share rule lets it reclaim nothing; the type guarantee still brings it 4 A100s back
// from a, which is promised none, and no more than 4.
TEST(Reclaim, APerTypeGuaranteeIsReclaimedOnThatType) {
  for (const bool typed : {true, false}) {
    ClusterBuilder cb;
    const GpuTypeId v100 = cb.gpu_types().intern("V100");
    const GpuTypeId a100 = cb.gpu_types().intern("A100");
    for (int n = 0; n < 2; ++n) {
      cb.add_node("s", "r", "v" + std::to_string(n), v100, 4, 64000, 1 << 20);
      cb.add_node("s", "r", "a" + std::to_string(n), a100, 4, 64000, 1 << 20);
    }
    World w(cb.build());
    QueueTree t;
    t.add(kRootQueue, testing::queue_spec("a", 3));
    QueueSpec bq = testing::queue_spec("b", 1, 4);
    if (typed) bq.by_type.push_back(TypeQuota{a100, 4 * kMilliPerGpu, kUnlimited});
    t.add(kRootQueue, bq);
    t.finish();
    bind(t, {"a", "b"});
    w.queues = &t;
    for (NodeId n = 0; n < w.cluster.nodes().size(); ++n) {
      const bool is_a100 = w.cluster.node(n).gpu_type == a100;
      for (int g = 0; g < 4; ++g) {
        const std::string name = (is_a100 ? "a" : "b") + std::to_string(n * 4 + g);
        w.add_running(gang(name, 1, 1, 0, is_a100 ? 0 : 1), whole_gpus(w.cluster, n, g, 1),
                      n * 4 + g);
      }
    }
    for (int i = 0; i < 6; ++i) w.add_pending(gang("b-more" + std::to_string(i), 1, 1, 100, 1));
    w.now = 200;
    const Decisions d = schedule_cycle(w.snapshot(), make_policy("fair", 1));
    if (!typed) {
      EXPECT_TRUE(d.preemptions.empty());  // over its share, and promised no A100s
      continue;
    }
    ASSERT_EQ(d.preemptions.size(), 4u);
    for (const Preemption& p : d.preemptions) {
      EXPECT_EQ(w.specs[p.job].tenant, 0u);
      EXPECT_EQ(w.cluster.node(w.allocs[p.job].member_node[0]).gpu_type, a100);
    }
    ASSERT_EQ(d.starts.size(), 4u);
    for (const Start& s : d.starts) {
      EXPECT_EQ(w.specs[s.job].tenant, 1u) << w.specs[s.job].name;
      EXPECT_EQ(w.cluster.node(s.alloc.member_node[0]).gpu_type, a100);
    }
    EXPECT_EQ(gpus_by_tenant_after(w, d, 1), 12);
  }
}

TEST(Quota, AJobPastItsQueuesLimitWaitsAndOthersGoOn) {
  World w(make_uniform_cluster(1, 1, 4, 4));
  QueueTree t = two_queues(/*guarantee=*/0, /*limit=*/4);
  w.queues = &t;
  w.add_running(gang("a0", 1, 3, 0, 0), whole_gpus(w.cluster, 0, 0, 3));
  const JobId over = w.add_pending(gang("a1", 1, 2, 1, 0));
  const JobId fits = w.add_pending(gang("a2", 1, 1, 2, 0));
  const JobId other = w.add_pending(gang("b", 1, 4, 3, 1));
  for (const std::string& order : queue_order_names()) {
    const Decisions d = schedule_cycle(w.snapshot(), make_policy(order, 1));
    ASSERT_NE(reason_of(d, over), nullptr) << order;
    EXPECT_EQ(reason_of(d, over)->code, PendingCode::kQuotaExceeded) << order;
    EXPECT_EQ(reason_of(d, over)->queue_bound_milli, 4000) << order;
    EXPECT_EQ(reason_of(d, fits), nullptr) << order;
    EXPECT_EQ(reason_of(d, other), nullptr) << order;
  }
}

// Invariants of every queue order under a queue tree with limits, over random snapshots: no
// queue ends above its limit, no GPU is over-committed, gangs are whole.
class EveryOrderWithQueues : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryOrderWithQueues, KeepLimitsAndGangsWhole) {
  QueueTree t;
  const QueueId research = t.add(kRootQueue, testing::queue_spec("research", 2, 4, 10));
  t.add(kRootQueue, testing::queue_spec("prod", 1, 4));
  t.add(research, testing::queue_spec("nlp", 1, 0, 6));
  t.add(research, testing::queue_spec("vision", 1, 2));
  t.finish();
  bind(t, {"nlp", "vision", "prod"});
  // Seeds 11-20 add the settings against reclaim churn and its price: the invariants hold with
  // them too.
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    const bool calm = seed > 10;
    t.settings().reclaim_after_seconds = calm ? 5 : 0;
    t.settings().reclaim_tolerance = calm ? 0.3 : 0;
    t.settings().borrow_max_runtime_seconds = calm ? 150 : 0;
    t.settings().reclaim_cost_ratio = calm ? 1 : 0;
    World w(make_uniform_cluster(1, 2, 2, 4));
    w.queues = &t;
    Rng rng(seed);
    ClusterState scratch(w.cluster);
    // Some running jobs within limits, then a random queue.
    for (int i = 0; i < 6; ++i) {
      JobSpec s =
          gang("r" + std::to_string(i), 1, 1 + static_cast<int>(rng.below(2)), 0,
               static_cast<TenantId>(rng.below(3)), static_cast<PriorityClass>(rng.below(4)));
      Allocation a;
      if (!make_scorer("bestfit")->place(scratch, s, 1, rng, a)) continue;
      // Calm: some end soon, and a preemption costs a minute, so some reclaims are not worth it.
      w.add_running(s, a, i, calm ? 20.0 + 40.0 * static_cast<double>(rng.below(5)) : kUnknown);
      w.running.back().preemption_seconds = calm ? 60 : 0;
    }
    for (int i = 0; i < 12; ++i) {
      JobSpec s =
          gang("p" + std::to_string(i), 1 + static_cast<int>(rng.below(3)),
               1 + static_cast<int>(rng.below(2)), 10 + i, static_cast<TenantId>(rng.below(3)),
               static_cast<PriorityClass>(rng.below(4)));
      s.duration_estimate = 100.0 * static_cast<double>(rng.below(4));  // 0: none
      w.add_pending(s);
    }
    const QueueShares before = compute_queue_shares(w.snapshot());
    const Decisions d = schedule_cycle(w.snapshot(seed), make_policy(GetParam(), seed));
    ClusterState s = w.state;
    std::vector<Amounts> usage = before.usage;
    for (const Preemption& p : d.preemptions) {
      for (const RunningJob& r : w.running) {
        if (r.id != p.job) continue;
        s.release(*r.alloc);
        for (QueueId q = t.leaf_of(r.spec->tenant); q != kNoId; q = t.queue(q).parent) {
          usage[q] = usage[q] - amounts_of(*r.alloc);
        }
      }
    }
    for (const Start& st : d.starts) {
      ASSERT_NO_THROW(s.allocate(st.alloc));
      const JobSpec& spec = w.specs[st.job];
      EXPECT_GE(st.alloc.members(), spec.min_members);
      EXPECT_LE(st.alloc.members(), spec.max_members);
      for (QueueId q = t.leaf_of(spec.tenant); q != kNoId; q = t.queue(q).parent) {
        usage[q] = usage[q] + amounts_of(st.alloc);
      }
    }
    for (QueueId q = 0; q < t.size(); ++q) {
      // A queue already over its limit (not possible here) could only shrink.
      EXPECT_TRUE(all_le(usage[q], t.queue(q).limit) || all_le(usage[q], before.usage[q]))
          << GetParam() << " seed " << seed << " queue " << t.queue(q).path;
    }
    EXPECT_EQ(d.starts.size() + d.pending.size(), w.pending.size());
  }
}

// Every queue order, and goodput (whose cycle starts what its rounds sized; serve and kube run it).
std::vector<std::string> orders_and_goodput() {
  std::vector<std::string> out = queue_order_names();
  out.push_back("goodput");
  return out;
}

INSTANTIATE_TEST_SUITE_P(QueueOrder, EveryOrderWithQueues,
                         ::testing::ValuesIn(orders_and_goodput()));

}  // namespace
}  // namespace tessera
