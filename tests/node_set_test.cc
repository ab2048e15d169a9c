// Jobs restricted to a set of nodes (JobSpec::eligible_nodes): the NodeSet value type, and how
// the cycle honours the restriction (shape memo, preemption, backfill, admission, reasons).
#include "model/node_set.h"

#include <gtest/gtest.h>

#include <memory>
#include <unordered_set>

#include "engine/admission.h"
#include "engine/cycle.h"
#include "test_util.h"

namespace tessera {
namespace {

using testing::apply;
using testing::find_reason;
using testing::find_start;
using testing::gang;
using testing::whole_gpus;
using testing::World;

std::shared_ptr<const NodeSet> nodes(std::initializer_list<NodeId> ids) {
  return std::make_shared<const NodeSet>(ids);
}

JobSpec only_on(JobSpec job, std::initializer_list<NodeId> ids) {
  job.eligible_nodes = nodes(ids);
  return job;
}

Policy policy(const std::string& name, Backfill b) {
  Policy p = make_policy(name, 1);
  p.backfill = b;
  return p;
}

void expect_on(const World& w, const Start* s, JobId id) {
  ASSERT_NE(s, nullptr) << w.specs[id].name;
  for (NodeId n : s->alloc.member_node) {
    EXPECT_TRUE(w.specs[id].eligible_nodes->contains(n)) << w.specs[id].name << " on " << n;
  }
}

// ---- NodeSet ----

TEST(NodeSet, MembershipSizeAndIteration) {
  const NodeSet s{3, 64, 1, 130, 3};
  EXPECT_EQ(s.size(), 4u);
  for (NodeId n : {1u, 3u, 64u, 130u}) EXPECT_TRUE(s.contains(n)) << n;
  for (NodeId n : {0u, 2u, 63u, 65u, 129u, 131u, 5000u, kNoId}) EXPECT_FALSE(s.contains(n)) << n;
  EXPECT_EQ(s.to_vector(), (std::vector<NodeId>{1, 3, 64, 130}));
  EXPECT_EQ(s.next(0), 1u);
  EXPECT_EQ(s.next(4), 64u);
  EXPECT_EQ(s.next(65), 130u);
  EXPECT_EQ(s.next(131), kNoId);
  EXPECT_EQ(s.next(100000), kNoId);
  EXPECT_EQ(s.end_bound(), 131u);
  EXPECT_EQ(s.count_in(0, 200), 4u);
  EXPECT_EQ(s.count_in(2, 64), 1u);
  EXPECT_EQ(s.count_in(2, 65), 2u);
  EXPECT_EQ(s.count_in(64, 64), 0u);
  EXPECT_EQ(s.count_in(65, 130), 0u);
  EXPECT_EQ(s.count_in(130, 131), 1u);
  const NodeSet empty;
  EXPECT_TRUE(empty.empty());
  EXPECT_EQ(empty.end_bound(), 0u);
  EXPECT_EQ(empty.next(0), kNoId);
  EXPECT_FALSE(empty.contains(0));
}

TEST(NodeSet, EqualityAndHashDependOnlyOnMembers) {
  const NodeSet a{5, 70};
  const NodeSet b = NodeSet::matching(300, [](NodeId n) { return n == 5 || n == 70; });
  const NodeSet c = NodeSet::from_words({uint64_t{1} << 5, uint64_t{1} << 6, 0, 0});
  EXPECT_EQ(a, b);
  EXPECT_EQ(a, c);
  EXPECT_EQ(a.hash(), b.hash());
  EXPECT_EQ(a.hash(), c.hash());
  EXPECT_NE(a, (NodeSet{5}));
  EXPECT_NE(a, (NodeSet{5, 71}));
  EXPECT_TRUE((NodeSet{5}).is_subset_of(a));
  EXPECT_FALSE(a.is_subset_of(NodeSet{5}));
  EXPECT_TRUE(NodeSet{}.is_subset_of(a));
  EXPECT_TRUE(same_restriction(nullptr, nullptr));
  EXPECT_FALSE(same_restriction(&a, nullptr));
  EXPECT_TRUE(same_restriction(&a, &b));
  EXPECT_TRUE(node_eligible(nullptr, 12345));
  EXPECT_FALSE(node_eligible(&a, 6));
  // Distinct sets mostly hash apart.
  std::unordered_set<size_t> hashes;
  for (NodeId i = 0; i < 200; ++i) hashes.insert(NodeSet{i, i + 1}.hash());
  EXPECT_EQ(hashes.size(), 200u);
}

// ---- the cycle ----

TEST(NodeRestriction, EqualShapesWithDisjointSetsAreNotConflated) {
  // Node 0 is full (a job of equal rank, so nothing is preempted); node 1 is free. Two pending
  // jobs of the same shape, one restricted to node 0, the next to node 1: the first cannot
  // start, the second must (the shape memo must not carry the first's failure over).
  for (Backfill b : {Backfill::kGreedy, Backfill::kEasy}) {
    World w(make_uniform_cluster(1, 1, 2, 4));
    w.add_running(gang("busy", 1, 4), whole_gpus(w.cluster, 0, 0, 4), 0, 100);
    const JobId a = w.add_pending(only_on(gang("a", 2, 2, 1), {0}));
    const JobId c = w.add_pending(only_on(gang("c", 2, 2, 2), {1}));
    const Decisions d = schedule_cycle(w.snapshot(), policy("fifo", b));
    EXPECT_EQ(find_start(d, a), nullptr);
    expect_on(w, find_start(d, c), c);
    ASSERT_NE(find_reason(d, a), nullptr);
    EXPECT_EQ(find_reason(d, a)->code, PendingCode::kGangCannotFit);
    // Under EASY the head (a) reserves node 0 only, so c on node 1 may start although it
    // outlasts the reservation (no duration estimate).
    apply(w, d);
  }
}

TEST(NodeRestriction, EqualShapesWithRoomInEachSetBothStart) {
  World w(make_uniform_cluster(1, 2, 2, 4));
  JobId ids[4];
  for (NodeId n = 0; n < 4; ++n) {
    ids[n] = w.add_pending(only_on(gang("j" + std::to_string(n), 4, 1, n), {3 - n}));
  }
  for (const char* p : {"fifo+bestfit", "fifo+spread", "fifo+topology", "fifo+random"}) {
    const Decisions d = schedule_cycle(w.snapshot(), policy(p, Backfill::kEasy));
    EXPECT_EQ(d.starts.size(), 4u) << p;
    for (JobId id : ids) expect_on(w, find_start(d, id), id);
    apply(w, d);
  }
}

TEST(NodeRestriction, EqualSetsInDistinctObjectsShareTheShapeMemo) {
  // Content equality: a restriction built twice is the same restriction (the memo may skip the
  // second job, and the decisions are the same either way).
  World w(make_uniform_cluster(1, 1, 2, 4));
  w.add_running(gang("busy", 1, 4), whole_gpus(w.cluster, 0, 0, 4));
  const JobId a = w.add_pending(only_on(gang("a", 2, 1, 1), {0}));
  const JobId b = w.add_pending(only_on(gang("b", 2, 1, 2), {0}));
  const Decisions d = schedule_cycle(w.snapshot(), policy("fifo", Backfill::kGreedy));
  EXPECT_TRUE(d.starts.empty());
  EXPECT_EQ(find_reason(d, a)->code, PendingCode::kGangCannotFit);
  EXPECT_EQ(find_reason(d, b)->code, PendingCode::kGangCannotFit);
}

TEST(NodeRestriction, PreemptionEvictsOnlyFromEligibleNodes) {
  // Two best-effort jobs, one per node; the one on node 0 is younger, so an unrestricted
  // preemptor would evict it. Restricted to node 1, the job evicts the one on node 1.
  World w(make_uniform_cluster(1, 1, 2, 4));
  const JobId on0 = w.add_running(gang("on0", 1, 4, 0, 0, PriorityClass::kBestEffort),
                                  whole_gpus(w.cluster, 0, 0, 4), /*start=*/50);
  const JobId on1 = w.add_running(gang("on1", 1, 4, 0, 0, PriorityClass::kBestEffort),
                                  whole_gpus(w.cluster, 1, 0, 4), /*start=*/0);
  w.now = 60;
  const JobId hi = w.add_pending(only_on(gang("hi", 1, 4, 60, 1, PriorityClass::kProduction), {1}));
  const Decisions d = schedule_cycle(w.snapshot(), make_policy("fifo", 1));
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_EQ(d.preemptions[0].job, on1);
  EXPECT_EQ(d.preemptions[0].for_job, hi);
  expect_on(w, find_start(d, hi), hi);
  (void)on0;
  apply(w, d);
}

TEST(NodeRestriction, UnrestrictedPreemptorTakesTheYoungestVictim) {
  // The control for the test above: the same cluster without the restriction evicts on0.
  World w(make_uniform_cluster(1, 1, 2, 4));
  const JobId on0 = w.add_running(gang("on0", 1, 4, 0, 0, PriorityClass::kBestEffort),
                                  whole_gpus(w.cluster, 0, 0, 4), /*start=*/50);
  w.add_running(gang("on1", 1, 4, 0, 0, PriorityClass::kBestEffort), whole_gpus(w.cluster, 1, 0, 4),
                /*start=*/0);
  w.now = 60;
  w.add_pending(gang("hi", 1, 4, 60, 1, PriorityClass::kProduction));
  const Decisions d = schedule_cycle(w.snapshot(), make_policy("fifo", 1));
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_EQ(d.preemptions[0].job, on0);
}

TEST(NodeRestriction, NoPreemptionUnlessTheRestrictedJobThenStarts) {
  // Nodes 0 and 1 run best-effort jobs, node 2 a job of the preemptor's own class. Restricted
  // to nodes 1 and 2, a gang of 5 could get at most 4 GPUs by preemption (node 1): nothing is
  // preempted, although evicting both best-effort jobs would free 8 GPUs in total.
  World w(make_uniform_cluster(1, 1, 3, 4));
  w.add_running(gang("be0", 1, 4, 0, 0, PriorityClass::kBestEffort),
                whole_gpus(w.cluster, 0, 0, 4));
  w.add_running(gang("be1", 1, 4, 0, 0, PriorityClass::kBestEffort),
                whole_gpus(w.cluster, 1, 0, 4));
  w.add_running(gang("peer", 1, 4, 0, 0, PriorityClass::kProduction),
                whole_gpus(w.cluster, 2, 0, 4));
  const JobId hi =
      w.add_pending(only_on(gang("hi", 5, 1, 1, 1, PriorityClass::kProduction), {1, 2}));
  for (const char* p : {"fifo+bestfit", "fifo+topology", "fifo+random"}) {
    const Decisions d = schedule_cycle(w.snapshot(), policy(p, Backfill::kEasy));
    EXPECT_TRUE(d.preemptions.empty()) << p;
    EXPECT_TRUE(d.starts.empty()) << p;
    ASSERT_NE(find_reason(d, hi), nullptr);
    EXPECT_EQ(find_reason(d, hi)->code, PendingCode::kInsufficientGpus);
  }
  // A gang of 4 restricted to the same nodes preempts be1 only.
  World v(make_uniform_cluster(1, 1, 3, 4));
  v.add_running(gang("be0", 1, 4, 0, 0, PriorityClass::kBestEffort), whole_gpus(v.cluster, 0, 0, 4),
                0);
  const JobId be1 = v.add_running(gang("be1", 1, 4, 0, 0, PriorityClass::kBestEffort),
                                  whole_gpus(v.cluster, 1, 0, 4), 0);
  v.add_running(gang("peer", 1, 4, 0, 0, PriorityClass::kProduction),
                whole_gpus(v.cluster, 2, 0, 4));
  const JobId four =
      v.add_pending(only_on(gang("four", 4, 1, 1, 1, PriorityClass::kProduction), {1, 2}));
  const Decisions d = schedule_cycle(v.snapshot(), policy("fifo", Backfill::kEasy));
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_EQ(d.preemptions[0].job, be1);
  expect_on(v, find_start(d, four), four);
  apply(v, d);
}

TEST(NodeRestriction, PendingReasonSaysTheFreeGpusAreNotOnEligibleNodes) {
  World w(make_uniform_cluster(1, 1, 2, 4));
  w.add_running(gang("busy", 1, 4), whole_gpus(w.cluster, 1, 0, 4));
  // 4 GPUs free on node 0; the job may use node 1 only.
  const JobId j = w.add_pending(only_on(gang("j", 2, 1), {1}));
  const JobId plain = w.add_pending(gang("plain", 8, 1));
  const Decisions d = schedule_cycle(w.snapshot(), policy("fifo", Backfill::kGreedy));
  const PendingReason* r = find_reason(d, j);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->code, PendingCode::kGangCannotFit);
  EXPECT_EQ(r->free_gpu_milli, 4000);
  EXPECT_EQ(r->eligible_free_gpu_milli, 0);
  const std::string text = describe(*r);
  EXPECT_NE(text.find("eligible nodes"), std::string::npos) << text;
  EXPECT_NE(text.find("only 0 of them"), std::string::npos) << text;
  // An unrestricted job's reason is as before.
  ASSERT_NE(find_reason(d, plain), nullptr);
  EXPECT_EQ(find_reason(d, plain)->code, PendingCode::kInsufficientGpus);
  EXPECT_EQ(find_reason(d, plain)->eligible_free_gpu_milli, -1);
}

TEST(NodeRestriction, HeterogeneityPreferenceKeepsTheRestriction) {
  // Node 0 is a V100 the job runs 10x faster on; it may use only node 1 (a K80).
  ClusterBuilder b;
  const GpuTypeId v100 = b.gpu_types().intern("V100");
  const GpuTypeId k80 = b.gpu_types().intern("K80");
  b.add_node("s", "r", "v", v100, 2, 64000, 1 << 20);
  b.add_node("s", "r", "k", k80, 2, 64000, 1 << 20);
  World w(b.build());
  JobSpec job = only_on(gang("j", 1), {1});
  job.type_speed.assign(w.cluster.gpu_types().size(), 0.0F);
  job.type_speed[v100] = 1.0F;
  job.type_speed[k80] = 0.1F;
  const JobId id = w.add_pending(job);
  w.add_pending(gang("other", 1));
  Policy p = make_policy("fifo", 1);
  p.heterogeneity = true;
  const Decisions d = schedule_cycle(w.snapshot(), p);
  expect_on(w, find_start(d, id), id);
}

TEST(NodeRestriction, ElasticGangGrowsOnlyOnEligibleNodes) {
  World w(make_uniform_cluster(1, 1, 3, 4));
  JobSpec e = only_on(gang("e", 12), {0, 2});
  e.min_members = 2;
  const JobId id = w.add_pending(e);
  Policy p = make_policy("fifo", 1);
  p.elastic = true;
  const Decisions d = schedule_cycle(w.snapshot(), p);
  expect_on(w, find_start(d, id), id);
  EXPECT_EQ(find_start(d, id)->alloc.members(), 8);  // all of nodes 0 and 2
}

TEST(NodeRestriction, SameSnapshotAndSeedGiveTheSameDecisions) {
  World w(make_uniform_cluster(2, 2, 4, 8));
  const auto even = std::make_shared<const NodeSet>(
      NodeSet::matching(w.cluster.nodes().size(), [](NodeId n) { return n % 2 == 0; }));
  const auto low = std::make_shared<const NodeSet>(
      NodeSet::matching(w.cluster.nodes().size(), [](NodeId n) { return n < 5; }));
  for (int i = 0; i < 40; ++i) {
    JobSpec j = gang("j" + std::to_string(i), 1 + i % 5, 1 + i % 2, i, i % 3);
    if (i % 3 == 1) j.eligible_nodes = even;
    if (i % 3 == 2) j.eligible_nodes = low;
    w.add_pending(std::move(j));
  }
  for (const char* p : {"fifo+random", "drf+spread", "las+topology", "sjf+bestfit", "fair"}) {
    const Decisions a = schedule_cycle(w.snapshot(5), policy(p, Backfill::kEasy));
    const Decisions b = schedule_cycle(w.snapshot(5), policy(p, Backfill::kEasy));
    ASSERT_EQ(a.starts.size(), b.starts.size()) << p;
    for (size_t i = 0; i < a.starts.size(); ++i) {
      EXPECT_EQ(a.starts[i].job, b.starts[i].job);
      EXPECT_EQ(a.starts[i].alloc.shares, b.starts[i].alloc.shares);
      const JobSpec& spec = w.specs[a.starts[i].job];
      for (NodeId n : a.starts[i].alloc.member_node) {
        EXPECT_TRUE(node_eligible(spec.eligible_nodes.get(), n)) << p << " " << spec.name;
      }
    }
    apply(w, a);
  }
}

// ---- admission ----

TEST(NodeRestriction, AdmissionNamesAnImpossibleRestriction) {
  // Rack 0: two nodes of 8 GPUs; rack 1: two nodes of 4.
  ClusterBuilder b;
  const GpuTypeId v100 = b.gpu_types().intern("V100");
  b.add_node("s", "r0", "big0", v100, 8, 64000, 1 << 20);
  b.add_node("s", "r0", "big1", v100, 8, 64000, 1 << 20);
  b.add_node("s", "r1", "small0", v100, 4, 64000, 1 << 20);
  b.add_node("s", "r1", "small1", v100, 4, 64000, 1 << 20);
  const Cluster c = b.build();
  EXPECT_FALSE(infeasible_reason(c, gang("fits", 1, 8)).has_value());
  EXPECT_FALSE(infeasible_reason(c, only_on(gang("fits", 1, 8), {0})).has_value());
  const auto wide = infeasible_reason(c, only_on(gang("wide", 1, 8), {2, 3}));
  ASSERT_TRUE(wide.has_value());
  EXPECT_EQ(*wide,
            "no eligible node has 8 GPUs of an allowed type: 2 nodes eligible, the largest has 4");
  const auto many = infeasible_reason(c, only_on(gang("many", 3, 4), {2, 3}));
  ASSERT_TRUE(many.has_value());
  EXPECT_EQ(*many, "asks for 12 GPUs, but its 2 eligible nodes have 8 of the allowed types");
  const auto none = infeasible_reason(c, only_on(gang("none", 1), {}));
  ASSERT_TRUE(none.has_value());
  EXPECT_NE(none->find("no node is eligible"), std::string::npos) << *none;
  const auto outside = infeasible_reason(c, only_on(gang("outside", 1), {17}));
  ASSERT_TRUE(outside.has_value());
  EXPECT_NE(outside->find("no node is eligible"), std::string::npos) << *outside;
  // One eligible node per rack: 12 GPUs eligible, but at most 8 in one rack.
  JobSpec span = only_on(gang("span", 9), {0, 2});
  span.max_span = Level::kRack;
  const auto rack = infeasible_reason(c, span);
  ASSERT_TRUE(rack.has_value());
  EXPECT_NE(rack->find("no single rack"), std::string::npos) << *rack;
  EXPECT_NE(rack->find("2 eligible nodes"), std::string::npos) << *rack;
  span.max_span = Level::kCluster;
  EXPECT_FALSE(infeasible_reason(c, span).has_value());
  // CPU: 3 members of 30 CPUs fit the cluster, not one node.
  JobSpec cpu = only_on(gang("cpu", 3), {1});
  cpu.demand.cpu_milli = 30000;
  const auto short_cpu = infeasible_reason(c, cpu);
  ASSERT_TRUE(short_cpu.has_value());
  EXPECT_NE(short_cpu->find("on its 1 eligible nodes"), std::string::npos) << *short_cpu;
  cpu.eligible_nodes = nodes({1, 2});
  EXPECT_FALSE(infeasible_reason(c, cpu).has_value());
}

}  // namespace
}  // namespace tessera
