// What one namespace's pods may do to another's in `tessera kube`: charge a queue that does not
// admit them (pods of team-b labelled tessera.io/queue: team-a took team-a's whole share), or
// put what they like into node annotations and pod conditions.
#include <gtest/gtest.h>

#include <string>

#include "kube_env.h"

namespace tessera::kube {
namespace {

using nlohmann::json;
using testing::KubeEnv;

class KubeIsolation : public testing::KubeEnvOnBoth {
 protected:
  std::string node_of(const std::string& ns, const std::string& pod) {
    return api("GET", "/api/v1/namespaces/" + ns + "/pods/" + pod)
        .json_body()["spec"]
        .value("nodeName", "");
  }
  void labelled_pod(const std::string& ns, const std::string& name, const json& labels,
                    const json& notes = json::object()) {
    json p = pod_json(ns, name, 1);
    for (const auto& [k, v] : labels.items()) p["metadata"]["labels"][k] = v;
    for (const auto& [k, v] : notes.items()) p["metadata"]["annotations"][k] = v;
    post_pod(p);
  }
};

// A queue admits its own namespace and those it lists; a pod naming a queue its namespace may
// not use waits, saying so, and team-a's own pods run.
TEST_P(KubeIsolation, ANamespaceCannotChargeAQueueThatDoesNotAdmitIt) {
  start_cluster(1);  // 8 GPUs
  for (const std::string ns : {"team-a", "team-b", "ml-dev"}) create_namespace(ns);
  start_scheduler(R"(queues:
  - name: team-a
  - name: team-b
  - name: shared
    namespaces: [ml-dev]
)");
  labelled_pod("team-b", "thief", {{"tessera.io/queue", "team-a"}});
  labelled_pod("team-a", "own", {{"tessera.io/queue", "team-a"}});
  labelled_pod("ml-dev", "guest", {{"tessera.io/queue", "shared"}});
  labelled_pod("team-b", "not-listed", {{"tessera.io/queue", "shared"}});
  ASSERT_TRUE(wait_for([&] { return !node_of("team-a", "own").empty(); }, 30));
  ASSERT_TRUE(wait_for([&] { return !node_of("ml-dev", "guest").empty(); }, 30));
  std::string why;
  ASSERT_TRUE(wait_for(
      [&] {
        why = waiting_message("team-b", "thief");
        return !why.empty();
      },
      30));
  EXPECT_NE(why.find("namespace team-b may not use queue team-a"), std::string::npos) << why;
  EXPECT_TRUE(node_of("team-b", "thief").empty());
  EXPECT_TRUE(wait_for([&] { return !waiting_message("team-b", "not-listed").empty(); }, 30));
  EXPECT_TRUE(node_of("team-b", "not-listed").empty());
}

// Values read from pods are checked where they are read, and what a condition says of a bad
// one is short: an infinite grace, a 200 KB fraction and a dataset named "../../etc/passwd"
// each make their pod wait as invalid, and no node gets an annotation from them.
TEST_P(KubeIsolation, BadValuesMakeAPodWaitWithAShortReasonAndReachNoNode) {
  start_cluster(1);
  create_namespace("team-a");
  SchedulerOptions o = scheduler_options();
  o.prestage_datasets = 4;
  start_scheduler(o);
  labelled_pod("team-a", "grace", json::object(), {{"tessera.io/checkpoint-grace-seconds", "inf"}});
  labelled_pod("team-a", "huge", json::object(),
               {{"tessera.io/gpu-fraction", std::string(200000, '9')}});
  labelled_pod("team-a", "path", json::object(), {{"tessera.io/dataset", "../../etc/passwd"}});
  labelled_pod("team-a", "shell", json::object(), {{"tessera.io/dataset", "a b;$(id)"}});
  for (const std::string pod : {"grace", "huge", "path", "shell"}) {
    std::string why;
    ASSERT_TRUE(wait_for(
        [&] {
          why = waiting_message("team-a", pod);
          return !why.empty();
        },
        30))
        << pod;
    EXPECT_LT(why.size(), 600u) << pod;
    EXPECT_TRUE(node_of("team-a", pod).empty()) << pod;
  }
  const json nodes = api("GET", "/api/v1/nodes").json_body();
  for (const json& n : nodes["items"]) {
    const json notes = n["metadata"].value("annotations", json::object());
    for (const auto& [key, value] : notes.items()) {
      EXPECT_EQ(key.find("stage.data.tessera.io/"), std::string::npos) << key;
    }
  }
}

KUBE_ON_BOTH_TARGETS(KubeIsolation);

}  // namespace
}  // namespace tessera::kube
