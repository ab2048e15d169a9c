// What the tessera kube end-to-end tests share: an API-server emulator (HTTPS, client
// certificates) with fake GPU nodes, a scheduler in this process, and helpers that create
// namespaces, PodGroups and pods and wait for what the emulator shows.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "backend/kubernetes/kube_config.h"
#include "control/kube/kube_objects.h"
#include "control/kube/kube_scheduler.h"
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
    if (emu_) emu_->stop();
    emu_.reset();
    fs::remove_all(dir_);
  }

  kube_emulator::Options emulator_options(int nodes, int gpus = 8) {
    kube_emulator::Options o;
    o.generate_tls = true;
    o.nodes = {kube_emulator::NodePool{.count = nodes, .gpus = gpus}};
    o.kubelet.start_delay = std::chrono::milliseconds(20);
    return o;
  }
  void start_emulator(int nodes, int gpus = 8) { start_emulator(emulator_options(nodes, gpus)); }
  void start_emulator(const kube_emulator::Options& o) {
    emu_ = std::make_unique<kube_emulator::Emulator>(o);
    emu_->start();
    kubeconfig_ = (dir_ / "kubeconfig").string();
    std::ofstream(kubeconfig_) << emu_->kubeconfig();
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
    const auto r = emu_->request(
        "POST", "/api/v1/namespaces",
        json{{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", ns}}}}.dump());
    ASSERT_EQ(r.status, 201) << r.body;
  }

  void create_group(const std::string& ns, const std::string& name, int min_member) {
    const auto r =
        emu_->request("POST", "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/" + ns + "/podgroups",
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
    const auto r = emu_->request("POST", "/api/v1/namespaces/" + ns + "/pods", pod.dump());
    ASSERT_EQ(r.status, 201) << r.body;
  }
  void create_pod(const std::string& ns, const std::string& name, int gpus,
                  const std::string& group = "", double seconds = 0,
                  const std::string& scheduler = "tessera") {
    post_pod(pod_json(ns, name, gpus, group, seconds, scheduler));
  }
  // Successful binds per pod uid, from the emulator's binding log.
  std::map<std::string, int> binds_by_pod() {
    std::map<std::string, int> n;
    for (const auto& b : emu_->bindings()) n[b.uid] += b.code == 201;
    return n;
  }

  json pods(const std::string& query = "") {
    return emu_->request("GET", "/api/v1/pods" + query).json_body()["items"];
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
  std::unique_ptr<kube_emulator::Emulator> emu_;
  std::unique_ptr<KubeScheduler> sched_;
};

}  // namespace tessera::kube::testing
