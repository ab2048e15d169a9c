// Data locality in `tessera kube` (docs/data.md): a pod naming a dataset (tessera.io/dataset)
// goes to the nodes labelled as holding it (data.tessera.io/NAME), and within --locality-wait
// waits for them rather than go elsewhere, saying why.
#include <gtest/gtest.h>

#include <string>

#include "kube_env.h"

namespace tessera::kube {
namespace {

using nlohmann::json;
using testing::KubeEnv;

class KubeData : public testing::KubeEnvOnBoth {
 protected:
  std::string node_of(const std::string& pod) {
    for (const json& p : pods()) {
      if (p["metadata"]["name"] == pod) return p["spec"].value("nodeName", "");
    }
    return "";
  }
  std::string other_node(const std::string& name) {
    const json nodes = api("GET", "/api/v1/nodes").json_body();
    for (const json& n : nodes["items"]) {
      if (n["metadata"]["name"] != name) return n["metadata"]["name"];
    }
    return "";
  }
  void label(const std::string& node, const std::string& dataset) {
    const auto r =
        api("PATCH", "/api/v1/nodes/" + node,
            json{{"metadata", {{"labels", {{std::string(kDataLabelPrefix) + dataset, "true"}}}}}}
                .dump(),
            "application/merge-patch+json");
    ASSERT_EQ(r.status, 200) << r.body;
  }
  static json reader(const std::string& name, int gpus) {
    json p = pod_json("team-a", name, gpus);
    p["metadata"]["annotations"][kDatasetAnnotation] = "imagenet";
    return p;
  }
};

TEST_P(KubeData, APodGoesWhereItsDatasetIsRatherThanWhereBestfitWouldPackIt) {
  start_cluster(2, 4);
  create_namespace("team-a");
  start_scheduler();
  create_pod("team-a", "filler", 1);
  ASSERT_TRUE(wait_for([&] { return !node_of("filler").empty(); }, 20));
  const std::string data = other_node(node_of("filler"));
  label(data, "imagenet");
  // Without a dataset bestfit packs next to the filler; with one it goes to the data.
  create_pod("team-a", "plain", 1);
  ASSERT_TRUE(wait_for([&] { return !node_of("plain").empty(); }, 20));
  EXPECT_EQ(node_of("plain"), node_of("filler"));
  post_pod(reader("reader", 1));
  ASSERT_TRUE(wait_for([&] { return !node_of("reader").empty(); }, 20));
  EXPECT_EQ(node_of("reader"), data);
}

TEST_P(KubeData, WithinItsLocalityWaitAPodWaitsForItsDatasetsNodesAndSaysSo) {
  start_cluster(2, 4);
  create_namespace("team-a");
  SchedulerOptions opt = scheduler_options();
  opt.locality_wait = 600;
  start_scheduler(opt);
  create_pod("team-a", "hog", 4);
  ASSERT_TRUE(wait_for([&] { return !node_of("hog").empty(); }, 20));
  label(node_of("hog"), "imagenet");
  post_pod(reader("waiter", 2));  // fits the other node, not the full one with its data
  std::string message;
  ASSERT_TRUE(wait_for(
      [&] {
        for (const json& p : pods()) {
          if (p["metadata"]["name"] != "waiter") continue;
          for (const json& c : p["status"].value("conditions", json::array())) {
            if (c.value("type", "") == "PodScheduled") message = c.value("message", "");
          }
        }
        return message.find("data locality") != std::string::npos;
      },
      20))
      << message;
  EXPECT_TRUE(node_of("waiter").empty());
}

// Pre-staging (--prestage-datasets): a gang that waits for room has its dataset asked for on
// the node it is likely to get (annotation stage.data.tessera.io/NAME); the test plays the
// node's data agent, labels that node when "copied", and the gang lands there once room frees.
TEST_P(KubeData, AWaitingGangsDatasetIsAskedForOnTheNodeItWillGet) {
  start_cluster(2, 4);
  create_namespace("team-a");
  SchedulerOptions opt = scheduler_options();
  opt.prestage_datasets = 1;
  start_scheduler(opt);
  create_pod("team-a", "big", 4);
  create_pod("team-a", "small", 2);
  ASSERT_TRUE(wait_for([&] { return !node_of("big").empty() && !node_of("small").empty(); }, 20));
  // A 4-GPU reader waits; the node with 2 free GPUs is where it is likely to start.
  json reader = pod_json("team-a", "reader", 4);
  reader["metadata"]["annotations"][kDatasetAnnotation] = "imagenet";
  post_pod(reader);
  const std::string likely = node_of("small");
  const std::string key = std::string(kStageAnnotationPrefix) + "imagenet";
  const auto node = [&](const std::string& name) {
    return api("GET", "/api/v1/nodes/" + name).json_body();
  };
  ASSERT_TRUE(wait_for(
      [&] {
        const json n = node(likely);
        return n["metadata"].value("annotations", json::object()).contains(key);
      },
      20));
  // The value names the gang (ns/group; a lone pod's group is empty).
  EXPECT_EQ(node(likely)["metadata"]["annotations"][key].get<std::string>().rfind("team-a/", 0), 0u)
      << node(likely).dump();
  // Only one ask at once: the other node was not asked.
  const std::string other = node_of("big");
  EXPECT_FALSE(node(other)["metadata"].value("annotations", json::object()).contains(key));
  // The agent copies and labels the node; the space frees; the reader goes to its data.
  const auto r =
      api("PATCH", "/api/v1/nodes/" + likely,
          json{{"metadata", {{"labels", {{std::string(kDataLabelPrefix) + "imagenet", "true"}}}}}}
              .dump(),
          "application/merge-patch+json");
  ASSERT_EQ(r.status, 200) << r.body;
  for (const char* gone : {"small", "big"}) {
    const auto d = api("DELETE", std::string("/api/v1/namespaces/team-a/pods/") + gone);
    ASSERT_LT(d.status, 300) << d.body;
  }
  ASSERT_TRUE(wait_for([&] { return !node_of("reader").empty(); }, 20));
  EXPECT_EQ(node_of("reader"), likely);
}

// An ask for a gang that is gone (its pods deleted) is withdrawn from the node: a data agent
// does not stage what nobody waits for.
TEST_P(KubeData, AnAskIsWithdrawnWhenItsPodsGo) {
  start_cluster(1, 4);
  create_namespace("team-a");
  SchedulerOptions opt = scheduler_options();
  opt.prestage_datasets = 1;
  start_scheduler(opt);
  create_pod("team-a", "holder", 4);
  ASSERT_TRUE(wait_for([&] { return !node_of("holder").empty(); }, 20));
  json reader = pod_json("team-a", "reader", 4);
  reader["metadata"]["annotations"][kDatasetAnnotation] = "imagenet";
  post_pod(reader);
  const std::string node = node_of("holder");
  const std::string key = std::string(kStageAnnotationPrefix) + "imagenet";
  const auto asked = [&] {
    const json n = api("GET", "/api/v1/nodes/" + node).json_body();
    return n["metadata"].value("annotations", json::object()).contains(key);
  };
  ASSERT_TRUE(wait_for(asked, 20));
  const auto d = api("DELETE", "/api/v1/namespaces/team-a/pods/reader");
  ASSERT_LT(d.status, 300) << d.body;
  EXPECT_TRUE(wait_for([&] { return !asked(); }, 20)) << "the ask stayed on " << node;
}

KUBE_ON_BOTH_TARGETS(KubeData);

}  // namespace
}  // namespace tessera::kube
