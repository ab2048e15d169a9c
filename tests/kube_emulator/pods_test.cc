// Pod semantics: bindings and their 409s, the fake kubelet (Running, admission failures,
// completion, graceful deletion), evictions with PodDisruptionBudgets, node readiness taints,
// injected bind faults and the binding log.
#include <fstream>

#include "kube_emulator/emulator_test_util.h"

namespace kube_emulator::testing {
namespace {

class PodsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Options o = small_options(2, 8);
    o.binding_log_file = ::testing::TempDir() + "emu_bind_log_" +
                         std::to_string(reinterpret_cast<uintptr_t>(this)) + ".jsonl";
    std::remove(o.binding_log_file.c_str());
    log_ = o.binding_log_file;
    emu_ = std::make_unique<Emulator>(o);
    emu_->start();
    http_ = std::make_unique<Http>(emu_->port());
  }
  Http::R pod(const std::string& name) {
    return http_->get("/api/v1/namespaces/default/pods/" + name);
  }
  int bind(const std::string& name, const std::string& node) {
    return http_
        ->post("/api/v1/namespaces/default/pods/" + name + "/binding", binding_json(name, node))
        .status;
  }
  std::string phase(const std::string& name) {
    return pod(name).body["status"].value("phase", "?");
  }
  std::string log_;
  std::unique_ptr<Emulator> emu_;
  std::unique_ptr<Http> http_;
};

TEST_F(PodsTest, BindingSetsTheNodeAndTheKubeletRunsThePod) {
  json p = pod_json("a", "4");
  ASSERT_EQ(http_->post("/api/v1/namespaces/default/pods", p).status, 201);
  json b = binding_json("a", "gpu-node-0001");
  b["metadata"]["annotations"] = {{"tessera.io/gpus", "0,1,2,3"}};
  auto r = http_->post("/api/v1/namespaces/default/pods/a/binding", b);
  ASSERT_EQ(r.status, 201) << r.text;
  EXPECT_EQ(r.body["kind"], "Status");
  EXPECT_EQ(r.body["status"], "Success");
  auto got = pod("a").body;
  EXPECT_EQ(got["spec"]["nodeName"], "gpu-node-0001");
  EXPECT_EQ(got["metadata"]["annotations"]["tessera.io/gpus"], "0,1,2,3");
  ASSERT_TRUE(eventually([&] { return phase("a") == "Running"; }));
  got = pod("a").body;
  EXPECT_FALSE(got["status"]["podIP"].get<std::string>().empty());
  EXPECT_EQ(got["status"]["hostIP"], "172.20.0.3");
  EXPECT_EQ(got["status"]["containerStatuses"][0]["ready"], true);
  bool scheduled = false;
  for (const auto& c : got["status"]["conditions"]) {
    scheduled = scheduled || (c["type"] == "PodScheduled" && c["status"] == "True");
  }
  EXPECT_TRUE(scheduled);
}

TEST_F(PodsTest, BindingConflicts) {
  ASSERT_EQ(http_->post("/api/v1/namespaces/default/pods", pod_json("a")).status, 201);
  ASSERT_EQ(bind("a", "gpu-node-0000"), 201);
  auto again =
      http_->post("/api/v1/namespaces/default/pods/a/binding", binding_json("a", "gpu-node-0001"));
  EXPECT_EQ(again.status, 409);
  EXPECT_EQ(again.body["message"],
            "Operation cannot be fulfilled on pods/binding \"a\": pod a is "
            "already assigned to node \"gpu-node-0000\"");
  json gated = pod_json("g");
  gated["spec"]["schedulingGates"] = {{{"name", "kueue.x-k8s.io/topology"}}};
  ASSERT_EQ(http_->post("/api/v1/namespaces/default/pods", gated).status, 201);
  EXPECT_EQ(bind("g", "gpu-node-0000"), 409);
  // Removing the gate is an allowed pod update; then the bind works.
  ASSERT_EQ(http_
                ->patch("/api/v1/namespaces/default/pods/g",
                        {{"spec", {{"schedulingGates", nullptr}}}}, "application/merge-patch+json")
                .status,
            200);
  EXPECT_EQ(bind("g", "gpu-node-0000"), 201);
  json uid_binding = binding_json("g2", "gpu-node-0000");
  ASSERT_EQ(http_->post("/api/v1/namespaces/default/pods", pod_json("g2")).status, 201);
  uid_binding["metadata"]["uid"] = "not-the-uid";
  EXPECT_EQ(http_->post("/api/v1/namespaces/default/pods/g2/binding", uid_binding).status, 409);
  EXPECT_EQ(bind("missing", "gpu-node-0000"), 404);
  // Being deleted: a bound pod with a grace period.
  ASSERT_EQ(http_->del("/api/v1/namespaces/default/pods/a").status, 200);
  EXPECT_EQ(bind("a", "gpu-node-0001"), 409);
  // The binding log judges every attempt.
  const auto log = emu_->bindings();
  ASSERT_EQ(log.size(), 7u);
  EXPECT_EQ(log[0].code, 201);
  EXPECT_EQ(log[0].node, "gpu-node-0000");
  EXPECT_EQ(log[1].code, 409);
  std::ifstream f(log_);
  int lines = 0;
  for (std::string line; std::getline(f, line);) ++lines;
  EXPECT_EQ(lines, 7);
  EXPECT_EQ(http_->get("/emulator/bindings").body.size(), 7u);
}

TEST_F(PodsTest, KubeletRejectsOvercommittedGpus) {
  ASSERT_EQ(http_->post("/api/v1/namespaces/default/pods", pod_json("a", "6")).status, 201);
  ASSERT_EQ(http_->post("/api/v1/namespaces/default/pods", pod_json("b", "4")).status, 201);
  ASSERT_EQ(bind("a", "gpu-node-0000"), 201);
  ASSERT_TRUE(eventually([&] { return phase("a") == "Running"; }));
  ASSERT_EQ(bind("b", "gpu-node-0000"), 201);  // the apiserver does not check capacity
  ASSERT_TRUE(eventually([&] { return phase("b") == "Failed"; }));
  auto b = pod("b").body;
  EXPECT_EQ(b["status"]["reason"], "OutOfnvidia.com/gpu");
  EXPECT_EQ(b["status"]["message"],
            "Pod was rejected: Node didn't have enough resource: "
            "nvidia.com/gpu, requested: 4, used: 6, capacity: 8");
  EXPECT_EQ(emu_->bindings()[0].requests["nvidia.com/gpu"], "6");
}

TEST_F(PodsTest, PodsCompleteAfterTheKwokDelay) {
  json p = pod_json("a", "1");
  p["metadata"]["annotations"] = {{"pod-complete.stage.kwok.x-k8s.io/delay", "200ms"}};
  ASSERT_EQ(http_->post("/api/v1/namespaces/default/pods", p).status, 201);
  ASSERT_EQ(bind("a", "gpu-node-0000"), 201);
  ASSERT_TRUE(eventually([&] { return phase("a") == "Succeeded"; }));
  EXPECT_EQ(pod("a").body["status"]["containerStatuses"][0]["state"]["terminated"]["reason"],
            "Completed");
  // A terminal pod's GPUs are free again.
  ASSERT_EQ(http_->post("/api/v1/namespaces/default/pods", pod_json("b", "8")).status, 201);
  ASSERT_EQ(bind("b", "gpu-node-0000"), 201);
  EXPECT_TRUE(eventually([&] { return phase("b") == "Running"; }));
}

TEST_F(PodsTest, GracefulDeletion) {
  // Unbound: gone at once.
  ASSERT_EQ(http_->post("/api/v1/namespaces/default/pods", pod_json("u")).status, 201);
  auto d = http_->del("/api/v1/namespaces/default/pods/u");
  EXPECT_EQ(d.status, 200);
  EXPECT_EQ(pod("u").status, 404);
  // Bound and running: deletionTimestamp, then removed by the kubelet after the grace.
  ASSERT_EQ(http_->post("/api/v1/namespaces/default/pods", pod_json("r")).status, 201);
  ASSERT_EQ(bind("r", "gpu-node-0000"), 201);
  ASSERT_TRUE(eventually([&] { return phase("r") == "Running"; }));
  auto g = http_->del("/api/v1/namespaces/default/pods/r", {{"gracePeriodSeconds", 1}});
  EXPECT_EQ(g.status, 200);
  EXPECT_EQ(g.body["metadata"]["deletionGracePeriodSeconds"], 1);
  EXPECT_TRUE(g.body["metadata"].contains("deletionTimestamp"));
  EXPECT_EQ(pod("r").status, 200);
  EXPECT_TRUE(eventually([&] { return pod("r").status == 404; }, 3000ms));
  // A container that exits soon after SIGTERM goes before its grace period ends.
  json q = pod_json("q");
  q["metadata"]["annotations"] = {{"tessera.io/emulator-stop-seconds", "0.1"}};
  ASSERT_EQ(http_->post("/api/v1/namespaces/default/pods", q).status, 201);
  ASSERT_EQ(bind("q", "gpu-node-0000"), 201);
  ASSERT_TRUE(eventually([&] { return phase("q") == "Running"; }));
  ASSERT_EQ(http_->del("/api/v1/namespaces/default/pods/q").status, 200);  // grace 30 s
  EXPECT_TRUE(eventually([&] { return pod("q").status == 404; }, 2000ms));
  // Force deletion (grace 0) removes a bound pod at once.
  ASSERT_EQ(http_->post("/api/v1/namespaces/default/pods", pod_json("f")).status, 201);
  ASSERT_EQ(bind("f", "gpu-node-0000"), 201);
  ASSERT_EQ(http_->del("/api/v1/namespaces/default/pods/f?gracePeriodSeconds=0").status, 200);
  EXPECT_EQ(pod("f").status, 404);
}

TEST_F(PodsTest, EvictionHonoursPodDisruptionBudgets) {
  for (const char* n : {"w0", "w1"}) {
    json p = pod_json(n);
    p["metadata"]["labels"] = {{"app", "web"}};
    ASSERT_EQ(http_->post("/api/v1/namespaces/default/pods", p).status, 201);
    ASSERT_EQ(bind(n, "gpu-node-0000"), 201);
  }
  ASSERT_TRUE(eventually([&] { return phase("w0") == "Running" && phase("w1") == "Running"; }));
  ASSERT_EQ(http_
                ->post("/apis/policy/v1/namespaces/default/poddisruptionbudgets",
                       {{"metadata", {{"name", "web"}}},
                        {"spec",
                         {{"minAvailable", 1}, {"selector", {{"matchLabels", {{"app", "web"}}}}}}}})
                .status,
            201);
  json ev = {{"apiVersion", "policy/v1"},
             {"kind", "Eviction"},
             {"metadata", {{"name", "w0"}, {"namespace", "default"}}},
             {"deleteOptions", {{"gracePeriodSeconds", 0}}}};
  auto first = http_->post("/api/v1/namespaces/default/pods/w0/eviction", ev);
  EXPECT_EQ(first.status, 201) << first.text;
  EXPECT_EQ(pod("w0").status, 404);
  ev["metadata"]["name"] = "w1";
  auto second = http_->post("/api/v1/namespaces/default/pods/w1/eviction", ev);
  EXPECT_EQ(second.status, 429);
  EXPECT_EQ(second.body["message"],
            "Cannot evict pod as it would violate the pod's disruption budget.");
  EXPECT_EQ(second.body["details"]["causes"][0]["reason"], "DisruptionBudget");
  ev["deleteOptions"] = {{"preconditions", {{"uid", "wrong"}}}};
  EXPECT_EQ(http_->post("/api/v1/namespaces/default/pods/w1/eviction", ev).status, 409);
}

TEST_F(PodsTest, NotReadyNodesAreTaintedAndStartNothing) {
  ASSERT_TRUE(emu_->set_node_ready("gpu-node-0001", "False"));
  auto n = http_->get("/api/v1/nodes/gpu-node-0001").body;
  ASSERT_EQ(n["spec"]["taints"].size(), 1u);
  EXPECT_EQ(n["spec"]["taints"][0]["key"], "node.kubernetes.io/not-ready");
  EXPECT_EQ(n["spec"]["taints"][0]["effect"], "NoSchedule");
  ASSERT_EQ(http_->post("/api/v1/namespaces/default/pods", pod_json("a")).status, 201);
  ASSERT_EQ(bind("a", "gpu-node-0001"), 201);
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(phase("a"), "Pending");
  ASSERT_EQ(http_->post("/emulator/nodes/gpu-node-0001/ready?status=True", json::object()).status,
            200);
  EXPECT_FALSE(http_->get("/api/v1/nodes/gpu-node-0001").body["spec"].contains("taints"));
  EXPECT_TRUE(eventually([&] { return phase("a") == "Running"; }));
}

TEST_F(PodsTest, InjectedBindFaults) {
  ASSERT_EQ(http_->post("/api/v1/namespaces/default/pods", pod_json("a")).status, 201);
  ASSERT_EQ(
      http_->post("/emulator/bind-faults", {{"node", "gpu-node-0000"}, {"count", 2}, {"code", 500}})
          .status,
      200);
  EXPECT_EQ(bind("a", "gpu-node-0000"), 500);
  EXPECT_EQ(bind("a", "gpu-node-0000"), 500);
  EXPECT_EQ(pod("a").body["spec"].value("nodeName", ""), "");
  EXPECT_EQ(bind("a", "gpu-node-0000"), 201);
  auto stats = http_->get("/emulator/stats").body;
  EXPECT_EQ(stats["bindsAccepted"], 1);
  EXPECT_EQ(stats["bindsRejected"], 2);
}

TEST_F(PodsTest, PriorityClassesResolveAtCreate) {
  json p = pod_json("crit");
  p["spec"]["priorityClassName"] = "system-cluster-critical";
  auto r = http_->post("/api/v1/namespaces/default/pods", p);
  EXPECT_EQ(r.body["spec"]["priority"], 2000000000);
  p["metadata"]["name"] = "missing";
  p["spec"]["priorityClassName"] = "nope";
  auto bad = http_->post("/api/v1/namespaces/default/pods", p);
  EXPECT_EQ(bad.status, 403);
  EXPECT_EQ(bad.body["reason"], "Forbidden");
}

}  // namespace
}  // namespace kube_emulator::testing
