// Watch semantics: resume after a resourceVersion, synthetic ADDED, selector transitions,
// bookmarks, 410 Expired (in-stream and as HTTP), dropped streams and timeouts.
#include "kube_emulator/emulator_test_util.h"

namespace kube_emulator::testing {
namespace {

class WatchTest : public ::testing::Test {
 protected:
  void start(Options o = small_options()) {
    emu_ = std::make_unique<Emulator>(o);
    emu_->start();
    http_ = std::make_unique<Http>(emu_->port());
  }
  void SetUp() override {
    Options o = small_options();
    o.kubelet.enabled = false;
    o.bookmark_interval = std::chrono::milliseconds(200);
    o.history = 50;
    start(o);
  }
  std::string rv_now() {
    return http_->get("/api/v1/pods?limit=1").body["metadata"]["resourceVersion"];
  }
  std::unique_ptr<Emulator> emu_;
  std::unique_ptr<Http> http_;
};

TEST_F(WatchTest, ResumesStrictlyAfterTheResourceVersion) {
  auto a = http_->post("/api/v1/namespaces/default/pods", pod_json("a"));
  const std::string rv_a = a.body["metadata"]["resourceVersion"];
  http_->post("/api/v1/namespaces/default/pods", pod_json("b"));
  WatchReader w(emu_->port(), "/api/v1/pods?watch=1&resourceVersion=" + rv_a);
  auto e = w.next_change();
  ASSERT_TRUE(e);
  EXPECT_EQ((*e)["type"], "ADDED");
  EXPECT_EQ((*e)["object"]["metadata"]["name"], "b");
  http_->patch("/api/v1/namespaces/default/pods/a", {{"metadata", {{"labels", {{"x", "1"}}}}}},
               "application/merge-patch+json");
  e = w.next_change();
  ASSERT_TRUE(e);
  EXPECT_EQ((*e)["type"], "MODIFIED");
  http_->del("/api/v1/namespaces/default/pods/b");
  e = w.next_change();
  ASSERT_TRUE(e);
  EXPECT_EQ((*e)["type"], "DELETED");
  EXPECT_EQ((*e)["object"]["metadata"]["name"], "b");
}

TEST_F(WatchTest, WithoutResourceVersionStartsWithSyntheticAdded) {
  http_->post("/api/v1/namespaces/default/pods", pod_json("a"));
  WatchReader w(emu_->port(), "/api/v1/namespaces/default/pods?watch=true");
  auto e = w.next_change();
  ASSERT_TRUE(e);
  EXPECT_EQ((*e)["type"], "ADDED");
  EXPECT_EQ((*e)["object"]["metadata"]["name"], "a");
  // Nodes too (four of them), then nothing more.
  WatchReader n(emu_->port(), "/api/v1/nodes?watch=1&resourceVersion=0");
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(n.next_change());
  EXPECT_FALSE(n.next_change(300ms));
}

TEST_F(WatchTest, SelectorTransitionsAreAddedAndDeleted) {
  http_->post("/api/v1/namespaces/default/pods", pod_json("a"));
  const std::string rv = rv_now();
  WatchReader pending(emu_->port(), "/api/v1/pods?watch=1&resourceVersion=" + rv +
                                        "&fieldSelector=spec.nodeName%3D");
  WatchReader bound(emu_->port(), "/api/v1/pods?watch=1&resourceVersion=" + rv +
                                      "&fieldSelector=spec.nodeName!%3D");
  http_->post("/api/v1/namespaces/default/pods/a/binding", binding_json("a", "gpu-node-0000"));
  auto e = pending.next_change();
  ASSERT_TRUE(e);
  EXPECT_EQ((*e)["type"], "DELETED");  // left the unbound selection
  EXPECT_EQ((*e)["object"]["metadata"]["name"], "a");
  auto b = bound.next_change();
  ASSERT_TRUE(b);
  EXPECT_EQ((*b)["type"], "ADDED");
  EXPECT_EQ((*b)["object"]["spec"]["nodeName"], "gpu-node-0000");
  EXPECT_EQ((*e)["object"]["metadata"]["resourceVersion"],
            (*b)["object"]["metadata"]["resourceVersion"]);
}

TEST_F(WatchTest, BookmarksCarryOnlyTheResourceVersion) {
  WatchReader w(emu_->port(),
                "/api/v1/pods?watch=1&allowWatchBookmarks=true&resourceVersion=" + rv_now());
  http_->post("/api/v1/namespaces/default/configmaps", {{"metadata", {{"name", "c"}}}});
  std::optional<json> bm;
  for (int i = 0; i < 10 && !bm; ++i) {
    auto e = w.next(2000ms);
    ASSERT_TRUE(e);
    if ((*e)["type"] == "BOOKMARK") bm = e;
  }
  ASSERT_TRUE(bm);
  EXPECT_EQ((*bm)["object"]["kind"], "Pod");
  EXPECT_GE(std::stoull((*bm)["object"]["metadata"]["resourceVersion"].get<std::string>()),
            emu_->resource_version() - 0);
  // No bookmarks unless asked for.
  WatchReader quiet(emu_->port(), "/api/v1/pods?watch=1&resourceVersion=" + rv_now());
  EXPECT_FALSE(quiet.next(600ms));
}

TEST_F(WatchTest, TooOldResourceVersionIsExpiredInStream) {
  const std::string old = rv_now();
  for (int i = 0; i < 60; ++i) {  // history is 50 events
    http_->post("/api/v1/namespaces/default/pods", pod_json("p" + std::to_string(i)));
  }
  WatchReader w(emu_->port(), "/api/v1/pods?watch=1&resourceVersion=" + old);
  auto e = w.next();
  ASSERT_TRUE(e);
  EXPECT_EQ((*e)["type"], "ERROR");
  EXPECT_EQ((*e)["object"]["code"], 410);
  EXPECT_EQ((*e)["object"]["reason"], "Expired");
  EXPECT_TRUE(w.wait_ended());
  EXPECT_EQ(w.status(), 200);
}

TEST_F(WatchTest, TooOldResourceVersionAsHttp410) {
  Options o = small_options();
  o.history = 5;
  o.watch_expired_as_http_410 = true;
  start(o);
  const std::string old = rv_now();
  for (int i = 0; i < 10; ++i)
    http_->post("/api/v1/namespaces/default/pods", pod_json("p" + std::to_string(i)));
  auto r = http_->get("/api/v1/pods?watch=1&resourceVersion=" + old);
  EXPECT_EQ(r.status, 410);
  EXPECT_EQ(r.body["reason"], "Expired");
}

TEST_F(WatchTest, CompactionExpiresOpenWatchesAndOldResourceVersions) {
  const std::string rv = rv_now();
  WatchReader w(emu_->port(), "/api/v1/pods?watch=1&resourceVersion=" + rv);
  std::this_thread::sleep_for(100ms);
  emu_->compact();
  auto e = w.next();
  ASSERT_TRUE(e);
  EXPECT_EQ((*e)["type"], "ERROR");
  EXPECT_EQ((*e)["object"]["code"], 410);
  EXPECT_TRUE(w.wait_ended());
  http_->post("/api/v1/namespaces/default/pods", pod_json("new"));
  WatchReader again(emu_->port(), "/api/v1/pods?watch=1&resourceVersion=" + rv);
  auto e2 = again.next();
  ASSERT_TRUE(e2);
  EXPECT_EQ((*e2)["type"], "ERROR");
}

TEST_F(WatchTest, DroppedStreamsEndAndClientsCanResume) {
  const std::string rv = rv_now();
  WatchReader w(emu_->port(), "/api/v1/pods?watch=1&resourceVersion=" + rv);
  ASSERT_TRUE(eventually([&] { return emu_->open_watches() == 1; }));
  http_->post("/emulator/drop-watches", json::object());
  EXPECT_TRUE(w.wait_ended());
  http_->post("/api/v1/namespaces/default/pods", pod_json("after"));
  WatchReader resumed(emu_->port(), "/api/v1/pods?watch=1&resourceVersion=" + rv);
  auto e = resumed.next_change();
  ASSERT_TRUE(e);
  EXPECT_EQ((*e)["object"]["metadata"]["name"], "after");
}

TEST_F(WatchTest, TimeoutSecondsEndsTheStreamAndClosedClientsAreNoticed) {
  WatchReader w(emu_->port(), "/api/v1/pods?watch=1&timeoutSeconds=1&resourceVersion=" + rv_now());
  EXPECT_TRUE(w.wait_ended(4000ms));
  {
    WatchReader gone(emu_->port(), "/api/v1/nodes?watch=1&resourceVersion=" + rv_now());
    ASSERT_TRUE(eventually([&] { return emu_->open_watches() == 1; }));
  }
  EXPECT_TRUE(eventually([&] { return emu_->open_watches() == 0; }, 4000ms));
}

TEST_F(WatchTest, EventsOfBothApiGroupsShareOneStore) {
  WatchReader core(emu_->port(),
                   "/api/v1/namespaces/default/events?watch=1&resourceVersion=" + rv_now());
  json ev = {{"apiVersion", "events.k8s.io/v1"},
             {"kind", "Event"},
             {"metadata", {{"generateName", "p-"}, {"namespace", "default"}}},
             {"eventTime", "2026-01-01T00:00:00.000000Z"},
             {"type", "Warning"},
             {"reason", "FailedScheduling"},
             {"action", "Scheduling"},
             {"note", "0/4 nodes"},
             {"reportingController", "tessera.io/scheduler"},
             {"reportingInstance", "t-0"},
             {"regarding",
              {{"apiVersion", "v1"},
               {"kind", "Pod"},
               {"namespace", "default"},
               {"name", "p"},
               {"uid", "u1"}}}};
  auto created = http_->post("/apis/events.k8s.io/v1/namespaces/default/events", ev);
  ASSERT_EQ(created.status, 201) << created.text;
  EXPECT_EQ(created.body["note"], "0/4 nodes");
  auto e = core.next_change();
  ASSERT_TRUE(e);
  EXPECT_EQ((*e)["object"]["apiVersion"], "v1");
  EXPECT_EQ((*e)["object"]["message"], "0/4 nodes");
  EXPECT_EQ((*e)["object"]["involvedObject"]["name"], "p");
  EXPECT_EQ((*e)["object"]["reportingComponent"], "tessera.io/scheduler");
  auto listed = http_->get(
      "/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3Dp,"
      "involvedObject.namespace%3Ddefault,involvedObject.uid%3Du1");
  ASSERT_EQ(listed.body["items"].size(), 1u) << listed.text;
  // A core/v1 event reads back through events.k8s.io/v1.
  json core_ev = {{"metadata", {{"name", "e2"}}},
                  {"involvedObject", {{"kind", "Pod"}, {"name", "q"}}},
                  {"reason", "Scheduled"},
                  {"message", "assigned"},
                  {"type", "Normal"},
                  {"source", {{"component", "tessera"}}},
                  {"count", 1}};
  ASSERT_EQ(http_->post("/api/v1/namespaces/default/events", core_ev).status, 201);
  auto v1 = http_->get("/apis/events.k8s.io/v1/namespaces/default/events/e2");
  EXPECT_EQ(v1.body["note"], "assigned");
  EXPECT_EQ(v1.body["regarding"]["name"], "q");
  EXPECT_EQ(v1.body["deprecatedCount"], 1);
}

}  // namespace
}  // namespace kube_emulator::testing
