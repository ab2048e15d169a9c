// Multi-tenant scenarios through the simulator: convergence to fair shares, borrowing idle
// capacity, reclaim within one cycle plus the checkpoint grace, the gang deadlock case,
// long-term fairness, and SLA classes.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "engine/policy.h"
#include "model/accounting_json.h"
#include "model/cluster_spec.h"
#include "sim/result_metrics.h"
#include "sim/simulator.h"
#include "sim/trace_readers.h"
#include "sim_test_util.h"

namespace tessera {
namespace {

using testing::UnitSpeed;

void add_jobs(Workload& w, const std::string& tenant, int count, double submit, double work,
              int gpus = 1, PriorityClass p = PriorityClass::kResearch) {
  const TenantId t = w.tenants.intern(tenant);
  for (int i = 0; i < count; ++i) {
    JobSpec j;
    j.name = tenant + "-" + std::to_string(w.jobs.size());
    j.tenant = t;
    j.priority = p;
    j.submit_time = submit;
    j.min_members = j.max_members = gpus;
    j.work_seconds = work;
    j.source = "test";
    w.jobs.push_back(j);
  }
}

QueueSpec queue(const std::string& name, int64_t guarantee_gpus = 0) {
  QueueSpec s;
  s.name = name;
  s.guarantee[kGpuDim] = guarantee_gpus * kMilliPerGpu;
  return s;
}

struct Outcome {
  SimResult result;
  std::string events;
};

Outcome run(Workload& w, const Cluster& c, const std::string& policy, QueueTree* tree,
            double grace = 30, double interval = 60) {
  sort_by_submit(w);
  if (tree != nullptr) tree->bind(w.tenants, "test");
  const Policy p = make_policy(policy, 1);
  const UnitSpeed model;
  std::ostringstream events;
  SimOptions opt;
  opt.queues = tree;
  opt.checkpoint_grace = grace;
  opt.series_interval = interval;
  opt.events = &events;
  return Outcome{simulate(w, c, p, model, opt), events.str()};
}

// Mean GPUs queue `name` held over bucket b of the share series.
double held(const SimResult& r, const std::string& name, size_t b) {
  for (size_t i = 0; i < r.series.queues.size(); ++i) {
    if (r.series.queues[i] == name) return b < r.series.gpus[i].size() ? r.series.gpus[i][b] : 0;
  }
  ADD_FAILURE() << "no series for " << name;
  return 0;
}

const Cluster k64 = make_uniform_cluster(1, 4, 4, 4);  // 64 GPUs

TEST(FairnessScenario, TwoEqualTenantsConvergeToHalfEachWithinACycle) {
  // a fills the cluster; b arrives at 600 s with as much work. Both saturate for hours.
  Workload w;
  add_jobs(w, "a", 128, 0, 36000);
  add_jobs(w, "b", 128, 600, 36000);
  QueueTree tree = QueueTree::flat(std::vector<std::string>{"a", "b"});
  const Outcome fair = run(w, k64, "fair", &tree);
  // Borrowed to 100 % while b is idle.
  for (size_t b = 0; b < 10; ++b) EXPECT_DOUBLE_EQ(held(fair.result, "a", b), 64) << b;
  // From the first full bucket after b's arrival plus the grace: 50 % +- 2 % each.
  for (size_t b = 11; b < 300; ++b) {
    EXPECT_NEAR(held(fair.result, "a", b), 32, 0.02 * 64) << "bucket " << b;
    EXPECT_NEAR(held(fair.result, "b", b), 32, 0.02 * 64) << "bucket " << b;
  }
  EXPECT_GT(fair.result.jain_time, 0);
  EXPECT_GT(fair.result.jain_integral / fair.result.jain_time, 0.99);
  // FIFO and DRF (no reclaim) leave b with nothing until a's jobs end.
  Workload w2;
  add_jobs(w2, "a", 128, 0, 36000);
  add_jobs(w2, "b", 128, 600, 36000);
  QueueTree tree2 = QueueTree::flat(std::vector<std::string>{"a", "b"});
  const Outcome fifo = run(w2, k64, "fifo", &tree2);
  EXPECT_DOUBLE_EQ(held(fifo.result, "b", 100), 0);
}

// Tenant a fills 64 GPUs; b, guaranteed 48, arrives at 1000 s and reclaims.
Outcome returning_tenant(Workload& w, QueueTree& tree, double grace) {
  add_jobs(w, "a", 128, 0, 36000);
  add_jobs(w, "b", 128, 1000, 36000);
  tree.add(kRootQueue, queue("a"));
  tree.add(kRootQueue, queue("b", 48));
  tree.finish();
  return run(w, k64, "fair", &tree, grace);
}

TEST(FairnessScenario, AReturningTenantGetsItsGuaranteeWithinOneReclaimPlusGrace) {
  Workload w;
  QueueTree tree;
  const double grace = 45;
  const Outcome r = returning_tenant(w, tree, grace);
  // b arrives at 1000; the reclaim cycle runs then, and its jobs begin once the victims'
  // grace is over.
  int started_in_time = 0;
  for (JobId j = 128; j < 256; ++j) {
    const double s = r.result.jobs[j].first_start;
    if (s >= 0 && s <= 1000 + grace) ++started_in_time;
  }
  EXPECT_GE(started_in_time, 48);
  // Entitled: 48 guaranteed + half of the other 16.
  EXPECT_EQ(started_in_time, 56);
  EXPECT_NEAR(held(r.result, "b", 20), 56, 0.5);
  // Victims checkpoint on request: nothing is lost.
  EXPECT_EQ(r.result.preemptions, 56u);
  for (const JobOutcome& o : r.result.jobs) EXPECT_EQ(o.lost_work_seconds, 0);
}

// tessera usage --result: the result's accounting says who preempted whom and adds up to the
// GPU time the metrics count (grace included), by GPU type.
TEST(FairnessScenario, TheResultsUsageSaysWhoGaveWayToWhomAndAddsUp) {
  Workload w;
  QueueTree tree;
  const Outcome r = returning_tenant(w, tree, 45);
  const nlohmann::ordered_json report =
      make_report(w, k64, r.result, ReportContext{"fair", 1, "test", {}});
  ASSERT_EQ(report["usage"].size(), 2u);
  std::map<std::string, UsageRow> rows;
  for (const auto& row : report["usage"]) {
    const UsageRow u = usage_row_from_json(nlohmann::json::parse(row.dump()));
    rows[u.tenant] = u;
  }
  EXPECT_EQ(rows["a"].queue, "a");
  EXPECT_EQ(rows["a"].preempted, 56);
  EXPECT_EQ(rows["b"].preemptor, 56);
  EXPECT_EQ(rows["a"].preemptor, 0);
  EXPECT_EQ(rows["b"].preempted, 0);
  EXPECT_EQ(rows["a"].jobs.at("succeeded") + rows["b"].jobs.at("succeeded"), 256);
  EXPECT_EQ(rows["b"].started, 128);
  EXPECT_GT(rows["b"].mean_wait_hours(), 0);
  for (const std::string t : {"a", "b"}) {
    ASSERT_EQ(rows[t].gpu_hours.size(), 1u) << t;  // one GPU type in k64
    EXPECT_NEAR(rows[t].total_gpu_hours(), report["per_tenant"][t]["gpu_hours"].get<double>(), 1e-6)
        << t;
  }
}

TEST(FairnessScenario, TwoGangsLargerThanHalfTheClusterRunOneAfterTheOther) {
  // Two 100-GPU gangs on 150 GPUs: one runs whole, then the other; no preemption ping-pong.
  const Cluster c = make_uniform_cluster(1, 1, 15, 10);
  Workload w;
  add_jobs(w, "a", 1, 0, 1000, 100);
  add_jobs(w, "b", 1, 10, 1000, 100);
  for (const char* policy : {"fair", "drf", "fifo"}) {
    Workload copy = w;
    QueueTree tree = QueueTree::flat(std::vector<std::string>{"a", "b"});
    const Outcome r = run(copy, c, policy, &tree);
    EXPECT_EQ(r.result.preemptions, 0u) << policy;
    EXPECT_DOUBLE_EQ(r.result.jobs[0].finish, 1000) << policy;
    EXPECT_DOUBLE_EQ(r.result.jobs[1].first_start, 1000) << policy;
  }
}

TEST(FairnessScenario, APreemptedJobKeepsItsPlaceAheadOfLaterEqualJobsOfItsQueue) {
  // On 8 GPUs, a submits big1 then big2 (6 GPUs each), b submits 4. b
  // reclaims from big1; when b finishes, big1 (the earlier) must run before big2, and no
  // reservation for big2 may hold it back.
  const Cluster c = make_uniform_cluster(1, 1, 1, 8);
  Workload w;
  add_jobs(w, "a", 1, 0, 100, 6);
  add_jobs(w, "a", 1, 1, 100, 6);
  add_jobs(w, "b", 1, 2, 50, 4);
  for (const char* policy : {"fair", "drf", "fifo"}) {
    Workload copy = w;
    QueueTree tree = QueueTree::flat(std::vector<std::string>{"a", "b"});
    const Outcome r = run(copy, c, policy, &tree);
    const JobOutcome& big1 = r.result.jobs[0];
    const JobOutcome& big2 = r.result.jobs[1];
    EXPECT_LE(big1.finish, big2.first_start) << policy << "\n" << r.events;
  }
}

TEST(FairnessScenario, ATeamThatUsedMoreYesterdayYieldsToday) {
  // a ran alone on the whole cluster for ten hours; then both want everything.
  auto make = [] {
    Workload w;
    add_jobs(w, "a", 64, 0, 36000);
    add_jobs(w, "a", 128, 36000, 36000);
    add_jobs(w, "b", 128, 36000, 36000);
    return w;
  };
  Workload w1 = make(), w2 = make();
  QueueTree instant = QueueTree::flat(std::vector<std::string>{"a", "b"});
  QueueTree longterm = QueueTree::flat(std::vector<std::string>{"a", "b"});
  longterm.settings().half_life_seconds = 6 * 3600;
  longterm.settings().long_term_weight = 0.5;
  const Outcome r1 = run(w1, k64, "fair", &instant, 30, 3600);
  const Outcome r2 = run(w2, k64, "fair", &longterm, 30, 3600);
  // Hour 11 (after both arrive at 10 h): equal without memory, b ahead with it.
  EXPECT_NEAR(held(r1.result, "b", 11), 32, 1);
  EXPECT_GT(held(r2.result, "b", 11), 40);
  EXPECT_LT(held(r2.result, "a", 11), 24);
}

TEST(FairnessScenario, InferenceCriticalMeetsItsSlaUnderLoad) {
  Workload w;
  add_jobs(w, "research", 128, 0, 36000);
  add_jobs(w, "serving", 10, 3600, 600, 2, PriorityClass::kInferenceCritical);
  for (JobSpec& j : w.jobs) {
    if (j.priority == PriorityClass::kInferenceCritical) j.sla_max_queueing = 60;
  }
  QueueTree tree = QueueTree::flat(std::vector<std::string>{"research", "serving"});
  const Outcome r = run(w, k64, "fair", &tree, 30);
  const Workload& ww = w;
  const auto report = make_report(ww, k64, r.result, ReportContext{"fair", 1, "test", {}});
  EXPECT_EQ(report["sla"]["jobs"].get<size_t>(), 10u);
  EXPECT_DOUBLE_EQ(report["sla"]["satisfaction"].get<double>(), 1.0);
}

// A slice of the real Philly trace: its two busiest virtual clusters share a cluster smaller
// than their demand. The fair policy keeps Jain's index high where FIFO does not, without
// giving up mean JCT (the full sweep over 2..10 tenants is scripts/philly_multitenant.py).
TEST(FairnessOnPhilly, TwoBusiestVirtualClustersShareFairly) {
  const std::string trace = std::string(TESSERA_SHARED_DATA) + "/philly/pollux/philly.csv";
  if (!std::filesystem::exists(trace)) GTEST_SKIP() << "no " << trace;
  ReaderOptions ro;
  ro.max_jobs = 6000;
  Workload all = read_workload(trace, TraceFormat::kPhilly, ro);
  Workload w;
  for (const JobSpec& j : all.jobs) {
    const std::string& vc = all.tenants.name(j.tenant);
    if (vc != "6214e9" && vc != "11cb48") continue;
    JobSpec copy = j;
    copy.tenant = w.tenants.intern(vc);
    w.jobs.push_back(copy);
  }
  w.models = all.models;
  const Cluster c = make_uniform_cluster(1, 1, 2, 8);  // 16 GPUs
  const auto model = make_measured_execution_model(TESSERA_SHARED_DATA);
  auto jain_and_jct = [&](const std::string& policy) {
    Workload copy = w;
    for (JobSpec& j : copy.jobs) model->prepare(j, copy, c);
    QueueTree tree = QueueTree::flat(copy.tenants);
    SimOptions opt;
    opt.queues = &tree;
    const SimResult r = simulate(copy, c, make_policy(policy, 1), *model, opt);
    const auto rep = make_report(copy, c, r, ReportContext{policy, 1, "philly", {}});
    return std::make_pair(rep["fairness"]["jain"].get<double>(), rep["jct"]["mean"].get<double>());
  };
  const auto [fifo_jain, fifo_jct] = jain_and_jct("fifo");
  const auto [fair_jain, fair_jct] = jain_and_jct("fair");
  EXPECT_GE(fair_jain, 0.95);
  EXPECT_GT(fair_jain, fifo_jain);
  EXPECT_LE(fair_jct, 1.05 * fifo_jct);
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

bool has_entry(const JobHistory& h, const std::string& text) {
  for (const HistoryEntry& e : h.entries) {
    if (e.what.find(text) != std::string::npos) return true;
  }
  return false;
}

TEST(WhyPending, NamesTheQuotaThatHoldsAJobAndTheReclaimThatStopsOne) {
  // a borrows the whole cluster; b (guarantee 48, limit 50) returns and reclaims. b's jobs past
  // its limit wait on its quota; a's youngest jobs are preempted for b's.
  Workload w;
  add_jobs(w, "a", 128, 0, 36000);
  add_jobs(w, "b", 128, 1000, 36000);
  QueueTree tree;
  tree.add(kRootQueue, queue("a"));
  QueueSpec b = queue("b", 48);
  b.limit[kGpuDim] = 50 * kMilliPerGpu;
  tree.add(kRootQueue, b);
  tree.finish();
  sort_by_submit(w);
  tree.bind(w.tenants, "test");
  const Policy p = make_policy("fair", 1);
  const UnitSpeed model;
  SimOptions opt;
  opt.queues = &tree;
  opt.checkpoint_grace = 30;
  for (JobId j = 0; j < 64; ++j) opt.explain.push_back(j);  // a's first jobs: some give way
  opt.explain.push_back(200);                               // one of b's, past b's limit
  const SimResult r = simulate(w, k64, p, model, opt);
  ASSERT_EQ(r.histories.size(), 65u);
  int victims = 0;
  for (size_t k = 0; k < 64; ++k) {
    const JobHistory& h = r.histories[k];
    EXPECT_EQ(h.job, k);
    EXPECT_TRUE(has_entry(h, "submitted to queue a")) << h.entries.front().what;
    EXPECT_TRUE(has_entry(h, "finished"));
    if (has_entry(h, "preempted for b-")) {
      ++victims;
      EXPECT_TRUE(has_entry(h, "checkpoint written"));
    }
  }
  EXPECT_EQ(victims, 50);  // b reclaims up to its limit, not its whole fair share (56)
  const JobHistory& waiter = r.histories.back();
  EXPECT_TRUE(has_entry(waiter, "pending (quota-exceeded)"));
  EXPECT_TRUE(has_entry(waiter, "queue b holds 50 GPUs of its limit 50"));
  // Entries are in time order and the history changes only when the reason does.
  for (size_t k = 1; k < waiter.entries.size(); ++k) {
    EXPECT_LE(waiter.entries[k - 1].t, waiter.entries[k].t);
    EXPECT_NE(waiter.entries[k - 1].what, waiter.entries[k].what);
  }
}

}  // namespace
}  // namespace tessera
