// The queue tree as Queue objects (--queues-from crd) on a real API server: kubectl apply of
// Queues is the tree, a change applies without a restart, an invalid tree is refused and said
// in each Queue's status while the last good tree stays, and `kubectl get queues` reads like
// `tessera queues`.
#include <fstream>

#include "kube/real_server_fixture.h"

namespace tessera::kube {
namespace {

using nlohmann::json;

class KubeRealQueues : public KubeRealServer {
 protected:
  void apply_yaml(const std::string& name, const std::string& yaml) {
    const std::string path = (dir_ / (name + ".yaml")).string();
    std::ofstream(path) << yaml;
    kubectl_ok("apply -f " + path);
  }
  json queue(const std::string& name) {
    return api("GET", "/apis/scheduling.tessera.io/v1alpha1/queues/" + name).json_body();
  }
  static std::string accepted(const json& q) {
    for (const json& c : q.value("status", json::object()).value("conditions", json::array())) {
      if (c.value("type", "") == "Accepted")
        return c.value("status", "") + ": " + c.value("message", "");
    }
    return "";
  }
};

TEST_F(KubeRealQueues, QueuesAreObjectsTheirChangesApplyLiveAndABadTreeKeepsTheLastGood) {
  start_cluster(2);  // 16 GPUs
  kubectl_ok("apply -f " + std::string(TESSERA_SOURCE_DIR) +
             "/deploy/kubernetes/01-queue-crd.yaml");
  kubectl_ok("wait --for condition=established --timeout=60s crd/queues.scheduling.tessera.io");
  // The CRD refuses what its schema can say: a weight of 0, an unknown class.
  const auto bad = api("POST", "/apis/scheduling.tessera.io/v1alpha1/queues",
                       json{{"apiVersion", "scheduling.tessera.io/v1alpha1"},
                            {"kind", "Queue"},
                            {"metadata", {{"name", "bad"}}},
                            {"spec", {{"weight", 0}, {"defaultPriorityClass", "urgent"}}}}
                           .dump());
  EXPECT_EQ(bad.status, 422) << bad.body;
  EXPECT_NE(bad.body.find("spec.weight"), std::string::npos) << bad.body;

  apply_yaml("tree", R"(apiVersion: scheduling.tessera.io/v1alpha1
kind: Queue
metadata: {name: research}
spec: {weight: 1, guarantee: {gpus: 8}, namespaces: [team-a]}
---
apiVersion: scheduling.tessera.io/v1alpha1
kind: Queue
metadata: {name: nlp}
spec: {parent: research, guarantee: {gpus: 8}}
)");
  create_namespace("team-a");
  SchedulerOptions opt = scheduler_options();
  opt.model.queues_from_objects = true;
  opt.queue_status_interval = 0.2;
  start_scheduler(opt);
  // A pod of queue nlp (research/nlp, which admits team-a through research): placed.
  json pod = pod_json("team-a", "p0", 4);
  pod["metadata"]["labels"][kQueueLabel] = "nlp";
  post_pod(pod);
  ASSERT_TRUE(wait_for([&] { return pods_bound() == 1; }, 30)) << waiting_message("team-a", "p0");
  // Its status says what it holds, and that the tree is in force.
  ASSERT_TRUE(wait_for(
      [&] {
        const json q = queue("nlp");
        return q.value("status", json::object()).value("allocatedGpus", 0.0) == 4 && accepted(q).rfind("True", 0) == 0;
      },
      30))
      << queue("nlp").dump();
  EXPECT_EQ(queue("nlp").value("status", json::object()).value("path", ""), "research/nlp");
  const std::string table = kubectl_ok("get queues");
  EXPECT_NE(table.find("ALLOCATED"), std::string::npos) << table;
  EXPECT_NE(table.find("research"), std::string::npos) << table;

  // A queue added while it runs is used at once: no restart.
  apply_yaml("more", R"(apiVersion: scheduling.tessera.io/v1alpha1
kind: Queue
metadata: {name: vision}
spec: {parent: research}
)");
  pod = pod_json("team-a", "p1", 2);
  pod["metadata"]["labels"][kQueueLabel] = "vision";
  post_pod(pod);
  EXPECT_TRUE(wait_for([&] { return pods_bound() == 2; }, 30)) << waiting_message("team-a", "p1");

  // A child guaranteed more than its parent: refused, said on every Queue, the tree as it was.
  apply_yaml("greedy", R"(apiVersion: scheduling.tessera.io/v1alpha1
kind: Queue
metadata: {name: nlp}
spec: {parent: research, guarantee: {gpus: 64}}
)");
  ASSERT_TRUE(wait_for([&] { return accepted(queue("research")).rfind("False", 0) == 0; }, 30))
      << queue("research").dump();
  EXPECT_NE(accepted(queue("nlp")).find("guarantee"), std::string::npos) << accepted(queue("nlp"));
  // ... and the last good tree still schedules.
  pod = pod_json("team-a", "p2", 1);
  pod["metadata"]["labels"][kQueueLabel] = "vision";
  post_pod(pod);
  EXPECT_TRUE(wait_for([&] { return pods_bound() == 3; }, 30)) << waiting_message("team-a", "p2");
}

}  // namespace
}  // namespace tessera::kube
