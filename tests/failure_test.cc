// Node failures in the simulator: the seeded MTBF model, failure lists, and what a failure does
// to the jobs on the node (work since the last checkpoint lost, requeued, resumed elsewhere or
// after the repair) and the fault recovery time.
#include <gtest/gtest.h>

#include <sstream>

#include <nlohmann/json.hpp>

#include "engine/policy.h"
#include "input_error_util.h"
#include "model/cluster_spec.h"
#include "sim/failure_model.h"
#include "sim/recovery_policy.h"
#include "sim/simulator.h"
#include "sim_test_util.h"

namespace tessera {
namespace {

using testing::UnitSpeed;

TEST(FailureModel, SeededExponentialFailuresAtTheMtbfRate) {
  const Cluster c = make_uniform_cluster(1, 4, 8, 8);  // 32 nodes
  const double day = 86400;
  const auto a = generate_failures(c, 0, 100 * day, day, 1800, 7);
  const auto b = generate_failures(c, 0, 100 * day, day, 1800, 7);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].time, b[i].time);
    EXPECT_EQ(a[i].node, b[i].node);
    if (i > 0) {
      EXPECT_LE(a[i - 1].time, a[i].time);
    }
  }
  // 32 nodes x 100 days at one failure a day: about 3,200 (Poisson, sd ~57).
  EXPECT_NEAR(static_cast<double>(a.size()), 3200, 300);
  EXPECT_NE(generate_failures(c, 0, 100 * day, day, 1800, 8).front().time, a.front().time);
}

TEST(FailureModel, ListsNameTheLineAndFieldOfABadRow) {
  const Cluster c = make_uniform_cluster(1, 1, 2, 4);
  const auto ok =
      parse_failure_list("time,node,repair_seconds\n50,node-1,10\n20,node-0,5\n", "f.csv", c);
  ASSERT_EQ(ok.size(), 2u);
  EXPECT_EQ(ok[0].time, 20);  // sorted
  EXPECT_EQ(ok[0].node, 0u);
  std::string e = testing::error_of(
      [&] { parse_failure_list("time,node,repair_seconds\n5,node-9,1\n", "f.csv", c); });
  EXPECT_TRUE(testing::Contains(e, "f.csv:2"));
  EXPECT_TRUE(testing::Contains(e, "node-9"));
  e = testing::error_of(
      [&] { parse_failure_list("time,node,repair_seconds\nsoon,node-0,1\n", "f.csv", c); });
  EXPECT_TRUE(testing::Contains(e, "f.csv:2"));
  EXPECT_TRUE(testing::Contains(e, "time"));
}

JobSpec one_gpu_job(const std::string& name, double submit, double work, double ckpt) {
  JobSpec j;
  j.name = name;
  j.submit_time = submit;
  j.min_members = j.max_members = 4;
  j.work_seconds = work;
  j.checkpoint_interval = ckpt;
  j.source = "test";
  return j;
}

struct SimRun {
  SimResult result;
  std::string events;
};

SimRun run(Workload& w, const Cluster& c, std::vector<NodeFailure> failures) {
  w.tenants.intern("t");
  const Policy p = make_policy("fifo", 1);
  const UnitSpeed model;
  std::ostringstream events;
  SimOptions opt;
  opt.events = &events;
  opt.failures = std::move(failures);
  return SimRun{simulate(w, c, p, model, opt), events.str()};
}

TEST(Failures, AFailedNodesJobLosesItsWorkSinceTheCheckpointAndResumesElsewhere) {
  const Cluster c = make_uniform_cluster(1, 1, 2, 4);  // node-0, node-1, 4 GPUs each
  Workload w;
  w.jobs.push_back(one_gpu_job("a", 0, 1000, 300));  // bestfit: node-0
  const SimRun r = run(w, c, {NodeFailure{700, 0, 500}});
  // 600 s of work survive (two checkpoints); it restarts at once on node-1 and needs 400 more.
  EXPECT_DOUBLE_EQ(r.result.jobs[0].finish, 1100);
  EXPECT_DOUBLE_EQ(r.result.jobs[0].lost_work_seconds, 100);
  EXPECT_EQ(r.result.failure.failures, 1u);
  EXPECT_EQ(r.result.failure.jobs_hit, 1u);
  ASSERT_EQ(r.result.failure.frt.size(), 1u);
  EXPECT_DOUBLE_EQ(r.result.failure.frt[0], 0);  // node-1 was free
  EXPECT_NEAR(r.result.failure.lost_gpu_seconds, 4 * 100, 1e-9);
  EXPECT_NE(r.events.find(R"("type":"fail","job":"a")"), std::string::npos) << r.events;
  EXPECT_NE(r.events.find("node-1/0:1000"), std::string::npos) << r.events;
}

TEST(Failures, NothingRunsOnANodeWhileItIsDownAndEveryHitJobRestarts) {
  const Cluster c = make_uniform_cluster(1, 1, 1, 4);  // one node
  Workload w;
  w.jobs.push_back(one_gpu_job("a", 0, 1000, 0));  // checkpoints only when asked
  w.jobs.push_back(one_gpu_job("b", 100, 100, 0));
  const SimRun r = run(w, c, {NodeFailure{200, 0, 300}});
  // a loses its whole run (a crash gives no warning); the node is back at 500, then a runs
  // its 1000 s again (FIFO: it was submitted first), then b.
  EXPECT_DOUBLE_EQ(r.result.jobs[0].lost_work_seconds, 200);
  EXPECT_DOUBLE_EQ(r.result.jobs[0].finish, 1500);
  EXPECT_DOUBLE_EQ(r.result.jobs[1].finish, 1600);
  ASSERT_EQ(r.result.failure.frt.size(), 1u);
  EXPECT_DOUBLE_EQ(r.result.failure.frt[0], 300);
  EXPECT_EQ(r.result.failure.unrecovered, 0u);
  // No start between the failure and the repair.
  std::istringstream in(r.events);
  std::string line;
  while (std::getline(in, line)) {
    const auto e = nlohmann::json::parse(line);
    if (e["type"] == "start") {
      const double t = e["t"].get<double>();
      EXPECT_TRUE(t < 200 || t >= 500) << line;
    }
  }
  // Failures after every job is done change nothing measured.
  Workload w2;
  w2.jobs.push_back(one_gpu_job("a", 0, 100, 0));
  const SimRun late = run(w2, c, {NodeFailure{5000, 0, 10}});
  EXPECT_DOUBLE_EQ(late.result.last_finish, 100);
  EXPECT_EQ(late.result.failure.failures, 0u);
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

// In place: the surviving member keeps its GPUs and the lost one restarts at once on free room
// (the failed node's rack first; here its other node is the survivor's and full, so elsewhere).
TEST(Recovery, InPlaceKeepsTheSurvivorsAndRestartsTheLostMembersAtOnce) {
  const Cluster c = make_uniform_cluster(1, 2, 2, 4);  // racks of node-0,1 and node-2,3
  Workload w;
  JobSpec j = one_gpu_job("a", 0, 1000, 300);
  j.min_members = j.max_members = 2;
  j.demand.gpus = 4;  // one member per node
  w.jobs.push_back(j);
  w.tenants.intern("t");
  const Policy p = make_policy("fifo+spread", 1);
  const UnitSpeed model;
  for (const char* name : {"in-place", "requeue"}) {
    std::ostringstream events;
    SimOptions opt;
    opt.events = &events;
    opt.failures = {NodeFailure{700, 0, 500}};
    const auto policy = make_recovery_policy(name);
    opt.recovery = policy.get();
    Workload copy = w;
    const SimResult r = simulate(copy, c, p, model, opt);
    ASSERT_EQ(r.failure.frt.size(), 1u) << name;
    EXPECT_DOUBLE_EQ(r.failure.frt[0], 0) << name;
    EXPECT_DOUBLE_EQ(r.jobs[0].finish, 1100) << name;
    if (std::string(name) == "in-place") {
      EXPECT_EQ(r.failure.restarted_in_place, 1u);
      // The restart holds the survivor's node-1 GPUs again.
      const std::string ev = events.str();
      const size_t restart = ev.rfind(R"("type":"start")");
      ASSERT_NE(restart, std::string::npos);
      EXPECT_NE(ev.find("node-1/", restart), std::string::npos) << ev;
    } else {
      EXPECT_EQ(r.failure.restarted_in_place, 0u);
    }
  }
}

TEST(Recovery, QLearningMovesTowardTheRewardAndPrefersTheBestAction) {
  QLearningRecovery q(/*epsilon=*/0, /*learning_rate=*/0.5);
  const RecoveryState s{2, 2, 1};
  q.learn(s, RecoveryAction::kRequeue, -4);
  EXPECT_DOUBLE_EQ(q.q(s, RecoveryAction::kRequeue), -2);
  q.learn(s, RecoveryAction::kSameRack, -1);
  q.learn(s, RecoveryAction::kAnywhere, -0.2);
  Rng rng(1);
  EXPECT_EQ(q.choose(s, rng), RecoveryAction::kAnywhere);
  EXPECT_EQ(q.updates(), 3u);
  EXPECT_EQ(make_recovery_policy("nonsense"), nullptr);
}

}  // namespace
}  // namespace tessera
