// Prediction in use: the accuracy replay never peeks, the simulator feeds the
// predictor, `tessera predict` reports, and EASY backfill with right predictions never delays
// the reserved head-of-line job.
#include "sim/prediction_eval.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <deque>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "cli_util.h"
#include "engine/cycle.h"
#include "engine/policy.h"
#include "engine/snapshot.h"
#include "model/cluster_spec.h"
#include "model/cluster_state.h"
#include "sim/execution_model.h"
#include "sim/simulator.h"
#include "sim_test_util.h"

namespace tessera {
namespace {

JobSpec make_job(Workload& w, const std::string& tenant, double submit, double seconds,
                 int gpus = 1) {
  JobSpec j;
  j.name = tenant + "-job-" + std::to_string(w.jobs.size());
  j.tenant = w.tenants.intern(tenant);
  j.submit_time = submit;
  j.min_members = j.max_members = gpus;
  j.work_seconds = seconds;
  j.duration_estimate = seconds;
  return j;
}

// Fails the test if it is shown a job that had not finished when it is asked to predict.
class Recorder final : public RuntimePredictor {
 public:
  std::string_view name() const override { return "recorder"; }
  Prediction predict(const JobFeatures& f) const override {
    ++predictions;
    for (double finish : finishes) EXPECT_LE(finish, f.submit_time) << "peeked";
    Prediction p;
    p.point = 1;
    return p;
  }
  void observe(const JobFeatures& f, double actual) override {
    finishes.push_back(f.submit_time + actual);
    actuals.push_back(actual);
  }
  std::vector<double> finishes, actuals;
  mutable int predictions = 0;
};

TEST(PredictionEval, LearnsOnlyFromJobsFinishedBeforeEachSubmission) {
  Workload w;
  w.jobs.push_back(make_job(w, "a", 0, 1000));
  w.jobs.push_back(make_job(w, "a", 10, 50));   // A is still running: nothing to learn from
  w.jobs.push_back(make_job(w, "a", 100, 70));  // the 50 s job has finished (t=60)
  w.jobs.push_back(make_job(w, "a", 2000, 10));
  auto quantile = make_quantile_predictor();
  Recorder rec;
  std::vector<RuntimePredictor*> ps{&rec, quantile.get()};
  const auto r = evaluate_predictors(w, ps);
  EXPECT_EQ(rec.predictions, 4);
  EXPECT_EQ(rec.actuals, (std::vector<double>{50, 70, 1000}));  // in finish order
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[1].jobs, 4u);
  // The second job was predicted from the prior, the third from the 50 s job alone.
  EXPECT_EQ(r[1].sources.at("prior"), 2u);
  EXPECT_EQ(r[1].sources.at("global"), 1u);
}

TEST(PredictionEval, ScoresRelativeErrors) {
  Workload w;
  for (int i = 0; i < 10; ++i) w.jobs.push_back(make_job(w, "a", 1000.0 * i, 100));
  auto q = make_quantile_predictor();
  std::vector<RuntimePredictor*> ps{q.get()};
  PredictionEvalOptions o;
  o.skip = 2;
  const auto r = evaluate_predictors(w, ps, o);
  EXPECT_EQ(r[0].jobs, 8u);
  EXPECT_DOUBLE_EQ(r[0].median_rel_error, 0);
  EXPECT_DOUBLE_EQ(r[0].within_2x, 1);
}

using testing::UnitSpeed;

TEST(SimulatorPrediction, PredictsAtSubmitAndObservesEachFinish) {
  Workload w;
  for (int i = 0; i < 12; ++i) w.jobs.push_back(make_job(w, "a", 10.0 * i, 100 + 10 * i, 2));
  const Cluster c = make_uniform_cluster(1, 1, 1, 4, "V100");
  UnitSpeed model;
  Recorder rec;
  SimOptions opt;
  opt.predictor = &rec;
  const SimResult r = simulate(w, c, make_policy("sjf", 1), model, opt);
  EXPECT_EQ(rec.predictions, 12);
  ASSERT_EQ(rec.actuals.size(), 12u);
  double sum = 0, work = 0;
  for (double a : rec.actuals) sum += a;
  for (const JobSpec& j : w.jobs) work += j.work_seconds;
  EXPECT_NEAR(sum, work, 1e-6);
  // The caller's workload keeps its estimates.
  EXPECT_DOUBLE_EQ(w.jobs[3].duration_estimate, w.jobs[3].work_seconds);
  for (const JobOutcome& o : r.jobs) EXPECT_GE(o.finish, 0);

  // Jobs with a trace estimate keep it when asked: nothing left to predict.
  Recorder keep;
  opt.predictor = &keep;
  opt.keep_trace_estimates = true;
  simulate(w, c, make_policy("sjf", 1), model, opt);
  EXPECT_EQ(keep.predictions, 0);
  EXPECT_EQ(keep.actuals.size(), 12u);
}

TEST(SimulatorPrediction, PredictedSjfBeatsFifoOnARepeatingWorkload) {
  // Two kinds of job arrive in bursts, short ones and long ones, one GPU each; sjf learns
  // which tenant runs short jobs and lets them through.
  Workload w;
  for (int burst = 0; burst < 6; ++burst) {
    const double t = 2000.0 * burst;  // the cluster drains between bursts
    for (int i = 0; i < 4; ++i) w.jobs.push_back(make_job(w, "long", t, 500));
    for (int i = 0; i < 4; ++i) w.jobs.push_back(make_job(w, "short", t + 1, 20));
  }
  for (JobSpec& j : w.jobs) j.duration_estimate = kUnknown;
  const Cluster c = make_uniform_cluster(1, 1, 1, 2, "V100");
  UnitSpeed model;
  auto mean_jct = [&](const std::string& policy, RuntimePredictor* p) {
    SimOptions opt;
    opt.predictor = p;
    const SimResult r = simulate(w, c, make_policy(policy, 1), model, opt);
    double s = 0;
    for (const JobOutcome& o : r.jobs) s += o.finish - o.submit;
    return s / static_cast<double>(r.jobs.size());
  };
  auto q1 = make_quantile_predictor();
  auto q2 = make_quantile_predictor();
  const double fifo = mean_jct("fifo", nullptr);
  EXPECT_LT(mean_jct("sjf", q1.get()), fifo);
  EXPECT_LT(mean_jct("qssf", q2.get()), fifo);
}

// An engine-level replay: one 8-GPU node (so any demand up to the free GPUs fits), FIFO with
// EASY backfill, every running job's expected_end exact (predictions right). Whenever a job
// first becomes the blocked head of the queue, the time its reservation is computed for (when
// enough running jobs end) is noted; it must start no later than that, however many jobs were
// backfilled around it.
TEST(BackfillSafety, BackfilledJobNeverDelaysTheReservedHeadWhenPredictionsAreRight) {
  int backfilled = 0, reserved = 0;
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    std::mt19937_64 rng(seed);
    const Cluster c = make_uniform_cluster(1, 1, 1, 8);
    ClusterState state(c);
    std::vector<JobSpec> specs(40);
    double t = 0;
    for (size_t i = 0; i < specs.size(); ++i) {
      JobSpec& s = specs[i];
      s.name = "j" + std::to_string(i);
      s.min_members = s.max_members = 1;
      s.demand.gpus = static_cast<int32_t>(1 + rng() % 8);
      s.work_seconds = s.duration_estimate = static_cast<double>(1 + rng() % 100);
      t += static_cast<double>(rng() % 15);
      s.submit_time = t;
    }
    Policy policy = make_policy("fifo", 1);
    policy.backfill = Backfill::kEasy;
    policy.preemption = false;
    std::vector<JobId> pending;
    struct Run {
      JobId id;
      double end;
    };
    std::vector<Run> running;
    std::deque<Allocation> allocs(specs.size());
    std::map<JobId, double> deadline;  // reservation time when first the blocked head
    std::vector<double> start(specs.size(), -1);
    size_t next = 0;
    double now = 0;
    while (next < specs.size() || !pending.empty() || !running.empty()) {
      double when = std::numeric_limits<double>::infinity();
      if (next < specs.size()) when = specs[next].submit_time;
      for (const Run& r : running) when = std::min(when, r.end);
      now = when;
      std::erase_if(running, [&](const Run& r) {
        if (r.end > now) return false;
        state.release(allocs[r.id]);
        return true;
      });
      while (next < specs.size() && specs[next].submit_time <= now) {
        pending.push_back(static_cast<JobId>(next++));
      }
      std::vector<PendingJob> snap_pending;
      for (JobId j : pending) {
        snap_pending.push_back(PendingJob{j, &specs[j], 0, specs[j].submit_time});
      }
      std::vector<RunningJob> snap_running;
      for (const Run& r : running) {
        RunningJob rj;
        rj.id = r.id;
        rj.spec = &specs[r.id];
        rj.alloc = &allocs[r.id];
        rj.start_time = start[r.id];
        rj.expected_end = r.end;  // the prediction is right
        snap_running.push_back(rj);
      }
      Snapshot snap;
      snap.now = now;
      snap.state = &state;
      snap.pending = snap_pending;
      snap.running = snap_running;
      Decisions d = schedule_cycle(snap, policy);
      for (Start& s : d.starts) {
        allocs[s.job] = std::move(s.alloc);
        state.allocate(allocs[s.job]);
        start[s.job] = now;
        running.push_back(Run{s.job, now + specs[s.job].work_seconds});
        if (s.backfilled) ++backfilled;
      }
      std::erase_if(pending, [&](JobId j) { return start[j] >= 0; });
      if (pending.empty() || deadline.contains(pending.front())) continue;
      // The head (FIFO: the earliest pending job) is blocked: when will it fit?
      const JobId head = pending.front();
      std::vector<Run> ends = running;
      std::sort(ends.begin(), ends.end(), [](const Run& a, const Run& b) { return a.end < b.end; });
      int free = 8;
      for (const Run& r : running) free -= specs[r.id].demand.gpus;
      for (const Run& r : ends) {
        free += specs[r.id].demand.gpus;
        if (free >= specs[head].demand.gpus) {
          deadline[head] = r.end;
          break;
        }
      }
      ASSERT_TRUE(deadline.contains(head));
      ++reserved;
    }
    for (const auto& [job, by] : deadline) {
      EXPECT_LE(start[job], by + 1e-9) << "seed " << seed << " job " << specs[job].name;
    }
  }
  // The scenarios did exercise backfill around reservations.
  EXPECT_GT(reserved, 100);
  EXPECT_GT(backfilled, 20);
}

TEST(PredictCli, WritesTheAccuracyTableAsJson) {
  const std::string dir = ::testing::TempDir();
  const std::string trace = dir + "/predict_cli.jsonl";
  const std::string out = dir + "/predict_cli.json";
  {
    std::ofstream f(trace);
    for (int i = 0; i < 30; ++i) {
      f << R"({"name":"exp-)" << i << R"(","tenant":")" << (i % 2 ? "a" : "b") << R"(","submit":)"
        << 100 * i << R"(,"gpus":1,"work":)" << (i % 2 ? (i % 10 == 1 ? 1500 : 50) : 500) << "}\n";
    }
  }
  const auto r = testing::run_tessera("predict --workload " + trace + " --json " + out);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("median_rel"), std::string::npos);
  std::ifstream in(out);
  const nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_EQ(j.at("jobs"), 30);
  EXPECT_EQ(j.at("format"), "jsonl");
  ASSERT_EQ(j.at("predictors").size(), 3u);
  for (const auto& p : j.at("predictors")) {
    for (const char* k : {"predictor", "jobs", "median_rel_error", "p90_rel_error",
                          "mean_rel_error", "within_2x", "interval_coverage", "sources"}) {
      EXPECT_TRUE(p.contains(k)) << k;
    }
  }
  EXPECT_EQ(j.at("predictors")[0].at("predictor"), "mean");
  // The per-tenant quantiles beat the running mean, which the rare long job skews.
  EXPECT_GT(j.at("predictors")[1].at("within_2x").get<double>(),
            j.at("predictors")[0].at("within_2x").get<double>());
  const auto bad = testing::run_tessera("predict --workload " + trace + " --predictor oracle");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.output.find("unknown predictor"), std::string::npos);
}

TEST(PredictCli, ScoringNoJobIsAnErrorNotAPerfectTable) {
  // "160 jobs, 0 scored" printed an all-zero table and exited 0.
  const std::string trace = ::testing::TempDir() + "/predict_none.jsonl";
  {
    std::ofstream f(trace);
    for (int i = 0; i < 3; ++i) {
      f << R"({"name":"j)" << i << R"(","submit":)" << i << R"(,"work":10})"
        << "\n";
    }
  }
  const auto r = testing::run_tessera("predict --workload " + trace + " --skip 5");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("no job was scored"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--skip 5"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("median_rel"), std::string::npos) << r.output;
}

TEST(SimulateCli, AcceptsAPredictor) {
  const std::string dir = ::testing::TempDir();
  const std::string trace = dir + "/simulate_predictor.jsonl";
  {
    std::ofstream f(trace);
    for (int i = 0; i < 20; ++i) {
      f << R"({"name":"exp-)" << i << R"(","submit":)" << 10 * i << R"(,"gpus":1,"work":)"
        << (i % 2 ? 50 : 500) << "}\n";
    }
  }
  for (const char* p : {"quantile", "gbt", "mean"}) {
    const auto r = testing::run_tessera("simulate --quiet --policy qssf --workload " + trace +
                                        " --predictor " + p);
    EXPECT_EQ(r.status, 0) << p << ": " << r.output;
  }
  const auto bad =
      testing::run_tessera("simulate --quiet --workload " + trace + " --predictor oracle");
  EXPECT_NE(bad.status, 0);
}

}  // namespace
}  // namespace tessera
