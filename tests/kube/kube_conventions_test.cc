// The gang conventions of the schedulers users come from, end to end on both targets: a
// Volcano gang (annotation and scheduling.volcano.sh PodGroup), a Kueue plain-pod group (label
// and total count, no object), and a lone pod, each as the read API and `tessera job` show it.
#include <httplib.h>

#include <thread>

#include "api/kube_api.h"
#include "kube/kube_env.h"

namespace tessera::kube {
namespace {

using nlohmann::json;

// The scheduler's read API on a loopback port, open, served until it goes out of scope.
class ReadApi {
 public:
  explicit ReadApi(KubeScheduler& sched) : api_(sched, KubeReadAccess::open()) {
    port_ = api_.bind("127.0.0.1", 0);
    serving_ = std::thread([this] { api_.run(); });
  }
  ~ReadApi() {
    api_.stop();
    serving_.join();
  }
  json get(const std::string& path) {
    const auto res = httplib::Client("127.0.0.1", port_).Get(path);
    if (!res || res->status != 200) return json{{"error", res ? res->body : "no answer"}};
    return json::parse(res->body, nullptr, false);
  }

 private:
  KubeApiServer api_;
  int port_ = 0;
  std::thread serving_;
};

class KubeConventions : public testing::KubeEnvOnBoth {
 protected:
  void SetUp() override {
    KubeEnvOnBoth::SetUp();
    start_cluster(2);  // 16 GPUs
    if (on_apiserver()) {
      std::string out;
      ASSERT_EQ(real_->kubectl("apply -f " + std::string(TESSERA_SOURCE_DIR) +
                                   "/tests/kube/support/volcano-podgroup-crd.yaml",
                               &out),
                0)
          << out;
      ASSERT_EQ(real_->kubectl("wait --for condition=established --timeout=60s "
                               "crd/podgroups.scheduling.volcano.sh",
                               &out),
                0)
          << out;
    }
    create_namespace("team-a");
  }

  void create_volcano_group(const std::string& ns, const std::string& name, int min_member,
                            const std::string& queue) {
    json spec{{"minMember", min_member}};
    if (!queue.empty()) spec["queue"] = queue;
    const auto r =
        api("POST", "/apis/scheduling.volcano.sh/v1beta1/namespaces/" + ns + "/podgroups",
            json{{"apiVersion", "scheduling.volcano.sh/v1beta1"},
                 {"kind", "PodGroup"},
                 {"metadata", {{"name", name}, {"namespace", ns}}},
                 {"spec", spec}}
                .dump());
    ASSERT_EQ(r.status, 201) << r.body;
  }

  // Pods of `ns` bound to a node, by name.
  std::set<std::string> bound(const std::string& ns) {
    std::set<std::string> out;
    const json listed = api("GET", "/api/v1/namespaces/" + ns + "/pods").json_body();
    for (const json& p : listed["items"]) {
      if (!p["spec"].value("nodeName", "").empty()) out.insert(p["metadata"].value("name", ""));
    }
    return out;
  }
  size_t bound_with_prefix(const std::string& ns, const std::string& prefix) {
    size_t n = 0;
    for (const std::string& name : bound(ns)) n += name.rfind(prefix, 0) == 0 ? 1 : 0;
    return n;
  }
};

TEST_P(KubeConventions, AVolcanoGangAndAKueueGroupStartWholeOnlyOnceAllTheirPodsExist) {
  start_scheduler(R"(queues:
  - name: team-a
  - name: research
    namespaces: [team-a]
)");
  // Volcano: four pods of two GPUs, minMember 4; its queue from the PodGroup's spec.queue.
  create_volcano_group("team-a", "vc", 4, "research");
  for (int i = 0; i < 3; ++i) {
    json pod = pod_json("team-a", "vc-" + std::to_string(i), 2);
    pod["metadata"]["annotations"][kVolcanoGroupAnnotation] = "vc";
    post_pod(pod);
  }
  // Kueue: three pods, the group's total count on each.
  for (int i = 0; i < 2; ++i) {
    json pod = pod_json("team-a", "kq-" + std::to_string(i), 2);
    pod["metadata"]["labels"][kKueueGroupLabel] = "kq";
    pod["metadata"]["annotations"][kKueueGroupCountAnnotation] = "3";
    post_pod(pod);
  }
  // Both say they wait for their missing pods, and nothing of either is bound.
  ASSERT_TRUE(wait_for(
      [&] {
        return waiting_message("team-a", "vc-0").find("3 of minMember 4 exist") !=
                   std::string::npos &&
               waiting_message("team-a", "kq-0").find("2 of minMember 3 exist") !=
                   std::string::npos;
      },
      30))
      << waiting_message("team-a", "vc-0") << " / " << waiting_message("team-a", "kq-0");
  EXPECT_TRUE(bound("team-a").empty());
  // The read API says so too: reason GangPods, with the class its queue gives it.
  ReadApi read_api(*sched_);
  {
    const json waiting = read_api.get("/v1/jobs")["jobs"];
    ASSERT_EQ(waiting.size(), 2u) << waiting.dump();
    for (const json& j : waiting) {
      EXPECT_EQ(j.value("reason", ""), "GangPods") << j.dump();
      EXPECT_FALSE(j.value("priority_class", "").empty()) << j.dump();
    }
  }

  {
    json pod = pod_json("team-a", "vc-3", 2);
    pod["metadata"]["annotations"][kVolcanoGroupAnnotationNew] = "vc";  // the newer key
    post_pod(pod);
    pod = pod_json("team-a", "kq-2", 2);
    pod["metadata"]["labels"][kKueueGroupLabel] = "kq";
    pod["metadata"]["annotations"][kKueueGroupCountAnnotation] = "3";
    post_pod(pod);
  }
  create_pod("team-a", "solo", 1);
  ASSERT_TRUE(wait_for([&] { return bound("team-a").size() == 8; }, 30))
      << bound("team-a").size() << " of 8 bound; vc-0: " << waiting_message("team-a", "vc-0")
      << "; kq-0: " << waiting_message("team-a", "kq-0")
      << "; solo: " << waiting_message("team-a", "solo");
  EXPECT_EQ(bound_with_prefix("team-a", "vc-"), 4u);
  EXPECT_EQ(bound_with_prefix("team-a", "kq-"), 3u);

  // The Volcano PodGroup's status is written in Volcano's terms.
  ASSERT_TRUE(wait_for(
      [&] {
        return api("GET", "/apis/scheduling.volcano.sh/v1beta1/namespaces/team-a/podgroups/vc")
                   .json_body()
                   .value("status", json::object())
                   .value("phase", "") == "Running";
      },
      30));

  // The read API: gangs by namespace/group, the lone pod by namespace/name, each with its
  // queue; the Volcano gang's history says where its pods went.
  const json jobs = read_api.get("/v1/jobs")["jobs"];
  std::map<std::string, json> by_name;
  for (const json& j : jobs) by_name[j.value("name", "")] = j;
  ASSERT_EQ(by_name.count("team-a/vc"), 1u) << jobs.dump();
  ASSERT_EQ(by_name.count("team-a/kq"), 1u) << jobs.dump();
  ASSERT_EQ(by_name.count("team-a/solo"), 1u) << jobs.dump();
  EXPECT_EQ(by_name["team-a/vc"].value("queue", ""), "research") << jobs.dump();
  EXPECT_EQ(by_name["team-a/vc"].value("tenant", ""), "research") << jobs.dump();
  EXPECT_EQ(by_name["team-a/kq"].value("queue", ""), "team-a") << jobs.dump();
  EXPECT_EQ(by_name["team-a/solo"].value("queue", ""), "team-a") << jobs.dump();
  EXPECT_FALSE(by_name["team-a/solo"].value("priority_class", "").empty()) << jobs.dump();
  // How kubectl finds each one's pods: Kueue's by its label; Volcano's annotation selects
  // nothing, so its pods by name; the lone pod by its name.
  EXPECT_EQ(by_name["team-a/kq"]["kube"].value("selector", ""), "kueue.x-k8s.io/pod-group-name=kq");
  EXPECT_EQ(by_name["team-a/vc"]["kube"].value("selector", ""), "");
  EXPECT_EQ(by_name["team-a/vc"]["kube"]["pods"].size(), 4u) << jobs.dump();
  EXPECT_EQ(by_name["team-a/solo"]["kube"]["pods"], json::array({"solo"})) << jobs.dump();
  const json history =
      read_api.get("/v1/jobs/" + std::to_string(by_name["team-a/vc"].value("id", 0)) + "/events");
  int scheduled = 0;
  for (const json& e : history.value("events", json::array())) {
    if (e.value("type", "") == "Scheduled") ++scheduled;
  }
  EXPECT_EQ(scheduled, 4) << history.dump();
}

KUBE_ON_BOTH_TARGETS(KubeConventions);

}  // namespace
}  // namespace tessera::kube
