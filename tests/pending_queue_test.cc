// The incremental cycle: a PendingQueue kept between cycles, walked lazily, and a
// cycle that stops once nothing more can start. Each test compares it with the reference (a
// plain snapshot, every job considered): the same order, the same decisions, the same reasons
// for the jobs that want one, and the same simulated schedule on a real trace.
#include "engine/pending_queue.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <random>
#include <sstream>

#include "engine/cycle.h"
#include "engine/policy.h"
#include "engine/queue_order.h"
#include "engine/running_set.h"
#include "insight/power_model.h"
#include "insight/runtime_predictor.h"
#include "model/cluster_spec.h"
#include "sim/generator.h"
#include "sim/result_metrics.h"
#include "sim/simulator.h"
#include "sim/trace_readers.h"
#include "sim_test_util.h"
#include "test_util.h"

namespace tessera {
namespace {

using testing::gang;
using testing::World;

// A random mix of waiting jobs over a few tenants, classes, sizes, estimates and deadlines,
// and (with `running`) a half-full cluster of running jobs, some demoted by LAS.
void fill_randomly(World& w, std::mt19937_64& rng, int pending, bool running) {
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint64_t>(n)); };
  for (int i = 0; i < pending; ++i) {
    const int gpus = 1 << pick(3);
    JobSpec s =
        gang("p" + std::to_string(i), pick(4) == 0 ? 2 : 1, gpus, static_cast<double>(pick(50)),
             static_cast<TenantId>(pick(4)), static_cast<PriorityClass>(pick(3)));
    s.duration_estimate = pick(3) == 0 ? kUnknown : 10.0 * (1 + pick(100));
    s.sla_max_queueing = pick(5) == 0 ? 60.0 * pick(10) : -1;
    w.add_pending(s, pick(3) == 0 ? 100000.0 : 0.0);
  }
  if (!running) return;
  const Cluster& c = w.cluster;
  for (NodeId n = 0; n < c.nodes().size(); ++n) {
    if (pick(2) == 0) continue;
    JobSpec s = gang("r" + std::to_string(n), 1, 2, 0, static_cast<TenantId>(pick(4)),
                     static_cast<PriorityClass>(pick(3)));
    w.add_running(s, testing::whole_gpus(c, n, 0, 2), 0,
                  pick(2) == 0 ? 50.0 * (1 + pick(20)) : kUnknown, pick(3) == 0 ? 100000.0 : 0.0);
  }
}

PendingQueue queue_of(const World& w, const QueueOrder& order, std::mt19937_64* wants = nullptr) {
  PendingQueue q(order);
  for (PendingJob p : w.pending) {
    if (wants != nullptr) p.wants_reason = (*wants)() % 4 == 0;
    q.add(p);
  }
  return q;
}

class EveryOrderLazily : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryOrderLazily, WalkingTheQueueGivesTheOrderOfThePlainSnapshot) {
  const auto order = make_queue_order(GetParam());
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    std::mt19937_64 rng(seed);
    World w(make_uniform_cluster(1, 2, 4, 8));
    fill_randomly(w, rng, 60, /*running=*/true);
    const Snapshot plain = w.snapshot();
    const std::vector<uint32_t> expected = order->order(plain);
    const PendingQueue q = queue_of(w, *order);
    Snapshot lazy = plain;
    lazy.pending = q.jobs();
    lazy.pending_queue = &q;
    std::vector<JobId> got, want;
    for (uint32_t i : order->order(lazy)) got.push_back(lazy.pending[i].id);
    for (uint32_t i : expected) want.push_back(plain.pending[i].id);
    EXPECT_EQ(got, want) << "seed " << seed;
  }
}

INSTANTIATE_TEST_SUITE_P(QueueOrder, EveryOrderLazily, ::testing::ValuesIn(queue_order_names()));

TEST(PendingQueue, KeepsItsAggregatesAndIndexesAsJobsComeAndGo) {
  const auto order = make_las_order();
  std::mt19937_64 rng(7);
  World w(make_uniform_cluster(1, 1, 2, 8));
  fill_randomly(w, rng, 200, /*running=*/false);
  PendingQueue q(*order);
  std::vector<JobId> in;
  for (int step = 0; step < 2000; ++step) {
    const PendingJob& p = w.pending[rng() % w.pending.size()];
    if (q.contains(p.id)) {
      q.remove(p.id);
      std::erase(in, p.id);
    } else {
      q.add(p);
      in.push_back(p.id);
    }
  }
  ASSERT_EQ(q.size(), in.size());
  std::vector<Amounts> demand(q.tenants(), kZeroAmounts);
  std::vector<uint32_t> count(q.tenants(), 0);
  size_t in_streams = 0;
  for (const PendingQueue::Stream& s : q.streams()) {
    for (const auto& e : s) {
      EXPECT_EQ(q.jobs()[e.index].id, e.key.id);  // every entry knows where its job is
      ++in_streams;
    }
  }
  EXPECT_EQ(in_streams, in.size());
  for (uint32_t i = 0; i < q.jobs().size(); ++i) {
    const PendingJob& p = q.jobs()[i];
    EXPECT_EQ(q.index_of(p.id), i);
    const JobSpec& s = *p.spec;
    ++count[s.tenant];
    if (s.priority != PriorityClass::kBestEffort) {
      demand[s.tenant] = demand[s.tenant] + amounts_of(s, s.min_members);
    }
  }
  for (TenantId t = 0; t < q.tenants(); ++t) {
    EXPECT_EQ(q.count(t), count[t]);
    EXPECT_EQ(q.demand(t), demand[t]);
  }
  size_t by_shape = 0;
  for (const auto& [shape, jobs] : q.by_shape()) {
    for (const auto& e : jobs) EXPECT_EQ(q.jobs()[e.index].id, e.key.second);
    by_shape += jobs.size();
  }
  EXPECT_EQ(by_shape, in.size());
  EXPECT_THROW(q.add(q.jobs()[0]), std::invalid_argument);
  EXPECT_THROW(q.remove(1u << 30), std::invalid_argument);
}

// A rule over the jobs fill_randomly makes (1 to 8 GPUs, estimates of 10 to 1000 s or none):
// any spare capacity, shadow time (or none), room and GPU counts that may preempt.
PassOver random_rule(std::mt19937_64& rng) {
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint64_t>(n)); };
  PassOver r;
  r.now = 100.0 * pick(10);
  r.shadow_time = pick(5) == 0 ? std::numeric_limits<double>::infinity() : r.now + 10.0 * pick(100);
  r.extra_milli = kMilliPerGpu * pick(9);
  r.room_milli = pick(4) == 0 ? std::numeric_limits<int64_t>::max() : kMilliPerGpu * pick(9);
  for (int k = pick(3); k > 0; --k) r.add_preempt_need(kMilliPerGpu * (1 << pick(4)));
  return r;
}

StreamEntry entry_of(const QueueOrder& order, const PendingJob& p, uint32_t index) {
  const JobSpec& s = *p.spec;
  return StreamEntry{order.pending_key(p), index, amounts_of(s, s.min_members), s.duration_estimate,
                     p.wants_reason};
}

// The searches a stream's sums allow, against a pass over its entries: the first job a rule
// keeps from a key on, and the first job past a place (a monotone test of the job and the
// amounts ahead of it). Flags of wanted reasons flipped after the jobs came in are searched too.
TEST(PendingQueue, FindsTheFirstJobARuleKeepsAndTheFirstPastAPlace) {
  const auto order = make_fair_order();
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    std::mt19937_64 rng(seed);
    World w(make_uniform_cluster(1, 2, 4, 8));
    fill_randomly(w, rng, 300, /*running=*/false);
    PendingQueue q = queue_of(w, *order, &rng);
    for (int k = 0; k < 60; ++k) {
      const PendingJob& p = q.jobs()[rng() % q.size()];
      q.set_wants_reason(p.id, !p.wants_reason);
    }
    for (const PendingQueue::Stream& s : q.streams()) {
      std::vector<const StreamEntry*> entries;
      for (const StreamEntry& e : s) {
        EXPECT_EQ(e.wants_reason, q.jobs()[e.index].wants_reason);
        entries.push_back(&e);
      }
      if (entries.empty()) continue;
      for (int trial = 0; trial < 40; ++trial) {
        const PassOver rule = random_rule(rng);
        const size_t from = rng() % entries.size();
        const StreamEntry* want = nullptr;
        for (size_t k = from; k < entries.size() && want == nullptr; ++k) {
          if (rule.keeps(*entries[k])) want = entries[k];
        }
        EXPECT_EQ(s.first_kept(entries[from]->key, rule), want) << "seed " << seed;

        const PendingKey pivot = entries[rng() % entries.size()]->key;
        const int64_t limit = static_cast<int64_t>(rng() % 200) * kMilliPerGpu;
        auto past = [&](const StreamEntry& e, const Amounts& ahead) {
          return ahead[kGpuDim] > limit || pivot < e.key;
        };
        Amounts ahead = kZeroAmounts, want_ahead = kZeroAmounts, got_ahead{};
        want = nullptr;
        for (const StreamEntry* e : entries) {
          if (past(*e, ahead)) {
            want = e;
            break;
          }
          ahead = ahead + e->amounts;
        }
        want_ahead = ahead;
        EXPECT_EQ(s.first_where(past, got_ahead), want) << "seed " << seed;
        EXPECT_EQ(got_ahead, want_ahead) << "seed " << seed;
      }
    }
  }
}

// The fair walk over a queue, told between steps to pass over jobs by rules that tighten and
// loosen at random: it gives, each time, the first job after the last one it gave, in the
// order of the plain snapshot, that the rule of its tenant keeps now.
TEST(FairWalk, PassingOverJobsKeepsTheOrderOfTheRest) {
  const auto order = make_fair_order();
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    std::mt19937_64 rng(seed);
    World w(make_uniform_cluster(1, 2, 4, 8));
    fill_randomly(w, rng, 150, /*running=*/true);
    const Snapshot plain = w.snapshot();
    const PendingQueue q = queue_of(w, *order, &rng);
    Snapshot lazy = plain;
    lazy.pending = q.jobs();
    lazy.pending_queue = &q;
    const QueueShares shares = compute_queue_shares(lazy);
    std::vector<uint32_t> expected;  // indices into q.jobs(), in the plain order
    for (uint32_t i : order->order(plain)) expected.push_back(q.index_of(plain.pending[i].id));
    const auto walk = order->walk(lazy, shares);
    std::vector<PassOver> rules(q.tenants());
    bool passing = false;
    size_t pos = 0;  // in expected: the first after the last job given
    for (size_t step = 0;; ++step) {
      if (rng() % 3 == 0) {
        for (PassOver& r : rules) r = random_rule(rng);
        ASSERT_TRUE(walk->pass_over(rules));
        passing = true;
      }
      auto kept = [&](uint32_t i) {
        const PendingJob& p = q.jobs()[i];
        return !passing || rules[p.spec->tenant].keeps(entry_of(*order, p, i));
      };
      while (pos < expected.size() && !kept(expected[pos])) ++pos;
      const int64_t got = walk->next();
      if (pos == expected.size()) {
        EXPECT_EQ(got, -1) << "seed " << seed << " step " << step;
        break;
      }
      ASSERT_EQ(got, expected[pos]) << "seed " << seed << " step " << step;
      ++pos;
    }
  }
}

// The decisions of a cycle over the queue, stopping early, against the reference cycle.
void expect_same_cycle(const World& w, const Policy& policy, std::mt19937_64& rng,
                       const std::string& what) {
  const Snapshot plain = w.snapshot(3);
  const Decisions ref = schedule_cycle(plain, policy);
  const PendingQueue q = queue_of(w, *policy.order, &rng);
  // The running jobs as a caller keeps them too (engine/running_set.h): shares and ranks from
  // its sums.
  RunningSet rs(w.cluster, w.queues != nullptr ? w.queues->settings() : FairnessSettings{},
                policy.order.get());
  for (const RunningJob& r : w.running) rs.add(r);
  Snapshot lazy = plain;
  lazy.pending = q.jobs();
  lazy.pending_queue = &q;
  lazy.running = rs.jobs();
  lazy.running_set = &rs;
  // ... and lets the cycle try placements on its own ledger, which it gets back unchanged.
  ClusterState ledger = w.state;
  lazy.state = &ledger;
  lazy.scratch = &ledger;
  const Decisions got = schedule_cycle(lazy, policy);
  EXPECT_FALSE(ledger.journaling()) << what;
  for (GpuId g = 0; g < w.cluster.num_gpus(); ++g) {
    ASSERT_EQ(ledger.gpu_free(g), w.state.gpu_free(g)) << what << " GPU " << g;
  }
  for (NodeId n = 0; n < w.cluster.nodes().size(); ++n) {
    ASSERT_EQ(ledger.node_free_cpu(n), w.state.node_free_cpu(n)) << what << " node " << n;
  }
  auto starts = [](const Decisions& d) {
    std::vector<std::pair<JobId, std::vector<NodeId>>> v;
    for (const Start& s : d.starts) v.emplace_back(s.job, s.alloc.member_node);
    return v;
  };
  auto preempted = [](const Decisions& d) {
    std::vector<std::pair<JobId, JobId>> v;
    for (const Preemption& p : d.preemptions) v.emplace_back(p.job, p.for_job);
    return v;
  };
  EXPECT_EQ(starts(got), starts(ref)) << what;
  EXPECT_EQ(preempted(got), preempted(ref)) << what;
  // Every job that wants its reason gets the one the full walk gives it, and no other.
  size_t wanted = 0;
  for (const PendingJob& p : q.jobs()) {
    const PendingReason* mine = testing::find_reason(got, p.id);
    if (!p.wants_reason) {
      EXPECT_EQ(mine, nullptr) << what;
      continue;
    }
    const PendingReason* theirs = testing::find_reason(ref, p.id);
    ASSERT_EQ(mine == nullptr, theirs == nullptr) << what << " job " << p.id;
    if (mine == nullptr) continue;
    ++wanted;
    EXPECT_EQ(mine->code, theirs->code) << what << " job " << p.id;
    EXPECT_EQ(mine->blocker, theirs->blocker) << what << " job " << p.id;
    EXPECT_EQ(mine->free_gpu_milli, theirs->free_gpu_milli) << what << " job " << p.id;
  }
  EXPECT_EQ(got.pending.size(), wanted) << what;
}

TEST(IncrementalCycle, MakesTheDecisionsOfTheFullWalk) {
  for (const std::string& name : queue_order_names()) {
    for (const std::string backfill : {"easy", "none", "greedy"}) {
      for (uint64_t seed = 1; seed <= 30; ++seed) {
        std::mt19937_64 rng(seed);
        World w(make_uniform_cluster(1, 2, 4, 8));
        // Early or late against the jobs' estimates, so that some end before a reservation's
        // shadow time and some do not; a queue as long as the cluster or several times it.
        w.now = seed % 3 == 0 ? 900 : 100;
        fill_randomly(w, rng, seed % 2 == 0 ? 40 : 200, /*running=*/true);
        Policy policy = make_policy(name, seed);
        policy.backfill = backfill == "easy"   ? Backfill::kEasy
                          : backfill == "none" ? Backfill::kNone
                                               : Backfill::kGreedy;
        expect_same_cycle(w, policy, rng,
                          name + " backfill " + backfill + " seed " + std::to_string(seed));
      }
    }
  }
}

// The fair order over queue trees other than one equal queue per tenant: weighted, with
// guarantees (queues short of their share reclaim), and nested (where the walk does not pass
// over jobs).
TEST(IncrementalCycle, MakesTheDecisionsOfTheFullWalkOverQueueTrees) {
  Interner tenants;
  for (int t = 0; t < 4; ++t) tenants.intern("t" + std::to_string(t));
  QueueTree weighted;
  weighted.add(kRootQueue, testing::queue_spec("t0", 1, 4));
  weighted.add(kRootQueue, testing::queue_spec("t1", 2));
  weighted.add(kRootQueue, testing::queue_spec("t2", 1, 2));
  weighted.add(kRootQueue, testing::queue_spec("t3", 3));
  weighted.finish();
  weighted.bind(tenants, "test");
  QueueTree nested;
  nested.add(kRootQueue, testing::queue_spec("t0", 1, 4));
  const QueueId group = nested.add(kRootQueue, testing::queue_spec("group", 2));
  nested.add(group, testing::queue_spec("t1"));
  nested.add(group, testing::queue_spec("t2"));
  nested.add(kRootQueue, testing::queue_spec("t3"));
  nested.finish();
  nested.bind(tenants, "test");
  for (const QueueTree* tree : {&weighted, &nested}) {
    for (uint64_t seed = 1; seed <= 30; ++seed) {
      std::mt19937_64 rng(seed);
      World w(make_uniform_cluster(1, 2, 4, 8));
      w.queues = tree;
      w.now = seed % 3 == 0 ? 900 : 100;
      fill_randomly(w, rng, seed % 2 == 0 ? 40 : 200, /*running=*/true);
      expect_same_cycle(
          w, make_policy("fair", seed), rng,
          std::string(tree == &weighted ? "weighted" : "nested") + " seed " + std::to_string(seed));
    }
  }
}

// A full cluster held by two tenants over their shares, and two tenants waiting: the first
// job of one is too large for its share, so it waits with EASY's reservation, and the jobs
// behind it reclaim GPUs, each where the full walk reaches it (the lazy walk passes over the
// jobs around them).
TEST(IncrementalCycle, ReclaimsBehindAReservationAsTheFullWalk) {
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    std::mt19937_64 rng(seed);
    auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint64_t>(n)); };
    World w(make_uniform_cluster(1, 2, 4, 8));
    w.now = 5000;
    const Cluster& c = w.cluster;
    for (NodeId n = 0; n < c.nodes().size(); ++n) {
      for (int g = 0; g < 4; g += 2) {
        JobSpec s = gang("r" + std::to_string(n * 4 + g), 1, 2, 0, static_cast<TenantId>(pick(2)));
        w.add_running(s, testing::whole_gpus(c, n, g, 2), 100.0 * pick(10),
                      pick(2) == 0 ? 5000 + 100.0 * (1 + pick(50)) : kUnknown);
      }
    }
    w.add_pending(gang("big", 1, 8, 4900, 2));  // not starving yet: waited under an hour
    for (int i = 0; i < 60; ++i) {
      JobSpec s = gang("p" + std::to_string(i), 1, 1 << pick(2), 4901.0 + i,
                       static_cast<TenantId>(2 + pick(2)));
      s.duration_estimate = pick(3) == 0 ? kUnknown : 100.0 * (1 + pick(100));
      w.add_pending(s);
    }
    expect_same_cycle(w, make_policy("fair", seed), rng, "seed " + std::to_string(seed));
  }
}

// Slices of the real Philly trace on a cluster far smaller than they ask for (the queue grows
// to thousands): the incremental simulator writes the same event log, metrics, first reasons
// and explained histories as the reference, under every order. The longer slice is where the
// fair walk jumps ahead behind EASY's reservation and a preemption frees GPUs mid-jump.
TEST(IncrementalCycle, ReplaysPhillyExactlyAsTheFullWalk) {
  const std::string trace = std::string(TESSERA_SHARED_DATA) + "/philly/pollux/philly.csv";
  if (!std::filesystem::exists(trace)) GTEST_SKIP() << "no " << trace;
  const Cluster c = make_uniform_cluster(1, 1, 8, 4);  // 32 GPUs
  const auto model = make_measured_execution_model(TESSERA_SHARED_DATA);
  auto slice = [&](size_t jobs) {
    ReaderOptions ro;
    ro.max_jobs = jobs;
    Workload w = read_workload(trace, TraceFormat::kPhilly, ro);
    for (JobSpec& j : w.jobs) model->prepare(j, w, c);
    return w;
  };
  const Workload small = slice(1500), large = slice(5000);
  std::vector<std::pair<std::string, const Workload*>> runs;
  for (const std::string& name : queue_order_names()) runs.emplace_back(name, &small);
  runs.emplace_back("fair", &large);
  runs.emplace_back("drf", &large);
  for (const auto& [name, w] : runs) {
    auto run = [&](bool full) {
      std::ostringstream events;
      SimOptions opt;
      opt.events = &events;
      opt.full_cycles = full;
      opt.explain = {3, 400, 1200};
      const SimResult r = simulate(*w, c, make_policy(name, 1), *model, opt);
      nlohmann::json report = make_report(*w, c, r, ReportContext{name, 1, "philly", {}});
      nlohmann::json histories = nlohmann::json::array();
      for (const JobHistory& h : r.histories) {
        for (const HistoryEntry& e : h.entries) histories.push_back({e.t, e.what});
      }
      return std::make_tuple(events.str(), report.dump(), histories.dump(), r.cycles);
    };
    const std::string what = name + " on " + std::to_string(w->jobs.size()) + " jobs";
    const auto [ref_events, ref_report, ref_why, ref_cycles] = run(true);
    const auto [events, report, why, cycles] = run(false);
    EXPECT_EQ(events, ref_events) << what;
    EXPECT_EQ(report, ref_report) << what;
    EXPECT_EQ(why, ref_why) << what;
    EXPECT_EQ(cycles, ref_cycles) << what;
    EXPECT_GT(std::count(events.begin(), events.end(), '\n'), 3000) << what;
  }
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

// Every change to a running job the simulator makes outside a start and a stop, kept in its
// running set as it happens (a power limit moves its speed, an elastic gang grows and shrinks,
// a node failure ends it, a predictor's expected end moves with the clock): the incremental
// simulator writes the same event log and metrics as the reference that rebuilds the running
// jobs every cycle.
TEST(IncrementalCycle, KeepsRunningJobsAsTheFullWalkUnderPowerFailuresAndPrediction) {
  GeneratorOptions g;
  g.jobs = 300;
  g.tenants = 3;
  g.mean_interarrival_s = 90;
  Workload w = generate_workload(g);
  for (size_t i = 0; i < w.jobs.size(); ++i) {
    JobSpec& j = w.jobs[i];
    if (j.min_members > 1 && j.demand.gpus > 0 && i % 3 == 0) j.max_members = j.min_members * 2;
    j.duration_estimate = j.work_seconds * (i % 2 == 0 ? 0.5 : 1.5);  // some run past it
  }
  const Cluster c = make_uniform_cluster(1, 2, 4, 8);
  PowerModel::TypeCurves v100;
  v100[""] = PowerCurve({{100, 0.6, 95}, {150, 0.85, 130}, {200, 0.97, 165}, {250, 1.0, 200}});
  const PowerModel power({{"V100", v100}});
  const testing::UnitSpeed model;
  for (const std::string& name : {std::string("fifo"), std::string("fair"), std::string("qssf")}) {
    auto run = [&](bool full) {
      std::ostringstream events;
      Policy p = make_policy(name, 1);
      p.elastic = true;
      p.power_shifting = true;
      SimOptions opt;
      opt.events = &events;
      opt.full_cycles = full;
      opt.power = &power;
      opt.energy.node_base_w = 200;
      opt.energy.cap_w = 8 * (200 + 4 * 250.0) * 0.6;
      opt.failures = {NodeFailure{3000, 1, 2000}, NodeFailure{9000, 5, 600}};
      const auto predictor = make_mean_predictor(600);
      if (name == "qssf") opt.predictor = predictor.get();
      const SimResult r = simulate(w, c, p, model, opt);
      return std::make_tuple(events.str(), r.cycles, r.resizes, r.energy.limit_changes);
    };
    const auto [ref_events, ref_cycles, ref_resizes, ref_limits] = run(true);
    const auto [events, cycles, resizes, limits] = run(false);
    // The first line where the logs part (not both logs whole: they are long).
    std::istringstream a(events), b(ref_events);
    std::string la, lb;
    size_t line = 0;
    while (std::getline(a, la) && std::getline(b, lb) && la == lb) ++line;
    EXPECT_EQ(events.size(), ref_events.size())
        << name << ": line " << line << ": " << la << " / " << lb;
    EXPECT_TRUE(events == ref_events) << name << ": line " << line << ": " << la << " / " << lb;
    EXPECT_EQ(cycles, ref_cycles) << name;
    EXPECT_GT(resizes + limits, 0u) << name;  // the changes this test is about happened
    EXPECT_EQ(resizes, ref_resizes) << name;
    EXPECT_EQ(limits, ref_limits) << name;
  }
}

}  // namespace
}  // namespace tessera
