// What the tessera kube end-to-end tests share: a cluster with fake GPU nodes (the API-server
// emulator, or a real etcd + kube-apiserver + KWOK), a scheduler in this process, and helpers
// that create namespaces, PodGroups and pods and wait for what the cluster shows. A suite that
// derives from KubeEnvOnBoth runs each test on both targets (KUBE_ON_BOTH_TARGETS).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "backend/kube/kube_config.h"
#include "control/kube/kube_objects.h"
#include "control/kube/kube_scheduler.h"
#include "kube/support/cluster_under_test.h"
#include "kube/support/real_cluster.h"
#include "kube_emulator/emulator.h"

namespace tessera::kube::testing {

namespace fs = std::filesystem;
using nlohmann::json;

class KubeEnv : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tessera-kube-e2e-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (sched_) sched_->stop();
    sched_.reset();
    if (cluster_) {
      // On the real server, no node ever held more GPUs than it has.
      for (const std::string& o : cluster_->overcommits()) ADD_FAILURE() << "over-committed " << o;
      cluster_->stop();
    }
    cluster_.reset();
    real_ = nullptr;
    emu_.reset();
    if (!HasFailure()) fs::remove_all(dir_);
  }

  virtual Target target() const { return Target::kEmulator; }
  bool on_apiserver() const { return target() == Target::kApiServer; }
  virtual RealClusterOptions real_options() { return {}; }

  kube_emulator::Options emulator_options(int nodes, int gpus = 8) {
    kube_emulator::Options o;
    o.generate_tls = true;
    o.nodes = {kube_emulator::NodePool{.count = nodes, .gpus = gpus}};
    o.kubelet.start_delay = std::chrono::milliseconds(20);
    return o;
  }
  void start_cluster(int nodes, int gpus = 8) { start_cluster(emulator_options(nodes, gpus)); }
  // The emulator with these options, or a real control plane with the same nodes.
  void start_cluster(const kube_emulator::Options& o) {
    if (target() == Target::kEmulator) {
      emu_ = std::make_unique<kube_emulator::Emulator>(o);
      emu_->start();
      cluster_ = make_emulator_cluster(*emu_, dir_);
    } else {
      RealClusterOptions ro = real_options();
      ro.layout = o.layout;
      auto real = std::make_unique<RealCluster>(dir_ / "cluster", ro);
      real->start();
      // The PodGroup CRD as deploy/kubernetes/ installs it, accepted by apiextensions.
      std::string out;
      ASSERT_EQ(real->kubectl("apply -f " + std::string(TESSERA_SOURCE_DIR) +
                                  "/deploy/kubernetes/01-podgroup-crd.yaml",
                              &out),
                0)
          << out;
      ASSERT_EQ(real->kubectl("wait --for condition=established --timeout=60s "
                              "crd/podgroups.scheduling.x-k8s.io",
                              &out),
                0)
          << out;
      real->add_nodes(o.nodes);
      real_ = real.get();
      cluster_ = std::move(real);
    }
    kubeconfig_ = cluster_->kubeconfig_path();
  }
  // A request as the cluster's administrator (PATCH: a merge patch unless said otherwise).
  kube_emulator::Reply api(const std::string& method, const std::string& path,
                           const std::string& body = "",
                           const std::string& content_type = "application/json") {
    return cluster_->request(method, path, body, content_type);
  }

  SchedulerOptions scheduler_options(const std::string& queues_yaml = "") {
    SchedulerOptions opt;
    opt.model.topology_labels = {"network.topology.nvidia.com/spine",
                                 "network.topology.nvidia.com/leaf"};
    if (!queues_yaml.empty()) {
      opt.model.queues_path = (dir_ / "queues.yaml").string();
      std::ofstream(opt.model.queues_path) << queues_yaml;
    }
    opt.checkpoint_grace = 1;
    opt.event_interval = 5;
    return opt;
  }
  void start_scheduler(const std::string& queues_yaml = "") {
    start_scheduler(scheduler_options(queues_yaml));
  }
  void start_scheduler(const SchedulerOptions& opt) {
    auto client = std::make_shared<Client>(load_kubeconfig(kubeconfig_));
    sched_ = std::make_unique<KubeScheduler>(client, opt);
    sched_->start();
  }

  void create_namespace(const std::string& ns) {
    const auto r =
        api("POST", "/api/v1/namespaces",
            json{{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", ns}}}}.dump());
    ASSERT_EQ(r.status, 201) << r.body;
    // A real server admits pods only once the namespace's default ServiceAccount exists.
    if (on_apiserver()) {
      ASSERT_TRUE(wait_for(
          [&] {
            return api("GET", "/api/v1/namespaces/" + ns + "/serviceaccounts/default").status ==
                   200;
          },
          30));
    }
  }

  void create_group(const std::string& ns, const std::string& name, int min_member) {
    const auto r = api("POST", "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/" + ns + "/podgroups",
                       json{{"apiVersion", "scheduling.x-k8s.io/v1alpha1"},
                            {"kind", "PodGroup"},
                            {"metadata", {{"name", name}, {"namespace", ns}}},
                            {"spec", {{"minMember", min_member}}}}
                           .dump());
    ASSERT_EQ(r.status, 201) << r.body;
  }

  // A pod of ours asking for `gpus` GPUs, running `seconds` (0: until deleted).
  static json pod_json(const std::string& ns, const std::string& name, int gpus,
                       const std::string& group = "", double seconds = 0,
                       const std::string& scheduler = "tessera") {
    json labels = json::object(), notes = json::object();
    if (!group.empty()) labels[kPodGroupLabel] = group;
    if (seconds > 0) {
      notes["pod-complete.stage.kwok.x-k8s.io/delay"] =
          std::to_string(static_cast<int>(seconds * 1000)) + "ms";
    }
    json limits = json::object();
    if (gpus > 0) limits["nvidia.com/gpu"] = std::to_string(gpus);
    return {{"apiVersion", "v1"},
            {"kind", "Pod"},
            {"metadata",
             {{"name", name}, {"namespace", ns}, {"labels", labels}, {"annotations", notes}}},
            {"spec",
             {{"schedulerName", scheduler},
              {"terminationGracePeriodSeconds", 1},
              {"containers",
               {{{"name", "main"}, {"image", "trainer"}, {"resources", {{"limits", limits}}}}}}}}};
  }
  void post_pod(const json& pod) {
    const std::string ns = pod["metadata"]["namespace"];
    const auto r = api("POST", "/api/v1/namespaces/" + ns + "/pods", pod.dump());
    ASSERT_EQ(r.status, 201) << r.body;
  }
  void create_pod(const std::string& ns, const std::string& name, int gpus,
                  const std::string& group = "", double seconds = 0,
                  const std::string& scheduler = "tessera") {
    post_pod(pod_json(ns, name, gpus, group, seconds, scheduler));
  }
  // `n` gangs of 8 one-GPU pods in team-a, named g0, g1, ... on from the last call's
  // (gangs_made_ counts them).
  void add_gangs(int n) {
    for (int g = 0; g < n; ++g, ++gangs_made_) {
      const std::string name = "g" + std::to_string(gangs_made_);
      create_group("team-a", name, 8);
      for (int i = 0; i < 8; ++i) create_pod("team-a", name + "-" + std::to_string(i), 1, name);
    }
  }
  int gangs_made_ = 0;

  // Successful binds per pod uid, from the cluster's binding log (the real server's audit log).
  std::map<std::string, int> binds_by_pod() {
    std::map<std::string, int> n;
    for (const auto& b : cluster_->bindings()) {
      if (b.code == 201) ++n[b.uid];
    }
    return n;
  }

  // Pods whose spec.nodeName is set. Where the scheduler is killed mid-request, the audit log
  // may say 504 for a bind the server did commit: the pod itself is the judge there.
  size_t pods_bound() {
    size_t n = 0;
    for (const json& p : pods()) {
      if (!p["spec"].value("nodeName", "").empty()) ++n;
    }
    return n;
  }

  // Deletes a pod at once (grace 0), as when its node is gone.
  void delete_pod(const std::string& ns, const std::string& name) {
    const auto r =
        api("DELETE", "/api/v1/namespaces/" + ns + "/pods/" + name + "?gracePeriodSeconds=0");
    ASSERT_EQ(r.status, 200) << r.body;
  }

  // The message of a pod's PodScheduled=False condition ("" while it has none).
  std::string waiting_message(const std::string& ns, const std::string& pod) {
    const json p = api("GET", "/api/v1/namespaces/" + ns + "/pods/" + pod).json_body();
    for (const json& c : p["status"].value("conditions", json::array())) {
      if (c.value("type", "") == "PodScheduled" && c.value("status", "") == "False") {
        return c.value("message", "");
      }
    }
    return "";
  }
  json pods(const std::string& query = "") {
    return api("GET", "/api/v1/pods" + query).json_body()["items"];
  }
  // Every pod listed is in one of `phases`.
  static bool all_in(const json& listed, const std::set<std::string>& phases) {
    for (const json& p : listed) {
      if (phases.count(p["status"].value("phase", "")) == 0) return false;
    }
    return true;
  }

  template <class Pred>
  bool wait_for(Pred pred, double seconds) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < until) {
      if (pred()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return pred();
  }

  fs::path dir_;
  std::string kubeconfig_;
  std::unique_ptr<ClusterUnderTest> cluster_;
  std::unique_ptr<kube_emulator::Emulator> emu_;  // the emulator target's, for its test hooks
  RealCluster* real_ = nullptr;                   // the real target's
  std::unique_ptr<KubeScheduler> sched_;
};

inline std::string target_name(const ::testing::TestParamInfo<Target>& p) {
  return to_string(p.param);
}

// A fixture whose tests run on the emulator and on the real API server.
class KubeEnvOnBoth : public KubeEnv, public ::testing::WithParamInterface<Target> {
 protected:
  Target target() const override { return GetParam(); }
};

#define KUBE_ON_BOTH_TARGETS(Suite)                                                         \
  INSTANTIATE_TEST_SUITE_P(On, Suite,                                                       \
                           ::testing::Values(::tessera::kube::testing::Target::kEmulator,   \
                                             ::tessera::kube::testing::Target::kApiServer), \
                           ::tessera::kube::testing::target_name)

}  // namespace tessera::kube::testing
