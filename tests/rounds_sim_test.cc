// Round-based scheduling in the simulator (SimOptions::round_seconds, Gavel's mechanism): jobs
// start at round boundaries only, the LP's shares decide who runs on which GPU type, jobs are
// suspended and moved between types at boundaries, and every job finishes with no GPU
// over-committed.
#include <gtest/gtest.h>

#include <algorithm>

#include "engine/policy.h"
#include "model/cluster.h"
#include "sim/gavel_rounds.h"
#include "sim/simulator.h"

namespace tessera {
namespace {

// A job runs at its type_speed on the type of its first member (what the test sets).
class TypeSpeed final : public ExecutionModel {
 public:
  void prepare(JobSpec&, const Workload&, const Cluster&) const override {}
  double speed(const JobSpec& j, const Workload&, const PlacementShape& shape,
               const Cluster&) const override {
    return j.type_speed.at(shape.slowest_type);
  }
};

struct ThreeTypes {
  Cluster cluster;
  GpuTypeId v100 = 0, p100 = 0, k80 = 0;
};

// One GPU each of V100, P100 and K80.
ThreeTypes three_types() {
  ClusterBuilder b;
  ThreeTypes s;
  s.v100 = b.gpu_types().intern("V100");
  s.p100 = b.gpu_types().intern("P100");
  s.k80 = b.gpu_types().intern("K80");
  b.add_node("s", "r", "v", s.v100, 1, 64000, 1 << 20);
  b.add_node("s", "r", "p", s.p100, 1, 64000, 1 << 20);
  b.add_node("s", "r", "k", s.k80, 1, 64000, 1 << 20);
  s.cluster = b.build();
  return s;
}

JobSpec job(const ThreeTypes& s, const std::string& name, float v100, float p100, float k80) {
  JobSpec j;
  j.name = name;
  j.work_seconds = 7200;
  j.source = "test";
  j.type_speed.assign(s.cluster.gpu_types().size(), 0.0F);
  j.type_speed[s.v100] = v100;
  j.type_speed[s.p100] = p100;
  j.type_speed[s.k80] = k80;
  return j;
}

SimResult run(const ThreeTypes& s, bool hetero) {
  Workload w;
  w.tenants.intern("t");
  // Speeds relative to a V100 (as Gavel's matrix): a gains most from the V100, b from the
  // P100 (relatively), c runs as fast anywhere (all but c are slow on the K80).
  w.jobs.push_back(job(s, "a", 1.0F, 0.5F, 0.25F));
  w.jobs.push_back(job(s, "b", 1.0F, 0.83F, 0.33F));
  w.jobs.push_back(job(s, "c", 1.0F, 1.0F, 1.0F));
  Policy p = make_policy("las", 1);
  p.preemption = false;
  p.heterogeneity = hetero;
  SimOptions opt;
  opt.round_seconds = 360;
  return simulate(w, s.cluster, p, TypeSpeed(), opt);
}

double mean_finish(const SimResult& r) {
  double sum = 0;
  for (const JobOutcome& o : r.jobs) sum += o.finish;
  return sum / static_cast<double>(r.jobs.size());
}

TEST(Rounds, HeterogeneityAwareSharesPutJobsWhereTheyGainAndFinishSooner) {
  const ThreeTypes s = three_types();
  const SimResult blind = run(s, false);
  const SimResult aware = run(s, true);
  for (const SimResult* r : {&blind, &aware}) {
    ASSERT_EQ(r->jobs.size(), 3u);
    for (const JobOutcome& o : r->jobs) {
      EXPECT_GE(o.first_start, 360);  // jobs start at round boundaries only
      EXPECT_GT(o.finish, o.first_start);
    }
    EXPECT_GT(r->rounds, 0u);
    EXPECT_EQ(r->preemptions,
              r->preemptions_by_cause[static_cast<size_t>(PreemptionCause::kRound)]);
  }
  // Blind: equal time shares of every type, so the jobs rotate; aware: c takes the K80 (it
  // loses nothing there) and a and b share the fast types, so they finish sooner on average.
  EXPECT_GT(blind.preemptions, 0u);
  EXPECT_LT(mean_finish(aware), mean_finish(blind));
  // c, indifferent to the type, is never worse off than under equal shares.
  EXPECT_LE(aware.jobs[2].finish, blind.jobs[2].finish + 360);
}

// Four V100s on two nodes of two, and `k80s` K80s on one node; jobs run twice as fast on a
// V100 as on a K80. Hetero-aware rounds of 360 s, las (placing with spread), no preemption.
struct TwoV100NodesAndK80s {
  Cluster cluster;
  GpuTypeId v100 = 0, k80 = 0;
  Workload w;

  explicit TwoV100NodesAndK80s(uint16_t k80s) {
    ClusterBuilder b;
    v100 = b.gpu_types().intern("V100");
    k80 = b.gpu_types().intern("K80");
    b.add_node("s", "r", "v0", v100, 2, 64000, 1 << 20);
    b.add_node("s", "r", "v1", v100, 2, 64000, 1 << 20);
    b.add_node("s", "r", "k0", k80, k80s, 64000, 1 << 20);
    cluster = b.build();
    w.tenants.intern("t");
  }
  // A single-member job of `gpus` GPUs.
  void add(const std::string& name, double submit, int gpus, double work) {
    JobSpec j;
    j.name = name;
    j.submit_time = submit;
    j.work_seconds = work;
    j.source = "test";
    j.demand.gpus = gpus;
    j.type_speed.assign(cluster.gpu_types().size(), 0.0F);
    j.type_speed[v100] = 1.0F;
    j.type_speed[k80] = 0.5F;
    w.jobs.push_back(j);
  }
  SimResult run() const {
    Policy p = make_policy("las", 1);
    p.preemption = false;
    p.heterogeneity = true;
    SimOptions opt;
    opt.round_seconds = 360;
    return simulate(w, cluster, p, TypeSpeed(), opt);
  }
};

TEST(Rounds, AGangItsPlannedTypeCannotHoldRunsOnAnotherType) {
  // A 4-GPU single-node gang is fastest on V100s, and there are four, but no V100 node holds
  // it: it must run on the K80s rather than wait for a V100 node that will never exist.
  TwoV100NodesAndK80s s(4);
  s.add("gang", 0, 4, 3600);
  const SimResult r = s.run();
  ASSERT_EQ(r.jobs.size(), 1u);
  EXPECT_EQ(r.jobs[0].first_start, 360);  // the first round places it, on the K80s
  EXPECT_NEAR(r.jobs[0].finish, 360 + 7200, 1e-6);
}

TEST(Rounds, AGangThePlannedTypeCannotHoldNowRunsElsewhereAndStays) {
  // y and z (one GPU each) run on the V100s, spread one per node. x, a 2-GPU single-node gang,
  // arrives: the plan gives it the two free V100s, which are on different nodes. It runs on the
  // K80s at once and stays there, rather than waiting for a V100 node or being moved back and
  // forth every round.
  TwoV100NodesAndK80s s(2);
  s.add("y", 0, 1, 20000);
  s.add("z", 0, 1, 20000);
  s.add("x", 400, 2, 3600);
  const SimResult r = s.run();
  ASSERT_EQ(r.jobs.size(), 3u);
  EXPECT_EQ(r.jobs[2].first_start, 720);  // the first round after it arrived
  EXPECT_EQ(r.jobs[2].preemptions, 0);
  EXPECT_NEAR(r.jobs[2].finish, 720 + 7200, 1e-6);  // on the K80s throughout
}

TEST(Rounds, TheLpTakesTheRunningAndTheLeastServedUpToItsCap) {
  const ThreeTypes s = three_types();
  std::vector<JobSpec> specs;
  for (int i = 0; i < 6; ++i) specs.push_back(job(s, "j" + std::to_string(i), 1.0F, 0.5F, 0.25F));
  const std::vector<double> none(s.cluster.gpu_types().size(), 0.0);
  std::vector<GavelCandidate> cands;
  for (JobId i = 0; i < 6; ++i) {
    GavelCandidate g;
    g.id = i;
    g.spec = &specs[i];
    g.rounds_on = none;
    g.attained = 1000.0 * (6 - i);  // j5 has had least, j0 most
    cands.push_back(g);
  }
  cands[0].running_on = s.k80;  // j0 runs (most served)
  GavelPlanner all, capped;
  const std::vector<GpuTypeId> everyone = all.plan(s.cluster, cands, true, 4);
  const std::vector<GpuTypeId> plan = capped.plan(s.cluster, cands, true, 4, 3);
  // Capped at 3: j0 (running) and the two least served, j5 and j4, are planned; three types of
  // one GPU each run them all; the others wait.
  for (size_t k = 0; k < cands.size(); ++k) {
    const bool planned = k == 0 || k == 4 || k == 5;
    EXPECT_EQ(plan[k] != kNoGpuType, planned) << k;
  }
  EXPECT_EQ(capped.lp_solves(), 1u);
  // Uncapped, three of the six run too (three GPUs), by the LP's shares.
  EXPECT_EQ(
      std::count_if(everyone.begin(), everyone.end(), [](GpuTypeId t) { return t != kNoGpuType; }),
      3);
}

}  // namespace
}  // namespace tessera
