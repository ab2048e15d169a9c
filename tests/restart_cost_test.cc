// What a preemption costs in the simulator: the checkpoint grace, lost work and the restart
// (the job's restart_cost and the restart model's re-initialisation and checkpoint read,
// sim/restart_model.h), accounted per job as the victim pays them.
#include <gtest/gtest.h>

#include <string>

#include "engine/policy.h"
#include "model/cluster_spec.h"
#include "model/queue_tree.h"
#include "sim/simulator.h"
#include "sim_test_util.h"

namespace tessera {
namespace {

// One node of 4 GPUs. A research job of 4 GPUs (1000 s of work, checkpoints on request)
// starts at 0; a production job of 4 GPUs (100 s) arrives at 100 and preempts it; after a 30 s
// grace the production job runs 130..230, and the research job restarts at 230.
struct Preempted {
  SimResult run(const RestartModel& restart, double model_params = 0) {
    Workload w;
    JobSpec a;
    a.name = "research";
    a.tenant = w.tenants.intern("t");
    a.min_members = a.max_members = 1;
    a.demand.gpus = 4;
    a.work_seconds = 1000;
    a.model_params = model_params;
    a.source = "test";
    JobSpec b = a;
    b.name = "production";
    b.priority = PriorityClass::kProduction;
    b.submit_time = 100;
    b.work_seconds = 100;
    w.jobs = {a, b};
    sort_by_submit(w);
    Policy p = make_policy("fifo", 1);
    p.preemption = true;
    SimOptions opt;
    opt.checkpoint_grace = 30;
    opt.restart = restart;
    return simulate(w, cluster, p, model, opt);
  }
  Cluster cluster = make_uniform_cluster(1, 1, 1, 4);
  testing::UnitSpeed model;
};

TEST(RestartCost, WithoutTheModelAPreemptionCostsItsGraceOnly) {
  Preempted p;
  const SimResult r = p.run(RestartModel{});
  ASSERT_EQ(r.jobs[0].preemptions, 1);
  EXPECT_DOUBLE_EQ(r.jobs[0].finish, 230 + 900);
  EXPECT_DOUBLE_EQ(r.jobs[0].grace_gpu_seconds, 4 * 30);
  EXPECT_DOUBLE_EQ(r.jobs[0].restart_gpu_seconds, 0);
  EXPECT_DOUBLE_EQ(r.jobs[0].lost_gpu_seconds, 0);
}

TEST(RestartCost, ARestartReinitialisesAndReadsItsCheckpointBack) {
  Preempted p;
  RestartModel m;
  m.overhead_seconds = 600;
  const SimResult r = p.run(m);
  // 600 s without progress after the restart: the job ends 600 s later, its GPUs held meanwhile.
  EXPECT_DOUBLE_EQ(r.jobs[0].finish, 230 + 600 + 900);
  EXPECT_DOUBLE_EQ(r.jobs[0].restart_gpu_seconds, 4 * 600);
  EXPECT_DOUBLE_EQ(r.jobs[0].gpu_seconds, 4 * (100 + 30 + 600 + 900));
  // The job that preempted and never was preempted pays nothing.
  EXPECT_DOUBLE_EQ(r.jobs[1].restart_gpu_seconds, 0);

  // A 1e9-parameter model: 14 GB read at 1 GB/s from the one node it restarts on.
  m.overhead_seconds = 60;
  const SimResult big = p.run(m, 1e9);
  EXPECT_NEAR(big.jobs[0].finish, 230 + 60 + 14 + 900, 1e-6);
  EXPECT_NEAR(big.jobs[0].restart_gpu_seconds, 4 * 74, 1e-6);
  // Twice the bandwidth, half the read.
  m.restore_gbps_per_node = 2;
  EXPECT_NEAR(p.run(m, 1e9).jobs[0].finish, 230 + 60 + 7 + 900, 1e-6);
}

TEST(RestartCost, AModelSizeIsReadFromTheCheckpointDefaultWhereTheTraceGivesNone) {
  RestartModel m;
  JobSpec unknown;
  m.default_checkpoint_gb = 20;
  m.restore_gbps_per_node = 2;
  EXPECT_DOUBLE_EQ(m.seconds(unknown, 1), 10);
  EXPECT_DOUBLE_EQ(m.seconds(unknown, 4), 2.5);  // every node reads its share
  JobSpec known;
  known.model_params = 7e9;
  EXPECT_DOUBLE_EQ(m.checkpoint_gb(known), 98);           // 7e9 x 14 bytes
  EXPECT_DOUBLE_EQ(RestartModel{}.seconds(known, 1), 0);  // off: nothing
}

// Reclaim weighed against its price (preemption.reclaim_cost_ratio) in a replay: tenant a
// borrows all 4 GPUs with 1-GPU jobs that end at 1000 s; tenant b asks for 2 at `arrival`.
// With a 600 s restart, taking back its share costs 630 GPU-s per victim: worth it when b
// would otherwise wait 900 s for 2 GPUs, not when it would wait 100 s.
struct Borrowed {
  SimResult run(double arrival, double ratio) {
    Workload w;
    const TenantId a = w.tenants.intern("a");
    const TenantId b = w.tenants.intern("b");
    for (int i = 0; i < 6; ++i) {
      JobSpec j;
      j.name = (i < 4 ? "a" : "b") + std::to_string(i);
      j.tenant = i < 4 ? a : b;
      j.min_members = j.max_members = 1;
      j.demand.gpus = 1;
      j.submit_time = i < 4 ? 0 : arrival;
      j.work_seconds = i < 4 ? 1000 : 100;
      j.duration_estimate = j.work_seconds;
      j.source = "test";
      w.jobs.push_back(j);
    }
    sort_by_submit(w);
    QueueTree t = QueueTree::flat(w.tenants);
    t.settings().reclaim_cost_ratio = ratio;
    SimOptions opt;
    opt.checkpoint_grace = 30;
    opt.restart.overhead_seconds = 600;
    opt.queues = &t;
    for (JobId j = 0; j < w.jobs.size(); ++j) opt.explain.push_back(j);
    return simulate(w, cluster, make_policy("fair", 1), model, opt);
  }
  Cluster cluster = make_uniform_cluster(1, 1, 1, 4);
  testing::UnitSpeed model;
};

std::string history(const SimResult& r, JobId j) {
  std::string out;
  for (const HistoryEntry& e : r.histories[j].entries) out += e.what + "\n";
  return out;
}

TEST(ReclaimCostReplay, ReclaimsOnlyWhereWaitingCostsMoreThanTheRestart) {
  Borrowed b;
  // Cost-blind: b takes its 2 GPUs back at once, either way.
  EXPECT_EQ(b.run(900, 0).preemptions, 2u);
  EXPECT_EQ(b.run(100, 0).preemptions, 2u);
  // Weighed: at 900 s b waits the 100 s for a's jobs to end; nobody is stopped.
  const SimResult late = b.run(900, 1);
  EXPECT_EQ(late.preemptions, 0u);
  EXPECT_DOUBLE_EQ(late.jobs[4].first_start, 1000);
  EXPECT_NE(history(late, 4).find("not reclaiming"), std::string::npos) << history(late, 4);
  // At 100 s waiting would cost 2 x 900 GPU-s: reclaim, and the victims' history says its price.
  const SimResult early = b.run(100, 1);
  ASSERT_EQ(early.preemptions, 2u);
  EXPECT_DOUBLE_EQ(early.jobs[4].first_start, 130);  // after the victims' checkpoint grace
  bool priced = false;
  for (JobId v = 0; v < 4; ++v) {
    priced |= history(early, v).find("reclaim costs 10 GPU-minutes") != std::string::npos;
  }
  EXPECT_TRUE(priced);
}

}  // namespace
}  // namespace tessera
