// What a preemption costs in the simulator: the checkpoint grace, lost work and the restart
// (the job's restart_cost and the restart model's re-initialisation and checkpoint read,
// sim/restart_model.h), accounted per job as the victim pays them.
#include <gtest/gtest.h>

#include "engine/policy.h"
#include "model/cluster_spec.h"
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

}  // namespace
}  // namespace tessera
