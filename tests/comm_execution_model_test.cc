// The communication decorator of the execution model against hand-computed values, on real
// Pollux data (a small slice), and through the CLI.
#include "sim/comm_execution_model.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_util.h"
#include "model/cluster_spec.h"
#include "sim/pollux_profile.h"
#include "sim/trace_readers.h"

namespace tessera {
namespace {

const std::string kData = TESSERA_SHARED_DATA;

// A fixed speed regardless of placement, to isolate the decorator.
class FixedSpeed final : public ExecutionModel {
 public:
  explicit FixedSpeed(double s) : s_(s) {}
  void prepare(JobSpec&, const Workload&, const Cluster&) const override {}
  double speed(const JobSpec&, const Workload&, const PlacementShape&,
               const Cluster&) const override {
    return s_;
  }

 private:
  double s_;
};

// 2 spines x 2 racks x 2 nodes x 8 GPUs; node NIC 12.5 GB/s 5 us, rack uplink 3.125 GB/s
// (4:1) 8 us, spine 1.5625 GB/s 12 us.
Cluster test_cluster() {
  ClusterBuilder b;
  const GpuTypeId v100 = *b.gpu_types().find("V100");
  for (int s = 0; s < 2; ++s) {
    for (int r = 0; r < 2; ++r) {
      for (int n = 0; n < 2; ++n) {
        const std::string rack = "s" + std::to_string(s) + "r" + std::to_string(r);
        b.add_node("s" + std::to_string(s), rack, rack + "n" + std::to_string(n), v100, 8, 64000,
                   512 * 1024);
      }
    }
  }
  b.set_link(Level::kRack, {12.5, 5.0});
  b.set_link(Level::kSpine, {3.125, 8.0});
  b.set_link(Level::kCluster, {1.5625, 12.0});
  return b.build();
}

// `nodes` given by id, `per_node` 1-GPU members on each.
Allocation on_nodes(const Cluster& c, std::initializer_list<NodeId> nodes, int per_node) {
  Allocation a;
  a.gpus_per_member = 1;
  for (NodeId n : nodes) {
    for (int k = 0; k < per_node; ++k) {
      a.member_node.push_back(n);
      a.shares.push_back({c.node(n).first_gpu + static_cast<GpuId>(k), kMilliPerGpu});
    }
  }
  return a;
}

struct Fixture {
  Cluster c = test_cluster();
  Workload w;
  JobSpec job;
  explicit Fixture(const std::string& model) {
    job.name = "j";
    job.min_members = job.max_members = 16;
    job.demand.gpus = 1;
    job.model = w.models.intern(model);
  }
};

TEST(CommExecutionModel, ModelSizeTable) {
  EXPECT_DOUBLE_EQ(model_parameters("bert"), 110e6);
  EXPECT_DOUBLE_EQ(model_parameters("ResNet-50 (batch size 64)"), 25.6e6);
  EXPECT_DOUBLE_EQ(gradient_bytes("imagenet"), 4 * 25.6e6);
  EXPECT_EQ(model_parameters("unknown-model"), 0.0);
  EXPECT_EQ(model_parameters(""), 0.0);
}

TEST(CommExecutionModel, TwoRackPlacementIsSlowerByTheRingOverTheUplink) {
  Fixture f("bert");
  const CommExecutionModel m(std::make_unique<FixedSpeed>(1.0),
                             [](const JobSpec&, const Workload&, const Cluster&) { return 0.5; });
  // Nodes 0 and 2: two racks of spine 0.
  const PlacementShape shape = shape_of(f.c, on_nodes(f.c, {0, 2}, 8));
  ASSERT_EQ(shape.racks, 2u);
  // Ring over 2 nodes of 440 MB: 2(p-1)α + 2(p-1)(n/p)β, uplink minus node NIC.
  const double bytes = 440e6;
  const double uplink = 2 * 8e-6 + 2 * (bytes / 2) / 3.125e9;
  const double nic = 2 * 5e-6 + 2 * (bytes / 2) / 12.5e9;
  const double delta = uplink - nic;
  EXPECT_NEAR(delta, 0.105606, 1e-9);
  EXPECT_NEAR(extra_allreduce_s(f.c, shape, bytes), delta, 1e-12);
  EXPECT_NEAR(m.speed(f.job, f.w, shape, f.c), 0.5 / (0.5 + delta), 1e-12);
}

TEST(CommExecutionModel, CommunicationAddsToTheStepTimeOnASlowerPlacement) {
  Fixture f("bert");
  // The wrapped speed 0.5 doubles the step time: 1.0 s + Δ instead of 0.5 s + Δ.
  const CommExecutionModel m(std::make_unique<FixedSpeed>(0.5),
                             [](const JobSpec&, const Workload&, const Cluster&) { return 0.5; });
  const PlacementShape shape = shape_of(f.c, on_nodes(f.c, {0, 2}, 8));
  const double delta = extra_allreduce_s(f.c, shape, 440e6);
  EXPECT_NEAR(m.speed(f.job, f.w, shape, f.c), 0.5 / (1.0 + delta), 1e-12);
}

TEST(CommExecutionModel, CrossingSpinesUsesTheSpineLink) {
  Fixture f("imagenet");
  const PlacementShape shape = shape_of(f.c, on_nodes(f.c, {0, 4, 6}, 4));
  ASSERT_EQ(shape.spines, 2u);
  const double bytes = 4 * 25.6e6;
  const double spine = 4 * 12e-6 + 4 * (bytes / 3) / 1.5625e9;
  const double nic = 4 * 5e-6 + 4 * (bytes / 3) / 12.5e9;
  EXPECT_NEAR(extra_allreduce_s(f.c, shape, bytes), spine - nic, 1e-12);
}

TEST(CommExecutionModel, InsideOneRackOrNodeIsUnchanged) {
  Fixture f("bert");
  const CommExecutionModel m(std::make_unique<FixedSpeed>(0.8),
                             [](const JobSpec&, const Workload&, const Cluster&) { return 0.5; });
  EXPECT_DOUBLE_EQ(m.speed(f.job, f.w, shape_of(f.c, on_nodes(f.c, {1}, 8)), f.c), 0.8);
  EXPECT_DOUBLE_EQ(m.speed(f.job, f.w, shape_of(f.c, on_nodes(f.c, {0, 1}, 8)), f.c), 0.8);
}

TEST(CommExecutionModel, UnknownSizeOrStepTimeIsUnchanged) {
  Fixture f("some-model");
  const CommExecutionModel m(std::make_unique<FixedSpeed>(0.8),
                             [](const JobSpec&, const Workload&, const Cluster&) { return 0.5; });
  const PlacementShape across = shape_of(f.c, on_nodes(f.c, {0, 2}, 8));
  EXPECT_DOUBLE_EQ(m.speed(f.job, f.w, across, f.c), 0.8);
  Fixture g("bert");
  const CommExecutionModel no_step(
      std::make_unique<FixedSpeed>(0.8),
      [](const JobSpec&, const Workload&, const Cluster&) { return 0.0; });
  EXPECT_DOUBLE_EQ(no_step.speed(g.job, g.w, across, g.c), 0.8);
}

// A job of a model the table does not know gives its own size and step time (JSONL `params`,
// `step_seconds`), and then pays for crossing racks like any other.
TEST(CommExecutionModel, AJobsOwnSizeAndStepTimeWinOverTheTable) {
  Fixture f("some-model");
  f.job.model_params = 110e6;  // as bert: 440 MB of gradients
  f.job.step_seconds = 0.5;
  const CommExecutionModel m(std::make_unique<FixedSpeed>(1.0), nullptr);
  const PlacementShape shape = shape_of(f.c, on_nodes(f.c, {0, 2}, 8));
  const double delta = extra_allreduce_s(f.c, shape, 440e6);
  EXPECT_NEAR(m.speed(f.job, f.w, shape, f.c), 0.5 / (0.5 + delta), 1e-12);
  // The JSONL keys reach the job.
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("tessera-params-" + std::to_string(getpid()) + ".jsonl"))
                               .string();
  std::ofstream(path) << R"({"name":"x","submit":0,"members":2,"work":60,"params":1e8,)"
                      << R"("step_seconds":0.25})"
                      << "\n";
  ReaderOptions ro;
  const Workload w = read_workload(path, TraceFormat::kJsonl, ro);
  ASSERT_EQ(w.jobs.size(), 1u);
  EXPECT_DOUBLE_EQ(w.jobs[0].model_params, 1e8);
  EXPECT_DOUBLE_EQ(w.jobs[0].step_seconds, 0.25);
}

TEST(CommExecutionModel, MeasuredPolluxReferenceStep) {
  const std::string apps = kData + "/philly/pollux/applications";
  if (!std::filesystem::exists(apps + "/bert/placements.csv")) GTEST_SKIP() << "no Pollux data";
  Fixture f("bert");
  f.job.batch_size = 96;
  const auto m = make_comm_execution_model(std::make_unique<FixedSpeed>(1.0), kData);
  const PolluxProfiles profiles = PolluxProfiles::load(apps);
  const PolluxApplication* bert = profiles.find("bert");
  ASSERT_NE(bert, nullptr);
  // Reference: 16 replicas packed on 8-GPU nodes.
  const double t_ref = bert->iteration_time({8, 8}, bert->batch_config(96, 16));
  ASSERT_GT(t_ref, 0);
  const PlacementShape shape = shape_of(f.c, on_nodes(f.c, {0, 2}, 8));
  const double delta = extra_allreduce_s(f.c, shape, 440e6);
  EXPECT_NEAR(m->speed(f.job, f.w, shape, f.c), t_ref / (t_ref + delta), 1e-9);
}

// The CLI: --no-comm-model restores the measured speeds; the default charges the uplink.
TEST(CommExecutionModel, SimulateFlag) {
  if (!std::filesystem::exists(kData + "/philly/pollux/applications/bert/placements.csv")) {
    GTEST_SKIP() << "no Pollux data";
  }
  const auto dir = std::filesystem::temp_directory_path() / "tessera_comm_model_test";
  std::filesystem::create_directories(dir);
  const auto cluster = dir / "cluster.yaml";
  std::ofstream(cluster) << "racks: 2\nnodes_per_rack: 2\n"
                            "node: {gpus: 8, gpu_type: V100, cpu_milli: 64000, mem_mib: 524288}\n"
                            "links: {spine: {bandwidth_gbps: 1.0}}\n";
  const auto trace = dir / "w.jsonl";
  // Spread puts each 16-GPU gang over all four nodes, so it crosses the uplink.
  std::ofstream(trace) << R"({"name": "a", "submit": 0, "members": 16, "model": "bert", )"
                       << R"("batch_size": 96})"
                       << "\n";
  auto mean_jct = [&](const std::string& extra) {
    const auto json = dir / "r.json";
    const auto r = testing::run_tessera(
        "simulate --quiet --workload " + trace.string() + " --cluster " + cluster.string() +
        " --policy fifo+spread --json " + json.string() + " " + extra);
    EXPECT_EQ(r.status, 0) << r.output;
    std::ifstream in(json);
    return nlohmann::json::parse(in)["jct"]["mean"].get<double>();
  };
  const double with = mean_jct("");
  const double without = mean_jct("--no-comm-model");
  EXPECT_GT(with, without * 1.05);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tessera
