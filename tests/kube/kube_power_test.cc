// The engine's power policies in tessera kube (docs/kubernetes.md, "Power and energy"), end to
// end against the API-server emulator: a power cap holding or shifting gangs, power limits on
// Bindings and patched onto running pods, per-node thermal headroom from a node annotation,
// and the power flags' validation. The emulator's pods and binding log judge; the numbers come
// from the same power model the scheduler loads (V100: a type with Zeus measurements).
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <map>
#include <set>

#include "control/kube/power.h"
#include "insight/zeus_curves.h"
#include "kube/kube_env.h"

namespace tessera::kube {
namespace {

using nlohmann::json;

constexpr const char* kV100 = "Tesla-V100-SXM2-16GB";

class KubePowerTest : public testing::KubeEnvOnBoth {
 protected:
  void SetUp() override {
    KubeEnv::SetUp();
    model_ = std::make_shared<const PowerModel>(load_power_model(TESSERA_SHARED_DATA));
    if (!model_->measured()) GTEST_SKIP() << "no Zeus data in " << TESSERA_SHARED_DATA;
  }

  // Nodes of 8 V100s.
  void start_v100_emulator(int nodes) {
    kube_emulator::Options o = emulator_options(nodes);
    o.nodes[0].product = kV100;
    start_cluster(o);
  }

  // What the engine counts for a gang of `gpus` V100s at `limit_w` (0: TDP) above idle.
  double gang_increment(int gpus, double limit_w) const {
    const GpuPowerSpec& s = model_->spec("V100");
    const double limit = limit_w > 0 ? limit_w : s.tdp_w;
    return gpus * std::max(0.0, model_->curve("V100", "").power(limit) - s.idle_w);
  }
  double lowest_limit() const {
    return std::max(model_->spec("V100").min_limit_w, model_->curve("V100", "").min_limit());
  }
  double tdp() const { return model_->spec("V100").tdp_w; }

  SchedulerOptions power_options(const std::string& cap, bool shifting, double node_power) {
    SchedulerOptions opt = scheduler_options();
    opt.power.model = model_;
    opt.power.cap = cap;
    opt.power.shifting = shifting;
    opt.power.node_power_w = node_power;
    return opt;
  }

  // A cap (kW, as the flag takes it) over 2 nodes of 8 V100s with `node_power` W each that fits
  // one 8-GPU gang at TDP but not two, and two only if both run below TDP:
  //   idle + 1.5 x gang(lowest) + 0.5 x gang(TDP).
  std::string cap_kw(double node_power) const {
    const double idle = 2 * (node_power + 8 * model_->spec("V100").idle_w);
    const double at_tdp = gang_increment(8, 0), at_lowest = gang_increment(8, lowest_limit());
    const double cap = idle + 1.5 * at_lowest + 0.5 * at_tdp;
    // The premises: one at TDP fits, two at TDP do not, two at the lowest do, and one at TDP
    // with one at the lowest does not (so both must be lowered).
    EXPECT_LE(idle + at_tdp, cap);
    EXPECT_GT(idle + 2 * at_tdp, cap);
    EXPECT_LE(idle + 2 * at_lowest, cap);
    EXPECT_GT(idle + at_tdp + at_lowest, cap);
    return std::to_string(cap / 1000);
  }

  // A gang of 2 pods x 4 GPUs.
  void create_gang(const std::string& name) {
    create_group("team-a", name, 2);
    for (int i = 0; i < 2; ++i) create_pod("team-a", name + "-" + std::to_string(i), 4, name);
  }
  json pod(const std::string& name) {
    return api("GET", "/api/v1/namespaces/team-a/pods/" + name).json_body();
  }
  bool bound(const std::string& name) { return !pod(name)["spec"].value("nodeName", "").empty(); }
  // The pod's tessera.io/power-limit-watts, or -1 without one.
  double limit_of(const std::string& name) {
    const json p = pod(name);
    const json& a = p["metadata"].value("annotations", json::object());
    if (!a.contains(kPowerLimitAnnotation)) return -1;
    return std::stod(a[kPowerLimitAnnotation].get<std::string>());
  }
  // The PodScheduled=False message, or "".
  std::string unschedulable(const std::string& name) {
    for (const json& c : pod(name)["status"].value("conditions", json::array())) {
      if (c.value("type", "") == "PodScheduled" && c.value("status", "") == "False") {
        EXPECT_EQ(c.value("reason", ""), "Unschedulable");
        return c.value("message", "");
      }
    }
    return "";
  }
  // Events of `reason` about pods whose name starts with `prefix`.
  int events(const std::string& reason, const std::string& prefix) {
    int n = 0;
    const json list = api("GET", "/apis/events.k8s.io/v1/namespaces/team-a/events").json_body();
    for (const json& e : list.value("items", json::array())) {
      if (e.value("reason", "") == reason &&
          e["regarding"].value("name", "").rfind(prefix, 0) == 0) {
        ++n;
      }
    }
    return n;
  }
  void annotate_node(const std::string& node, const json& value) {
    const auto r =
        api("PATCH", "/api/v1/nodes/" + node,
            json{{"metadata", {{"annotations", {{kThermalHeadroomAnnotation, value}}}}}}.dump(),
            "application/merge-patch+json");
    ASSERT_EQ(r.status, 200) << r.body;
  }

  std::shared_ptr<const PowerModel> model_;
};

TEST_P(KubePowerTest, HoldModeASecondGangWaitsForPowerAndSaysSo) {
  start_v100_emulator(2);
  create_namespace("team-a");
  start_scheduler(power_options(cap_kw(200), /*shifting=*/false, 200));
  create_gang("first");
  ASSERT_TRUE(wait_for([&] { return bound("first-0") && bound("first-1"); }, 20));
  create_gang("second");
  std::string message;
  ASSERT_TRUE(wait_for(
      [&] {
        message = unschedulable("second-0");
        return !message.empty();
      },
      20));
  EXPECT_NE(message.find("gang team-a/second"), std::string::npos) << message;
  EXPECT_NE(message.find("power cap"), std::string::npos) << message;
  EXPECT_TRUE(wait_for([&] { return events("FailedScheduling", "second-") >= 2; }, 20));
  // It stays waiting (8 GPUs are free: only power holds it), and the first runs at its
  // default limit (hold mode changes no running gang's limit).
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_FALSE(bound("second-0"));
  EXPECT_FALSE(bound("second-1"));
  EXPECT_EQ(limit_of("first-0"), -1);
  EXPECT_EQ(limit_of("first-1"), -1);
  bool said = false;
  for (const JobView& v : sched_->jobs(JobFilter{})) {
    if (v.row.spec.name != "team-a/second") continue;
    EXPECT_EQ(v.reason_code, "PowerCap");
    said = true;
  }
  EXPECT_TRUE(said);
  // tessera_power_watts: both nodes' base power and GPUs, one gang running.
  EXPECT_GT(sched_->metrics().power_watts, 2 * (200 + 8 * model_->spec("V100").idle_w));
  EXPECT_TRUE(sched_->metrics().energy);
}

TEST_P(KubePowerTest, ShiftModeLowersBothGangsLimitsOnBindingsAndByPatch) {
  start_v100_emulator(2);
  create_namespace("team-a");
  start_scheduler(power_options(cap_kw(200), /*shifting=*/true, 200));
  create_gang("first");
  ASSERT_TRUE(wait_for([&] { return bound("first-0") && bound("first-1"); }, 20));
  // Alone it runs at its default: nothing written.
  EXPECT_EQ(limit_of("first-0"), -1);
  create_gang("second");
  ASSERT_TRUE(wait_for([&] { return bound("second-0") && bound("second-1"); }, 20))
      << unschedulable("second-0");
  // The second gang's limit came on its Binding (the API server copies it onto the pod)...
  for (const auto& b : cluster_->bindings()) {
    if (b.name.rfind("second-", 0) != 0) continue;
    ASSERT_TRUE(b.annotations.contains(kPowerLimitAnnotation)) << b.annotations.dump();
    ASSERT_TRUE(b.annotations.contains(kGpuIndexAnnotation)) << b.annotations.dump();
  }
  // ... and the first gang's was lowered by a PATCH of its running pods (its Bindings had none),
  // each with a PowerLimit event. Both below TDP, at or above the lowest limit.
  ASSERT_TRUE(wait_for([&] { return limit_of("first-0") > 0 && limit_of("first-1") > 0; }, 20));
  for (const std::string name : {"first-0", "first-1", "second-0", "second-1"}) {
    const double w = limit_of(name);
    EXPECT_GT(w, 0) << name;
    EXPECT_LT(w, tdp()) << name;
    EXPECT_GE(w, std::floor(lowest_limit())) << name;
  }
  for (const auto& b : cluster_->bindings()) {
    if (b.name.rfind("first-", 0) == 0) {
      EXPECT_FALSE(b.annotations.contains(kPowerLimitAnnotation)) << b.annotations.dump();
    }
  }
  EXPECT_TRUE(wait_for([&] { return events("PowerLimit", "first-") >= 2; }, 20));
  EXPECT_GE(sched_->kube_metrics().power_limit_patches, 2u);
  // The read API shows each gang's limit.
  for (const JobView& v : sched_->jobs(JobFilter{})) {
    EXPECT_GT(v.row.power_limit_w, 0) << v.row.spec.name;
    EXPECT_LT(v.row.power_limit_w, tdp()) << v.row.spec.name;
  }
  // When the second gang goes, power frees and the first's limit is raised again (towards
  // its default: the annotation rises or is removed).
  const double lowered = limit_of("first-0");
  for (const std::string name : {"second-0", "second-1"}) {
    api("DELETE", "/api/v1/namespaces/team-a/pods/" + name + "?gracePeriodSeconds=0");
  }
  EXPECT_TRUE(wait_for(
      [&] {
        const double w = limit_of("first-0");
        return w < 0 || w > lowered;
      },
      20))
      << limit_of("first-0") << " was " << lowered;
}

TEST_P(KubePowerTest, ANodeWithoutThermalHeadroomGetsNoJobUntilItsAnnotationChanges) {
  start_v100_emulator(2);  // gpu-node-0000, gpu-node-0001
  create_namespace("team-a");
  annotate_node("gpu-node-0000", "0");
  start_scheduler(power_options("", false, 0));  // no cap: the headroom alone
  for (int i = 0; i < 9; ++i) create_pod("team-a", "p" + std::to_string(i), 1);
  ASSERT_TRUE(wait_for([&] { return binds_by_pod().size() == 8; }, 20));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  ASSERT_EQ(binds_by_pod().size(), 8u);  // the ninth has no node with room
  std::string waiting;
  for (int i = 0; i < 9; ++i) {
    if (!bound("p" + std::to_string(i))) waiting = "p" + std::to_string(i);
  }
  for (const auto& b : cluster_->bindings()) EXPECT_EQ(b.node, "gpu-node-0001") << b.name;
  std::string message;
  ASSERT_TRUE(wait_for(
      [&] {
        message = unschedulable(waiting);
        return !message.empty();
      },
      20));
  EXPECT_NE(message.find("thermal headroom"), std::string::npos) << message;
  EXPECT_NE(message.find("gpu-node-0000"), std::string::npos) << message;  // named, not #0
  // The operator gives the node room: the next cycle sees it.
  annotate_node("gpu-node-0000", "2000");
  ASSERT_TRUE(wait_for([&] { return bound(waiting); }, 20));
  EXPECT_EQ(pod(waiting)["spec"].value("nodeName", ""), "gpu-node-0000");
  // A malformed value is ignored (logged), never fatal: the node stays schedulable.
  annotate_node("gpu-node-0000", "hot");
  create_pod("team-a", "after", 1);
  EXPECT_TRUE(wait_for([&] { return bound("after"); }, 20));
}

TEST_P(KubePowerTest, ABestEffortGangWaitsForACleanerHourAndSaysSoInItsCondition) {
  start_v100_emulator(1);
  create_namespace("team-a");
  // Dirty now, clean from half an hour on (Unix time, as --carbon).
  const auto now = static_cast<int64_t>(std::time(nullptr));
  const int64_t clean = now + 1800;
  const std::string csv = (dir_ / "carbon.csv").string();
  std::ofstream(csv) << "time,g_per_kwh\n"
                     << now - 3600 << ",500\n"
                     << clean << ",100\n"
                     << clean + 3600 << ",100\n";
  SchedulerOptions opt = scheduler_options(
      "queues:\n  - name: team-a\n    default_priority_class: best-effort\n"
      "    carbon_defer: 6h\n");
  opt.power.model = model_;
  opt.power.carbon = std::make_shared<const CarbonIntensity>(
      CarbonIntensity::load(csv, CarbonIntensity::TimeBase::kAbsolute));
  start_scheduler(opt);
  create_pod("team-a", "batch", 1);
  std::string message;
  ASSERT_TRUE(wait_for(
      [&] {
        message = unschedulable("batch");
        return !message.empty();
      },
      20));
  EXPECT_NE(message.find("carbon: waiting for cleaner electricity"), std::string::npos) << message;
  EXPECT_NE(message.find(format_time(static_cast<double>(clean))), std::string::npos)
      << message;  // as UTC
  EXPECT_TRUE(wait_for([&] { return events("FailedScheduling", "batch") >= 1; }, 20));
  EXPECT_FALSE(bound("batch"));
  bool said = false;
  for (const JobView& v : sched_->jobs(JobFilter{})) {
    EXPECT_EQ(v.reason_code, "CarbonDefer") << v.pending_reason;
    said = true;
  }
  EXPECT_TRUE(said);
}

// The view follows the nodes: idle draw, peak and a percentage cap are recomputed when the
// Cluster is rebuilt, headroom annotations count from the next call, and a GPU type without
// power figures gets no power limit written.
TEST(KubePowerView, FollowsNodesHeadroomAndTypesWithoutFigures) {
  const auto model = std::make_shared<const PowerModel>(load_power_model(TESSERA_SHARED_DATA));
  auto node = [](const std::string& name, const std::string& product) {
    NodeInfo n;
    n.name = name;
    n.labels = {{kGpuProductLabel, product}};
    n.gpu_product = product;
    n.ready = true;
    n.gpus = 8;
    n.cpu_milli = 96000;
    n.mem_mib = 1 << 20;
    return n;
  };
  ClusterModel m(ModelOptions{});
  m.upsert_node(node("v0", kV100));
  m.refresh();
  PowerOptions o;
  o.model = model;
  o.node_power_w = 500;
  KubePower p(o);
  EXPECT_EQ(p.view(m), nullptr);  // no cap, no energy weight, no headroom: power is off

  o.cap = "50%";
  KubePower capped(o);
  const GpuPowerSpec& v100 = model->spec("V100");
  const PowerView* v = capped.view(m);
  ASSERT_NE(v, nullptr);
  EXPECT_DOUBLE_EQ(v->idle_w, 500 + 8 * v100.idle_w);
  EXPECT_DOUBLE_EQ(v->cap_w, 0.5 * (500 + 8 * v100.tdp_w));
  EXPECT_TRUE(v->node_headroom_w.empty());
  // A second node joins: the percentage is of the new peak.
  m.upsert_node(node("v1", kV100));
  m.refresh();
  v = capped.view(m);
  EXPECT_DOUBLE_EQ(v->idle_w, 2 * (500 + 8 * v100.idle_w));
  EXPECT_DOUBLE_EQ(v->cap_w, (500 + 8 * v100.tdp_w));
  // Headroom on v1 (an annotation changes no Cluster): seen by the next call.
  NodeInfo hot = node("v1", kV100);
  hot.thermal_headroom_w = 0;
  m.upsert_node(hot);
  m.refresh();
  v = capped.view(m);
  ASSERT_EQ(v->node_headroom_w.size(), 2u);
  EXPECT_EQ(v->node_headroom_w[*m.node_id("v0")], -1);
  EXPECT_EQ(v->node_headroom_w[*m.node_id("v1")], 0);
  // The headroom alone turns power on.
  EXPECT_NE(p.view(m), nullptr);
  // Limits are written below TDP only, rounded, and never for a type without figures.
  const NodeId v0 = *m.node_id("v0");
  EXPECT_EQ(capped.annotated_limit(m.cluster(), v0, 0), 0);
  EXPECT_EQ(capped.annotated_limit(m.cluster(), v0, v100.tdp_w), 0);
  EXPECT_EQ(capped.annotated_limit(m.cluster(), v0, 187.4), 187);
  m.upsert_node(node("x0", "NVIDIA-Mystery-GPU"));
  m.refresh();
  ASSERT_NE(capped.view(m), nullptr);
  EXPECT_EQ(capped.annotated_limit(m.cluster(), *m.node_id("x0"), 187), 0);
  EXPECT_EQ(capped.annotated_limit(m.cluster(), *m.node_id("v0"), 187), 187);
}

// check_power_options refuses what serve refuses, in its words; the command refuses the same
// before it connects to anything.
TEST(KubePowerFlags, InvalidPowerFlagsAreRefused) {
  auto refused = [](PowerOptions o, bool elastic = false) -> std::string {
    try {
      check_power_options(o, elastic);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "";
  };
  PowerOptions o;
  EXPECT_EQ(refused(o), "");
  o.shifting = true;
  EXPECT_NE(refused(o).find("--power-shifting needs --power-cap"), std::string::npos);
  o.cap = "70%";
  EXPECT_EQ(refused(o), "");
  EXPECT_NE(refused(o, /*elastic=*/true).find("elastic"), std::string::npos);
  o.cap = "120%";
  EXPECT_NE(refused(o).find("--power-cap: expected kW"), std::string::npos) << refused(o);
  o.cap = "lots";
  EXPECT_NE(refused(o).find("--power-cap"), std::string::npos);
  o.cap = "";
  o.shifting = false;
  o.energy_weight = 1.5;
  EXPECT_NE(refused(o).find("--energy-weight must be between 0 and 1"), std::string::npos);

  // The command: each refused with a message naming the flag and a failing exit status,
  // before any kubeconfig is read (the one named does not exist).
  const std::string dir = ::testing::TempDir();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--power-shifting", "--power-cap"},
      {"--power-cap 120%", "--power-cap"},
      {"--power-cap 50 --energy-weight 2", "--energy-weight"},
      {"--carbon /no/such/file.csv", "--carbon"},
  };
  for (const auto& [flags, named] : cases) {
    const std::string out = dir + "/kube-power-flags.txt";
    const std::string cmd = std::string(TESSERA_BINARY) +
                            " kube --kubeconfig /no/such/kubeconfig " + flags + " > " + out +
                            " 2>&1";
    const int rc = std::system(cmd.c_str());
    std::ifstream in(out);
    const std::string text((std::istreambuf_iterator<char>(in)), {});
    EXPECT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) != 0) << flags << ": " << text;
    EXPECT_NE(text.find(named), std::string::npos) << flags << ": " << text;
    EXPECT_EQ(text.find("kubeconfig"), std::string::npos) << flags << ": " << text;
  }
}

KUBE_ON_BOTH_TARGETS(KubePowerTest);

}  // namespace
}  // namespace tessera::kube
