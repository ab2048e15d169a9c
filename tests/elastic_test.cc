// Elastic gangs (min_members < max_members) in one cycle and through the simulator: they
// shrink towards their minimum before anyone is preempted whole, never below it, and grow into
// GPUs nothing pending can use.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "engine/cycle.h"
#include "engine/policy.h"
#include "test_util.h"

namespace tessera {
namespace {

using testing::gang;
using testing::World;

// `count` one-GPU members on node n, GPUs first .. first + count - 1.
Allocation members_on(const Cluster& c, NodeId n, int first, int count) {
  Allocation a;
  a.gpus_per_member = 1;
  for (int g = first; g < first + count; ++g) {
    a.member_node.push_back(n);
    a.shares.push_back({c.node(n).first_gpu + static_cast<GpuId>(g), kMilliPerGpu});
  }
  return a;
}

JobSpec elastic(const std::string& name, int min, int max) {
  JobSpec s = gang(name, min);
  s.max_members = max;
  return s;
}

Policy elastic_policy(const char* spec = "fifo") {
  Policy p = make_policy(spec, 1);
  p.elastic = true;
  return p;
}

TEST(Elastic, ShrinksInsteadOfBeingPreemptedWhole) {
  World w(make_uniform_cluster(1, 1, 1, 8));
  w.add_running(elastic("e", 2, 8), members_on(w.cluster, 0, 0, 8), 0);
  const JobId p = w.add_pending(gang("prod", 4, 1, 10, 0, PriorityClass::kProduction));
  w.now = 20;
  const Decisions d = schedule_cycle(w.snapshot(), elastic_policy());
  EXPECT_TRUE(d.preemptions.empty());
  ASSERT_EQ(d.resizes.size(), 1u);
  EXPECT_FALSE(d.resizes[0].grow);
  EXPECT_EQ(d.resizes[0].for_job, p);
  EXPECT_EQ(d.resizes[0].alloc.members(), 4);  // only as far as needed
  ASSERT_EQ(d.starts.size(), 1u);
  EXPECT_EQ(d.starts[0].job, p);
  // Without elasticity the same job is preempted whole.
  const Decisions rigid = schedule_cycle(w.snapshot(), make_policy("fifo", 1));
  EXPECT_EQ(rigid.preemptions.size(), 1u);
  EXPECT_TRUE(rigid.resizes.empty());
}

TEST(Elastic, NeverShrinksBelowItsMinimum) {
  World w(make_uniform_cluster(1, 1, 1, 8));
  w.add_running(elastic("e", 6, 8), members_on(w.cluster, 0, 0, 8), 0);
  w.add_pending(gang("prod", 4, 1, 10, 0, PriorityClass::kProduction));
  w.now = 20;
  const Decisions d = schedule_cycle(w.snapshot(), elastic_policy());
  // Shrinking to 6 frees only 2: the gang is preempted whole instead, and no shrink is left
  // half-applied.
  EXPECT_TRUE(d.resizes.empty());
  EXPECT_EQ(d.preemptions.size(), 1u);
  for (const Resize& r : d.resizes) EXPECT_GE(r.alloc.members(), 6);
}

TEST(Elastic, GrowsIntoWhatTheWaitingJobsLeave) {
  World w(make_uniform_cluster(1, 1, 2, 4));
  w.add_running(elastic("e", 1, 8), members_on(w.cluster, 0, 0, 2), 0);
  w.now = 1000;
  Decisions d = schedule_cycle(w.snapshot(), elastic_policy());
  ASSERT_EQ(d.resizes.size(), 1u);
  EXPECT_TRUE(d.resizes[0].grow);
  EXPECT_EQ(d.resizes[0].alloc.members(), 8);
  // The members it had stay where they were.
  EXPECT_EQ(d.resizes[0].alloc.shares[0], (GpuShare{w.cluster.node(0).first_gpu, kMilliPerGpu}));
  // Not within resize_interval of its (re)start: a resize costs a restart.
  w.now = 100;
  EXPECT_TRUE(schedule_cycle(w.snapshot(), elastic_policy()).resizes.empty());
  // A waiting job that fits starts first; the gang grows into the rest.
  w.now = 1000;
  const JobId small = w.add_pending(gang("small", 2, 1, 10));
  d = schedule_cycle(w.snapshot(), elastic_policy());
  ASSERT_EQ(d.starts.size(), 1u);
  EXPECT_EQ(d.starts[0].job, small);
  ASSERT_EQ(d.resizes.size(), 1u);
  EXPECT_EQ(d.resizes[0].alloc.members(), 6);
}

// What a gang grew beyond its minimum, any waiting job may take back.
TEST(Elastic, AWaitingJobTakesBackWhatAGangGrew) {
  World w(make_uniform_cluster(1, 1, 1, 8));
  w.add_running(elastic("e", 2, 8), members_on(w.cluster, 0, 0, 8), 0);
  const JobId p = w.add_pending(gang("p", 3, 1, 10));  // same class: no priority preemption
  w.now = 1000;
  const Decisions d = schedule_cycle(w.snapshot(), elastic_policy());
  EXPECT_TRUE(d.preemptions.empty());
  ASSERT_EQ(d.resizes.size(), 1u);
  EXPECT_FALSE(d.resizes[0].grow);
  EXPECT_EQ(d.resizes[0].alloc.members(), 5);
  ASSERT_EQ(d.starts.size(), 1u);
  EXPECT_EQ(d.starts[0].job, p);
}

// End to end: elastic gangs in a simulation pass the independent audit (no GPU over-committed,
// JCTs as reported) and resize.
TEST(Elastic, SimulationWithElasticGangsPassesTheAudit) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("tessera-elastic-" + std::to_string(getpid()));
  fs::create_directories(dir);
  {
    // Two fixed jobs leave 4 GPUs: the elastic one starts with 4, grows to 8 when they end,
    // and shrinks (not preempted whole) for the production job that needs 12.
    std::ofstream w(dir / "w.jsonl");
    w << R"({"name":"f0","submit":0,"members":6,"work":2000})"
      << "\n"
      << R"({"name":"f1","submit":0,"members":6,"work":2000})"
      << "\n"
      << R"({"name":"e","submit":10,"min_members":2,"max_members":8,"work":40000,)"
      << R"("restart_cost":20})"
      << "\n"
      << R"({"name":"p","submit":5000,"members":12,"work":1000,"priority":"production"})"
      << "\n";
    std::ofstream c(dir / "c.yaml");
    c << "racks: 1\nnodes_per_rack: 2\nnode: {gpus: 8}\n";
  }
  const auto json = dir / "r.json", events = dir / "e.jsonl";
  const auto r = testing::run_tessera(
      "simulate --quiet --elastic --workload " + (dir / "w.jsonl").string() + " --cluster " +
      (dir / "c.yaml").string() + " --json " + json.string() + " --events " + events.string());
  ASSERT_EQ(r.status, 0) << r.output;
  std::ifstream in(json);
  const auto report = nlohmann::json::parse(in);
  EXPECT_EQ(report["finished"].get<int>(), 4);
  EXPECT_EQ(report["preemptions"].get<int>(), 0);
  EXPECT_GE(report["resizes"].get<int>(), 3);  // grown, shrunk for p, grown again
  if (testing::auditor_available()) {
    EXPECT_EQ(testing::audit(events.string(), json.string()), 0);
  }
  // The elastic gang never ran below its minimum or above its maximum.
  std::ifstream ev(events);
  std::string line;
  while (std::getline(ev, line)) {
    const auto e = nlohmann::json::parse(line);
    if (e["type"] != "start" || e["job"] != "e") continue;
    EXPECT_GE(e["gpus"].size(), 2u) << line;
    EXPECT_LE(e["gpus"].size(), 8u) << line;
  }
}

}  // namespace
}  // namespace tessera
