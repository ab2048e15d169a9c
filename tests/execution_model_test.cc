#include "sim/execution_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "model/input_error.h"
#include "sim/gavel_throughput.h"
#include "sim/pollux_profile.h"

namespace tessera {
namespace {

const std::string kData = TESSERA_SHARED_DATA;
const std::string kApps = kData + "/philly/pollux/applications";
const std::string kGavel = kData + "/philly/gavel/simulation_throughputs.json";
const char* const kPolluxApps[] = {"bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3"};

bool have_pollux() {
  for (const char* app : kPolluxApps) {
    if (!std::filesystem::exists(kApps + "/" + app + "/placements.csv")) return false;
  }
  return true;
}

// `nodes` nodes of `gpus` GPUs of one type, 4 nodes per rack, one spine.
Cluster uniform_cluster(int nodes, int gpus, const std::string& type = "V100") {
  ClusterBuilder b;
  const GpuTypeId t = b.gpu_types().intern(type);
  for (int i = 0; i < nodes; ++i) {
    b.add_node("spine0", "rack" + std::to_string(i / 4), "node" + std::to_string(i), t,
               static_cast<uint16_t>(gpus), 64000, 512 * 1024);
  }
  return b.build();
}

JobSpec job_of(Workload& w, const std::string& model, int members, int batch = 0) {
  JobSpec j;
  j.name = model + "-job";
  j.model = w.models.intern(model);
  j.min_members = j.max_members = members;
  j.batch_size = batch;
  j.source = "test.csv:7";
  return j;
}

PlacementShape shape(std::vector<uint16_t> members_per_node, GpuTypeId type = 0) {
  PlacementShape s;
  s.members_per_node = std::move(members_per_node);
  s.nodes = static_cast<uint32_t>(s.members_per_node.size());
  s.racks = s.spines = 1;
  s.slowest_type = type;
  return s;
}

TEST(ExecutionModelShape, HandMadeAllocation) {
  ClusterBuilder b;
  const GpuTypeId v100 = b.gpu_types().intern("V100");
  const GpuTypeId k80 = b.gpu_types().intern("K80");
  b.add_node("s0", "r0", "a", v100, 4, 1000, 1000);
  b.add_node("s0", "r1", "b", k80, 4, 1000, 1000);
  b.add_node("s1", "r0", "c", v100, 4, 1000, 1000);
  const Cluster c = b.build();
  // Nodes are ordered by spine then rack: a=0, b=1, c=2.
  Allocation a;
  a.gpus_per_member = 1;
  a.member_node = {2, 0, 2, 1, 2};
  a.shares = {{8, 500}, {0, 1000}, {9, 500}, {4, 1000}, {10, 500}};
  const PlacementShape s = shape_of(c, a);
  EXPECT_EQ(s.members_per_node, (std::vector<uint16_t>{3, 1, 1}));
  EXPECT_EQ(s.members(), 5);
  EXPECT_EQ(s.gpus_per_member, 1);
  EXPECT_EQ(s.nodes, 3u);
  EXPECT_EQ(s.racks, 3u);
  EXPECT_EQ(s.spines, 2u);
  EXPECT_EQ(s.slowest_type, k80);
  EXPECT_EQ(s.gpu_milli, 500);

  Allocation one;
  one.gpus_per_member = 2;
  one.member_node = {0};
  one.shares = {{0, 1000}, {1, 1000}};
  const PlacementShape t = shape_of(c, one);
  EXPECT_EQ(t.members_per_node, (std::vector<uint16_t>{1}));
  EXPECT_EQ(t.gpus_per_member, 2);
  EXPECT_EQ(t.nodes, 1u);
  EXPECT_EQ(t.racks, 1u);
  EXPECT_EQ(t.spines, 1u);
  EXPECT_EQ(t.slowest_type, v100);
  EXPECT_EQ(t.gpu_milli, 1000);
}

TEST(ExecutionModelGeneric, UnknownModelUsesRelativeSpeedTable) {
  auto m = make_measured_execution_model(kData);
  ClusterBuilder b;
  const GpuTypeId v100 = b.gpu_types().intern("V100");
  const GpuTypeId k80 = b.gpu_types().intern("K80");
  const GpuTypeId h100 = b.gpu_types().intern("H100");
  b.add_node("s", "r", "n", v100, 8, 1000, 1000);
  const Cluster c = b.build();
  Workload w;
  JobSpec j = job_of(w, "some-unmeasured-model", 1);
  j.work_seconds = 100;
  EXPECT_NO_THROW(m->prepare(j, w, c));
  EXPECT_DOUBLE_EQ(j.work_seconds, 100);
  EXPECT_DOUBLE_EQ(m->speed(j, w, shape({1}, v100), c), 1.0);
  EXPECT_DOUBLE_EQ(m->speed(j, w, shape({1}, k80), c), c.gpu_types().at(k80).relative_speed);
  EXPECT_DOUBLE_EQ(m->speed(j, w, shape({1}, h100), c), c.gpu_types().at(h100).relative_speed);
  // A fractional share does not change the speed (observed Alibaba durations).
  PlacementShape frac = shape({1}, v100);
  frac.gpu_milli = 250;
  EXPECT_DOUBLE_EQ(m->speed(j, w, frac, c), 1.0);
  // A job with no model at all is generic too.
  JobSpec none;
  none.work_seconds = 5;
  EXPECT_DOUBLE_EQ(m->speed(none, w, shape({1}, k80), c), c.gpu_types().at(k80).relative_speed);
}

TEST(ExecutionModelPrepare, ThrowsNamingSourceWithoutWorkOrProfile) {
  // Also holds with no data at all: the job has neither a duration nor a Pollux profile.
  for (const std::string& dir : {kData, std::string("/nonexistent-tessera-data")}) {
    auto m = make_measured_execution_model(dir);
    const Cluster c = uniform_cluster(2, 4);
    Workload w;
    JobSpec j = job_of(w, "mystery-model", 1);
    j.source = "jobs.csv:42";
    try {
      m->prepare(j, w, c);
      FAIL() << "expected InputError";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("jobs.csv:42"), std::string::npos) << e.what();
    }
  }
  // Without Pollux data a Pollux application is no longer modelled either.
  auto bare = make_measured_execution_model("/nonexistent-tessera-data");
  Workload w;
  JobSpec j = job_of(w, "cifar10", 4, 512);
  EXPECT_THROW(bare->prepare(j, w, uniform_cluster(2, 4)), InputError);
}

TEST(PolluxProfile, CanonicalPlacementIsSmallestRotation) {
  EXPECT_EQ(canonical_placement({4, 2}), (std::vector<int>{2, 4}));
  EXPECT_EQ(canonical_placement({3, 2, 1}), (std::vector<int>{1, 3, 2}));
  EXPECT_EQ(canonical_placement({2, 0, 1, 1}), (std::vector<int>{1, 1, 2}));
}

TEST(PolluxProfile, SpreadSlowerThanConsolidatedAndReferenceIsOne) {
  if (!have_pollux()) GTEST_SKIP() << "no Pollux profiles under " << kApps;
  auto m = make_measured_execution_model(kData);
  for (int gpus : {4, 8}) {
    const Cluster c = uniform_cluster(16, gpus);
    for (const char* app : kPolluxApps) {
      for (int replicas : {2, 4, 8, 16}) {
        Workload w;
        JobSpec j = job_of(w, app, replicas);
        m->prepare(j, w, c);
        std::vector<uint16_t> packed;
        for (int left = replicas; left > 0; left -= gpus) {
          packed.push_back(static_cast<uint16_t>(std::min(left, gpus)));
        }
        const std::string what =
            std::string(app) + " x" + std::to_string(replicas) + " on " + std::to_string(gpus);
        EXPECT_NEAR(m->speed(j, w, shape(packed), c), 1.0, 1e-12) << what;
        // Leaving one node is always slower. (Between multi-node placements Pollux's
        // measurements are not monotone: on its testbed "44" is slower than eight nodes with
        // one replica each, as four replicas share one NIC; docs/execution-model.md.)
        if (packed.size() == 1) {
          const std::vector<uint16_t> spread(static_cast<size_t>(replicas), 1);
          EXPECT_LT(m->speed(j, w, shape(spread), c), 1.0) << what;
          std::vector<uint16_t> halves = {static_cast<uint16_t>(replicas / 2),
                                          static_cast<uint16_t>(replicas / 2)};
          EXPECT_LT(m->speed(j, w, shape(halves), c), 1.0) << what;
        }
      }
    }
  }
}

TEST(PolluxProfile, SlowerGpuTypeScalesSpeed) {
  if (!have_pollux()) GTEST_SKIP() << "no Pollux profiles under " << kApps;
  auto m = make_measured_execution_model(kData);
  const Cluster c = uniform_cluster(4, 4);
  Workload w;
  JobSpec j = job_of(w, "cifar10", 4, 512);
  m->prepare(j, w, c);
  const GpuTypeId k80 = *c.gpu_types().find("K80");
  EXPECT_NEAR(m->speed(j, w, shape({4}, k80), c), c.gpu_types().at(k80).relative_speed, 1e-12);
}

TEST(PolluxProfile, WorkPositiveAndFiniteForEveryWorkloadRow) {
  if (!have_pollux()) GTEST_SKIP() << "no Pollux profiles under " << kApps;
  auto m = make_measured_execution_model(kData);
  const Cluster c = uniform_cluster(16, 4);
  int checked = 0;
  for (int n = 1; n <= 8; ++n) {
    const std::string path =
        kData + "/philly/pollux/workloads/workload-" + std::to_string(n) + ".csv";
    std::ifstream in(path);
    if (!in) GTEST_SKIP() << "missing " << path;
    std::string line;
    std::getline(in, line);  // header: name,time,application,num_replicas,batch_size
    Workload w;
    int lineno = 1;
    while (std::getline(in, line)) {
      ++lineno;
      std::stringstream ss(line);
      std::string name, time, app, replicas, batch;
      std::getline(ss, name, ',');
      std::getline(ss, time, ',');
      std::getline(ss, app, ',');
      std::getline(ss, replicas, ',');
      std::getline(ss, batch, ',');
      JobSpec j = job_of(w, app, std::stoi(replicas), std::stoi(batch));
      j.source = path + ":" + std::to_string(lineno);
      m->prepare(j, w, c);
      EXPECT_GT(j.work_seconds, 0) << j.source;
      EXPECT_TRUE(std::isfinite(j.work_seconds)) << j.source;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 8 * 160);
}

TEST(PolluxProfile, InterpolationMatchesMeasuredRows) {
  if (!have_pollux()) GTEST_SKIP() << "no Pollux profiles under " << kApps;
  const auto apps = PolluxProfiles::load(kApps);
  for (const char* name : kPolluxApps) {
    const PolluxApplication* app = apps.find(name);
    ASSERT_NE(app, nullptr) << name;
    std::ifstream in(kApps + "/" + name + "/placements.csv");
    std::string line;
    std::getline(in, line);
    int rows = 0;
    while (std::getline(in, line)) {
      std::stringstream ss(line);
      std::string p, bsz, step, sync;
      std::getline(ss, p, ',');
      std::getline(ss, bsz, ',');
      std::getline(ss, step, ',');
      std::getline(ss, sync, ',');
      std::vector<int> placement;
      for (char ch : p) placement.push_back(ch - '0');
      ASSERT_TRUE(app->measured(placement)) << name << " " << p;
      const PolluxStepTime t = app->throughput(placement, std::stod(bsz));
      EXPECT_DOUBLE_EQ(t.step_time, std::stod(step)) << name << " " << p << " " << bsz;
      EXPECT_DOUBLE_EQ(t.sync_time, std::stod(sync)) << name << " " << p << " " << bsz;
      ++rows;
    }
    EXPECT_GT(rows, 100) << name;
    // A ring across two nodes is slower than one inside a node.
    const PolluxStepTime lo = app->throughput({4}, app->min_local_bsz());
    const PolluxStepTime hi = app->throughput({4, 4}, app->min_local_bsz());
    EXPECT_LT(lo.step_time, hi.step_time) << name;
    // Placement "4" is the only one-node four-replica placement, so the group interpolation
    // reproduces it, and one node with eight replicas (an 8-GPU node) uses that row.
    for (double b :
         {1.0 * app->min_local_bsz(), 0.5 * (app->min_local_bsz() + app->max_local_bsz())}) {
      const PolluxStepTime row = app->throughput({4}, b);
      const PolluxStepTime group = app->interpolate(1, 4, b);
      EXPECT_DOUBLE_EQ(row.step_time, group.step_time) << name;
      const PolluxStepTime eight = app->throughput({8}, b);
      EXPECT_DOUBLE_EQ(row.step_time, eight.step_time) << name;
      EXPECT_DOUBLE_EQ(row.sync_time, eight.sync_time) << name;
    }
    // Beyond 16 nodes the node count clamps at 16 (Pollux does the same).
    const PolluxStepTime n16 = app->interpolate(16, 64, app->min_local_bsz());
    const PolluxStepTime n20 = app->interpolate(20, 64, app->min_local_bsz());
    EXPECT_DOUBLE_EQ(n16.step_time, n20.step_time) << name;
  }
}

TEST(PolluxProfile, InterpolatesLinearlyBetweenMeasuredBatches) {
  if (!have_pollux()) GTEST_SKIP() << "no Pollux profiles under " << kApps;
  const auto apps = PolluxProfiles::load(kApps);
  const PolluxApplication* cifar = apps.find("cifar10");
  ASSERT_NE(cifar, nullptr);
  // placements.csv measures "1" at local batch 32 and 45.
  const PolluxStepTime a = cifar->throughput({1}, 32);
  const PolluxStepTime b = cifar->throughput({1}, 45);
  const PolluxStepTime mid = cifar->throughput({1}, 38.5);
  EXPECT_NEAR(mid.step_time, 0.5 * (a.step_time + b.step_time), 1e-12);
  EXPECT_NEAR(mid.sync_time, 0.5 * (a.sync_time + b.sync_time), 1e-12);
  // Clamped outside the measured range.
  EXPECT_DOUBLE_EQ(cifar->throughput({1}, 1).step_time, a.step_time);
}

TEST(PolluxProfile, BatchConfigFollowsPollux) {
  if (!have_pollux()) GTEST_SKIP() << "no Pollux profiles under " << kApps;
  const auto apps = PolluxProfiles::load(kApps);
  const PolluxApplication* yolo = apps.find("yolov3");
  ASSERT_NE(yolo, nullptr);
  EXPECT_EQ(yolo->max_local_bsz(), 8);
  EXPECT_EQ(yolo->init_batch_size(), 8);
  const PolluxBatchConfig c = yolo->batch_config(64, 4);  // local 16 over max_local 8
  EXPECT_EQ(c.accum_steps, 1);
  EXPECT_EQ(c.atomic_bsz, 8);
  EXPECT_EQ(c.effective_batch(), 64);
  const PolluxApplication* ncf = apps.find("ncf");
  ASSERT_NE(ncf, nullptr);
  // 32768 fits one replica (max_local_bsz 32768), but a single replica above the initial
  // batch accumulates at least once: 2 x 16384.
  const PolluxBatchConfig n = ncf->batch_config(32768, 1);
  EXPECT_EQ(n.accum_steps, 1);
  EXPECT_EQ(n.atomic_bsz, 16384);
  EXPECT_EQ(n.effective_batch(), ncf->max_batch_size());
  const PolluxApplication* cifar = apps.find("cifar10");
  ASSERT_NE(cifar, nullptr);
  // A single replica above the initial batch always accumulates at least once.
  EXPECT_EQ(cifar->batch_config(256, 1).accum_steps, 1);
  EXPECT_EQ(cifar->batch_config(128, 1).accum_steps, 0);
}

TEST(GavelThroughput, ParsesKeysAndIgnoresZeros) {
  const std::string json = R"json({
    "v100": {"('M (batch size 8)', 1)": {"null": 10.0},
             "('M (batch size 8)', 2)": {"null": 18.0, "('X', 1)": [1, 2]},
             "('M (batch size 8)', 4)": {"null": 30.0}},
    "v100_unconsolidated": {"('M (batch size 8)', 2)": {"null": 20.0},
                            "('M (batch size 8)', 4)": {"null": 15.0}},
    "k80": {"('M (batch size 8)', 1)": {"null": 2.5}, "('M (batch size 8)', 2)": {"null": 0}}
  })json";
  const auto g = GavelThroughputs::parse(json, "inline.json");
  EXPECT_TRUE(g.has_model("M (batch size 8)"));
  EXPECT_FALSE(g.has_model("M"));
  EXPECT_EQ(g.throughput("v100", "M (batch size 8)", 2), 18.0);
  EXPECT_FALSE(g.throughput("k80", "M (batch size 8)", 2).has_value());
  const GpuTypeTable types = GpuTypeTable::builtin();
  const GpuType& k80 = types.at(*types.find("K80"));
  const GpuType& v100 = types.at(*types.find("V100"));
  EXPECT_DOUBLE_EQ(g.type_factor("M (batch size 8)", k80), 0.25);
  // Spread faster than packed at 2 GPUs is capped at 1; at 4 (and 6: nearest measured <= 6)
  // it is the measured 0.5; K80 has no spread data and falls back to V100's.
  EXPECT_DOUBLE_EQ(g.spread_factor("M (batch size 8)", 2, v100), 1.0);
  EXPECT_DOUBLE_EQ(g.spread_factor("M (batch size 8)", 4, v100), 0.5);
  EXPECT_DOUBLE_EQ(g.spread_factor("M (batch size 8)", 6, v100), 0.5);
  EXPECT_DOUBLE_EQ(g.spread_factor("M (batch size 8)", 4, k80), 0.5);
  EXPECT_THROW(GavelThroughputs::parse("{\"v100\": {\"bad key\": {\"null\": 1}}}", "x.json"),
               InputError);
  EXPECT_THROW(GavelThroughputs::parse("not json", "x.json"), InputError);
}

TEST(GavelThroughput, K80SlowerThanV100ForResNet50) {
  if (!std::filesystem::exists(kGavel)) GTEST_SKIP() << "missing " << kGavel;
  const auto g = GavelThroughputs::load(kGavel);
  const std::string model = "ResNet-50 (batch size 64)";
  ASSERT_TRUE(g.has_model(model));
  const GpuTypeTable types = GpuTypeTable::builtin();
  const GpuType& k80 = types.at(*types.find("K80"));
  const GpuType& p100 = types.at(*types.find("P100"));
  const GpuType& v100 = types.at(*types.find("V100"));
  EXPECT_LT(g.type_factor(model, k80), g.type_factor(model, p100));
  EXPECT_LT(g.type_factor(model, p100), 1.0);
  EXPECT_DOUBLE_EQ(g.type_factor(model, v100), 1.0);
  // A type Gavel did not measure uses the relative-speed table.
  const GpuType& a100 = types.at(*types.find("A100-40G"));
  EXPECT_DOUBLE_EQ(g.type_factor(model, a100), a100.relative_speed);

  // Through the composite model: dispatch by the job's model name.
  auto m = make_measured_execution_model(kData);
  ClusterBuilder b;
  const GpuTypeId tk80 = b.gpu_types().intern("K80");
  const GpuTypeId tv100 = b.gpu_types().intern("V100");
  b.add_node("s", "r", "n0", tk80, 4, 1000, 1000);
  b.add_node("s", "r", "n1", tv100, 4, 1000, 1000);
  const Cluster c = b.build();
  Workload w;
  JobSpec j = job_of(w, model, 1);
  j.work_seconds = 3600;
  m->prepare(j, w, c);
  EXPECT_LT(m->speed(j, w, shape({1}, tk80), c), m->speed(j, w, shape({1}, tv100), c));
  EXPECT_DOUBLE_EQ(m->speed(j, w, shape({1}, tv100), c), 1.0);
}

TEST(GavelThroughput, SpreadFactorAtMostOne) {
  if (!std::filesystem::exists(kGavel)) GTEST_SKIP() << "missing " << kGavel;
  const auto g = GavelThroughputs::load(kGavel);
  const GpuTypeTable types = GpuTypeTable::builtin();
  int below_one = 0;
  for (const char* model : {"ResNet-18 (batch size 64)", "ResNet-50 (batch size 64)",
                            "Transformer (batch size 64)", "LM (batch size 20)", "A3C"}) {
    for (const char* type : {"K80", "P100", "V100", "A100-80G"}) {
      for (int gpus : {2, 3, 4, 8, 16}) {
        const double f = g.spread_factor(model, gpus, types.at(*types.find(type)));
        EXPECT_GT(f, 0) << model << " " << type << " " << gpus;
        EXPECT_LE(f, 1.0) << model << " " << type << " " << gpus;
        if (f < 1.0) ++below_one;
      }
    }
  }
  EXPECT_GT(below_one, 0);
  // Spread ResNet-18 on V100s is much slower than packed in Gavel's measurements.
  auto m = make_measured_execution_model(kData);
  const Cluster c = uniform_cluster(4, 4);
  Workload w;
  JobSpec j = job_of(w, "ResNet-18 (batch size 64)", 4);
  j.work_seconds = 100;
  EXPECT_DOUBLE_EQ(m->speed(j, w, shape({4}), c), 1.0);
  EXPECT_LT(m->speed(j, w, shape({1, 1, 1, 1}), c), 0.5);
}

}  // namespace
}  // namespace tessera
