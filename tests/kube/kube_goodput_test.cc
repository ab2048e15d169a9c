// `tessera kube --policy goodput` against the API-server emulator: an adaptive pod group is bound
// at the size its goodput round gives it, its pods told their rank, world size, batch and report
// token on the Binding; it reports over HTTP, and the next round evicts it whole and binds it
// again, larger, once its "controller" (the test) has made its pods again.
#include <gtest/gtest.h>
#include <httplib.h>

#include <set>
#include <string>
#include <thread>

#include "api/kube_api.h"
#include "kube_env.h"

namespace tessera::kube {
namespace {

using nlohmann::json;
using testing::KubeEnv;

class KubeGoodput : public testing::KubeEnvOnBoth {
 protected:
  static json adaptive_pod(const std::string& name) {
    json p = pod_json("team-a", name, 1, "train");
    p["metadata"]["annotations"][kAdaptiveBatchAnnotation] = "128";
    p["metadata"]["annotations"][kAdaptiveMaxBatchAnnotation] = "4096";
    p["metadata"]["annotations"][kAdaptivePerGpuAnnotation] = "8-64";
    return p;
  }
  // The group's pods that are bound and not being deleted, by name.
  std::map<std::string, json> bound() {
    std::map<std::string, json> out;
    for (const json& p : pods()) {
      if (p["spec"].value("nodeName", "").empty()) continue;
      if (p["metadata"].contains("deletionTimestamp")) continue;
      out[p["metadata"]["name"].get<std::string>()] = p;
    }
    return out;
  }
  // Each pod's node and what its condition says, for a failure's message.
  std::string said() {
    std::string out;
    for (const json& p : pods()) {
      out += "\n" + p["metadata"]["name"].get<std::string>() + " on '" +
             p["spec"].value("nodeName", "") + "'" +
             (p["metadata"].contains("deletionTimestamp") ? " (deleting)" : "");
      for (const json& c : p["status"].value("conditions", json::array())) {
        if (c.value("type", "") == "PodScheduled") out += ": " + c.value("message", "");
      }
    }
    return out;
  }
  static std::string note(const json& pod, const char* key) {
    return pod["metadata"]["annotations"].value(key, "");
  }
};

TEST_P(KubeGoodput, AGroupStartsAtItsRoundsSizeReportsAndIsRestartedLarger) {
  start_cluster(2, 4);  // 8 GPUs
  create_namespace("team-a");
  SchedulerOptions opt = scheduler_options();
  opt.policy = "goodput";
  opt.goodput_round = 1;
  start_scheduler(opt);
  create_group("team-a", "train", 1);
  for (int i = 0; i < 8; ++i) post_pod(adaptive_pod("train-" + std::to_string(i)));

  // Never reported: 4 GPUs (4 x one member's), the batch it was tuned for; each bound pod told
  // its rank, the world size and the group's report token.
  ASSERT_TRUE(wait_for([&] { return bound().size() == 4; }, 20)) << bound().size() << said();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto first = bound();
  ASSERT_EQ(first.size(), 4u);
  std::set<std::string> ranks;
  std::string token;
  for (const auto& [name, p] : first) {
    EXPECT_EQ(note(p, kWorldSizeAnnotation), "4") << name;
    EXPECT_EQ(note(p, kGpusAnnotation), "4");
    EXPECT_EQ(note(p, kBatchSizeAnnotation), "128");
    EXPECT_EQ(note(p, kMicroBatchAnnotation), "32");
    ranks.insert(note(p, kRankAnnotation));
    token = note(p, kReportTokenAnnotation);
  }
  EXPECT_EQ(ranks, (std::set<std::string>{"0", "1", "2", "3"}));
  ASSERT_EQ(token.size(), 64u);
  // The other four wait, saying why (once the reason has held a second).
  EXPECT_TRUE(wait_for(
      [&] {
        for (const json& p : pods()) {
          for (const json& c : p["status"].value("conditions", json::array())) {
            if (c.value("message", "").find("adaptive: runs with the 4 members") !=
                std::string::npos) {
              return true;
            }
          }
        }
        return false;
      },
      10));

  // It reports over HTTP with its token: a step that scales, a noisy gradient.
  KubeApiServer read_api(*sched_, KubeReadAccess::open());
  const int port = read_api.bind("127.0.0.1", 0);
  std::thread serving([&] { read_api.run(); });
  httplib::Client http("127.0.0.1", port);
  const std::string body =
      R"({"step": {"gpus": 4, "per_gpu_batch": 32, "seconds": 0.2, "sync_seconds": 0.01},
          "gradient": {"sqr": 1, "var": 500}, "progress": {"done": 100, "total": 1000000}})";
  const auto forged =
      http.Post("/v1/groups/team-a/train/report",
                {{"Authorization", "Bearer " + std::string(64, 'a')}}, body, "application/json");
  ASSERT_TRUE(forged);
  EXPECT_EQ(forged->status, 401) << forged->body;
  const auto bad =
      http.Post("/v1/groups/team-a/train/report", {{"Authorization", "Bearer " + token}},
                R"({"step": {"gpus": 4, "per_gpu_batch": 32, "seconds": 0.2, "sync_seconds": 1}})",
                "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(json::parse(bad->body).value("field", ""), "step.sync_seconds") << bad->body;
  const auto ok = http.Post("/v1/groups/team-a/train/report",
                            {{"Authorization", "Bearer " + token}}, body, "application/json");
  ASSERT_TRUE(ok);
  ASSERT_EQ(ok->status, 200) << ok->body;
  const json answer = json::parse(ok->body);
  EXPECT_TRUE(answer["profiled"].get<bool>());
  EXPECT_EQ(answer["gpus"], 4);
  read_api.stop();
  serving.join();

  // The next round gives it all eight: its four pods are evicted, and once they are gone the
  // test (its controller) makes them again; then all eight are bound, told the new size.
  ASSERT_TRUE(wait_for(
      [&] {
        for (const json& p : pods()) {
          if (first.count(p["metadata"]["name"].get<std::string>()) != 0) return false;
        }
        return true;
      },
      20));
  EXPECT_EQ(sched_->metrics().resizes, 1u);
  for (const auto& [name, p] : first) post_pod(adaptive_pod(name));
  ASSERT_TRUE(wait_for([&] { return bound().size() == 8; }, 20)) << bound().size();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ranks.clear();
  for (const auto& [name, p] : bound()) {
    EXPECT_EQ(note(p, kWorldSizeAnnotation), "8") << name;
    EXPECT_EQ(note(p, kGpusAnnotation), "8");
    EXPECT_EQ(note(p, kReportTokenAnnotation), token);
    ranks.insert(note(p, kRankAnnotation));
  }
  EXPECT_EQ(ranks.size(), 8u);
  // The eviction said why, on the pods.
  bool resized = false;
  const json events = api("GET", "/api/v1/namespaces/team-a/events").json_body();
  for (const json& e : events["items"]) {
    resized =
        resized ||
        e.value("note", e.value("message", "")).find("resized by the goodput round: 4 -> 8 GPUs") !=
            std::string::npos;
  }
  EXPECT_TRUE(resized) << events.dump().substr(0, 2000);
}

TEST_P(KubeGoodput, MalformedAdaptiveAnnotationsAreSaidOnThePod) {
  start_cluster(1, 4);
  create_namespace("team-a");
  SchedulerOptions opt = scheduler_options();
  opt.policy = "goodput";
  start_scheduler(opt);
  create_group("team-a", "train", 1);
  json p = adaptive_pod("train-0");
  p["metadata"]["annotations"][kAdaptivePerGpuAnnotation] = "64-8";
  post_pod(p);
  std::string message;
  ASSERT_TRUE(wait_for(
      [&] {
        for (const json& q : pods()) {
          for (const json& c : q["status"].value("conditions", json::array())) {
            if (c.value("type", "") == "PodScheduled") message = c.value("message", "");
          }
        }
        return message.find(kAdaptivePerGpuAnnotation) != std::string::npos;
      },
      20))
      << message;
  EXPECT_TRUE(bound().empty());
}

KUBE_ON_BOTH_TARGETS(KubeGoodput);

}  // namespace
}  // namespace tessera::kube
