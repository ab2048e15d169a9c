#include "backend/kube/kube_client.h"

#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "kube_client/test_server.h"

namespace tessera::kube {
namespace {

using testing::TempDir;
using testing::TestServer;

struct Seen {
  std::string method, path, query_limit, auth, content_type, accept, user_agent, body;
};

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto record = [this](const httplib::Request& req, httplib::Response& res) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        seen_.push_back({req.method, req.path, req.get_param_value("limit"),
                         req.get_header_value("Authorization"),
                         req.get_header_value("Content-Type"), req.get_header_value("Accept"),
                         req.get_header_value("User-Agent"), req.body});
      }
      if (req.path.find("/missing") != std::string::npos) {
        res.status = 404;
        res.set_content(
            R"({"kind":"Status","status":"Failure","reason":"NotFound","message":"pods \"x\" not found","code":404})",
            "application/json");
        return;
      }
      res.set_content(R"({"kind":"Pod","metadata":{"name":"x"}})", "application/json");
    };
    server_.svr().Get(".*", record);
    server_.svr().Post(".*", record);
    server_.svr().Put(".*", record);
    server_.svr().Patch(".*", record);
    server_.svr().Delete(".*", record);
    server_.start();
  }
  KubeConfig config(const std::string& suffix = "") {
    KubeConfig cfg;
    cfg.server = server_.url() + suffix;
    cfg.token = TokenSource::fixed("s3cret");
    return cfg;
  }
  Seen last() {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_.back();
  }

  TestServer server_;
  std::mutex mu_;
  std::vector<Seen> seen_;
};

TEST_F(ClientTest, HeadersAndContentTypes) {
  Client c(config());
  Response r = c.get("/api/v1/pods?limit=5");
  ASSERT_EQ(r.status, 200) << r.error;
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.json()["kind"], "Pod");
  Seen s = last();
  EXPECT_EQ(s.method, "GET");
  EXPECT_EQ(s.path, "/api/v1/pods");
  EXPECT_EQ(s.query_limit, "5");
  EXPECT_EQ(s.auth, "Bearer s3cret");
  EXPECT_EQ(s.accept, "application/json");
  EXPECT_EQ(s.user_agent, "tessera-scheduler");

  nlohmann::json body = {{"apiVersion", "v1"}, {"kind", "Binding"}};
  ASSERT_TRUE(c.post("/api/v1/namespaces/ml/pods/p/binding", body).ok());
  s = last();
  EXPECT_EQ(s.method, "POST");
  EXPECT_EQ(s.content_type, "application/json");
  EXPECT_EQ(nlohmann::json::parse(s.body), body);
  ASSERT_TRUE(c.put("/x", body).ok());
  EXPECT_EQ(last().method, "PUT");
  EXPECT_EQ(last().content_type, "application/json");
  ASSERT_TRUE(c.patch("/x", body, PatchType::kMerge).ok());
  EXPECT_EQ(last().method, "PATCH");
  EXPECT_EQ(last().content_type, "application/merge-patch+json");
  ASSERT_TRUE(c.patch("/x", body, PatchType::kStrategicMerge).ok());
  EXPECT_EQ(last().content_type, "application/strategic-merge-patch+json");
  ASSERT_TRUE(c.patch("/x", nlohmann::json::array(), PatchType::kJsonPatch).ok());
  EXPECT_EQ(last().content_type, "application/json-patch+json");
  EXPECT_EQ(last().body, "[]");
  ASSERT_TRUE(c.del("/x").ok());
  EXPECT_EQ(last().method, "DELETE");
  EXPECT_EQ(last().body, "");
  ASSERT_TRUE(c.del("/x", {{"gracePeriodSeconds", 30}}).ok());
  EXPECT_EQ(last().content_type, "application/json");
  EXPECT_EQ(nlohmann::json::parse(last().body)["gracePeriodSeconds"], 30);
}

TEST_F(ClientTest, PathPrefixAndNoToken) {
  KubeConfig cfg = config("/k8s/clusters/c1/");
  cfg.token = nullptr;
  Client c(cfg, ClientOptions{2, std::chrono::milliseconds(5000), "ua-test"});
  ASSERT_TRUE(c.get("/api/v1/nodes").ok());
  EXPECT_EQ(last().path, "/k8s/clusters/c1/api/v1/nodes");
  EXPECT_EQ(last().auth, "");
  EXPECT_EQ(last().user_agent, "ua-test");
}

TEST_F(ClientTest, RotatedTokenIsSent) {
  TempDir dir;
  std::string path = dir.write("token", "one\n");
  KubeConfig cfg = config();
  cfg.token = TokenSource::file(path, std::chrono::seconds(0));
  Client c(cfg);
  ASSERT_TRUE(c.get("/a").ok());
  EXPECT_EQ(last().auth, "Bearer one");
  dir.write("token", "two\n");
  ASSERT_TRUE(c.get("/a").ok());
  EXPECT_EQ(last().auth, "Bearer two");
}

TEST_F(ClientTest, StatusDescribed) {
  Client c(config());
  Response r = c.get("/api/v1/namespaces/ml/pods/missing");
  EXPECT_EQ(r.status, 404);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.describe(), "HTTP 404 NotFound: pods \"x\" not found");
  Response none;
  none.error = "boom";
  EXPECT_EQ(none.describe(), "no answer: boom");
  Response text{500, "<html>", ""};
  EXPECT_TRUE(text.json().is_discarded());
}

TEST(ClientPool, ConcurrentRequestsShareAPool) {
  TestServer server;
  std::mutex mu;
  std::set<int> ports;
  std::atomic<int> answered{0};
  server.svr().Post("/bind", [&](const httplib::Request& req, httplib::Response& res) {
    {
      std::lock_guard<std::mutex> lock(mu);
      ports.insert(req.remote_port);
    }
    res.set_content("{}", "application/json");
  });
  server.start();
  KubeConfig cfg;
  cfg.server = server.url();
  Client c(cfg, ClientOptions{4, std::chrono::milliseconds(10000), "t"});
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        if (c.post("/bind", {{"i", i}}).ok()) answered++;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(answered.load(), 1600);
  EXPECT_LE(ports.size(), 4u);  // never more connections than the pool allows
  EXPECT_GE(ports.size(), 1u);
}

TEST(ClientNoServer, ConnectionRefusedIsNoAnswer) {
  TestServer s;
  int port = s.start();
  s.stop();
  KubeConfig cfg;
  cfg.server = "http://127.0.0.1:" + std::to_string(port);
  Client c(cfg, ClientOptions{1, std::chrono::milliseconds(1000), "t"});
  Response r = c.get("/api/v1/pods");
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.error.find("connection"), std::string::npos) << r.error;
}

TEST(ClientNoServer, BadServerUrl) {
  KubeConfig cfg;
  cfg.server = "ftp://x";
  EXPECT_THROW(Client c(cfg), KubeConfigError);
  cfg.server = "https://[::1:6443";
  EXPECT_THROW(Client c(cfg), KubeConfigError);
  cfg.server = "https://[::1]:6443";
  EXPECT_NO_THROW(Client c(cfg));
}

TEST(ClientRetry, UnansweredRequestIsNotRetried) {
  TestServer s;
  std::atomic<int> calls{0};
  s.svr().Post("/slow", [&](const httplib::Request&, httplib::Response& res) {
    calls++;
    std::this_thread::sleep_for(std::chrono::milliseconds(600));
    res.set_content("{}", "application/json");
  });
  s.start();
  KubeConfig cfg;
  cfg.server = s.url();
  Client c(cfg, ClientOptions{2, std::chrono::milliseconds(200), "t"});
  Response r = c.post("/slow", {{"a", 1}});
  EXPECT_EQ(r.status, 0);
  EXPECT_FALSE(r.error.empty());
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  EXPECT_EQ(calls.load(), 1);
}

TEST(ClientRetry, ConnectionClosedByServerWhileIdleIsReplaced) {
  TestServer s;
  std::set<int> ports;
  std::mutex mu;
  s.svr().set_keep_alive_timeout(1);  // the server closes idle connections after 1 s
  s.svr().set_keep_alive_max_count(100000);
  s.svr().Get("/x", [&](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(mu);
    ports.insert(req.remote_port);
    res.set_content("{}", "application/json");
  });
  s.start();
  KubeConfig cfg;
  cfg.server = s.url();
  Client c(cfg, ClientOptions{1, std::chrono::milliseconds(2000), "t"});
  ASSERT_TRUE(c.get("/x").ok());
  ASSERT_TRUE(c.get("/x").ok());
  EXPECT_EQ(ports.size(), 1u);  // kept alive
  std::this_thread::sleep_for(std::chrono::milliseconds(1600));
  Response r = c.get("/x");
  EXPECT_EQ(r.status, 200) << r.error;
  EXPECT_EQ(ports.size(), 2u);
}

}  // namespace
}  // namespace tessera::kube
