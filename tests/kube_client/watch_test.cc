#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "backend/kube/kube_client.h"
#include "kube_client/test_server.h"

namespace tessera::kube {
namespace {

using testing::TestServer;

// Streams `chunks` (with a pause between them so that they arrive apart), then ends.
void stream(httplib::Response& res, std::vector<std::string> chunks, bool finish = true) {
  res.set_chunked_content_provider(
      "application/json", [chunks, finish](size_t, httplib::DataSink& sink) {
        for (const auto& c : chunks) {
          if (!sink.write(c.data(), c.size())) return false;
          std::this_thread::sleep_for(std::chrono::milliseconds(15));
        }
        if (!finish) return false;  // drop the connection without ending the stream
        sink.done();
        return true;
      });
}

std::string ev(const std::string& type, const std::string& name, const std::string& rv) {
  return R"({"type":")" + type + R"(","object":{"metadata":{"name":")" + name +
         R"(","resourceVersion":")" + rv + R"("}}})";
}

class WatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_.svr().Get("/chunks", [](const httplib::Request&, httplib::Response& res) {
      std::string a = ev("ADDED", "a", "1"), b = ev("MODIFIED", "b", "2"),
                  c = ev("DELETED", "c", "3"), d = ev("ADDED", "d", "4");
      stream(res, {a + "\n" + b + "\r\n" + c.substr(0, 10), c.substr(10, 7), c.substr(17) + "\n",
                   "\n", d});  // several per chunk, one split in three, a blank line, no final \n
    });
    server_.svr().Get("/gone", [](const httplib::Request&, httplib::Response& res) {
      res.status = 410;
      res.set_content(R"({"kind":"Status","code":410,"reason":"Expired"})", "application/json");
    });
    server_.svr().Get("/garbage", [](const httplib::Request&, httplib::Response& res) {
      stream(res, {ev("ADDED", "a", "1") + "\n{not json\n" + ev("ADDED", "b", "2") + "\n"});
    });
    server_.svr().Get("/hang", [this](const httplib::Request&, httplib::Response& res) {
      res.set_chunked_content_provider("application/json", [this](size_t, httplib::DataSink& sink) {
        std::string e = ev("ADDED", "a", "1") + "\n";
        sink.write(e.data(), e.size());
        while (!server_.closing() && !release_) {
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        sink.done();
        return true;
      });
    });
    server_.svr().Get("/prefix/hang", [this](const httplib::Request&, httplib::Response& res) {
      res.set_chunked_content_provider("application/json", [this](size_t, httplib::DataSink&) {
        while (!server_.closing() && !release_) {
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        return false;
      });
    });
    server_.start();
    KubeConfig cfg;
    cfg.server = server_.url();
    client_ = std::make_unique<Client>(cfg);
  }
  void TearDown() override { release_ = true; }

  TestServer server_;
  std::atomic<bool> release_{false};
  std::unique_ptr<Client> client_;
};

TEST_F(WatchTest, SplitsLinesAcrossAndWithinChunks) {
  std::atomic<bool> stop{false};
  std::vector<std::string> got;
  WatchEnd end = client_->watch(
      "/chunks?watch=1",
      [&](const WatchEvent& e) {
        got.push_back(e.type + ":" + e.object["metadata"]["name"].get<std::string>());
        return true;
      },
      stop);
  EXPECT_EQ(end.status, 200);
  EXPECT_FALSE(end.stopped);
  EXPECT_EQ(end.error, "");
  EXPECT_EQ(got, (std::vector<std::string>{"ADDED:a", "MODIFIED:b", "DELETED:c", "ADDED:d"}));
}

TEST_F(WatchTest, HandlerCanStop) {
  std::atomic<bool> stop{false};
  int n = 0;
  WatchEnd end = client_->watch(
      "/chunks?watch=1", [&](const WatchEvent&) { return ++n < 2; }, stop);
  EXPECT_TRUE(end.stopped);
  EXPECT_EQ(n, 2);
}

TEST_F(WatchTest, Non200ReturnsStatusAndBody) {
  std::atomic<bool> stop{false};
  int n = 0;
  WatchEnd end = client_->watch(
      "/gone?watch=1", [&](const WatchEvent&) { return ++n > 0; }, stop);
  EXPECT_EQ(end.status, 410);
  EXPECT_NE(end.error.find("Expired"), std::string::npos) << end.error;
  EXPECT_EQ(n, 0);
}

TEST_F(WatchTest, MalformedLineEndsWithError) {
  std::atomic<bool> stop{false};
  int n = 0;
  WatchEnd end = client_->watch(
      "/garbage?watch=1", [&](const WatchEvent&) { return ++n > 0; }, stop);
  EXPECT_EQ(n, 1);
  EXPECT_NE(end.error.find("malformed"), std::string::npos) << end.error;
}

TEST_F(WatchTest, StopEndsABlockedWatchPromptly) {
  for (const char* path : {"/hang?watch=1", "/prefix/hang?watch=1"}) {
    std::atomic<bool> stop{false};
    std::atomic<int> n{0};
    auto t0 = std::chrono::steady_clock::now();
    std::thread stopper([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      stop = true;
    });
    WatchEnd end = client_->watch(
        path, [&](const WatchEvent&) { return ++n > 0; }, stop);
    auto took = std::chrono::steady_clock::now() - t0;
    stopper.join();
    EXPECT_TRUE(end.stopped) << path;
    EXPECT_LT(took, std::chrono::milliseconds(1300)) << path;
  }
}

TEST_F(WatchTest, HandlerExceptionPropagates) {
  std::atomic<bool> stop{false};
  EXPECT_THROW(
      client_->watch(
          "/hang?watch=1", [](const WatchEvent&) -> bool { throw std::runtime_error("x"); }, stop),
      std::runtime_error);
}

TEST_F(WatchTest, AlreadyStopped) {
  std::atomic<bool> stop{true};
  WatchEnd end = client_->watch(
      "/chunks?watch=1", [](const WatchEvent&) { return true; }, stop);
  EXPECT_TRUE(end.stopped);
  EXPECT_EQ(end.status, 0);
}

TEST_F(WatchTest, IdleTimeoutEndsASilentStream) {
  KubeConfig cfg;
  cfg.server = server_.url();
  ClientOptions opt;
  opt.watch_idle_timeout = std::chrono::milliseconds(300);
  Client c(cfg, opt);
  std::atomic<bool> stop{false};
  int n = 0;
  auto t0 = std::chrono::steady_clock::now();
  WatchEnd end = c.watch(
      "/hang?watch=1", [&](const WatchEvent&) { return ++n > 0; }, stop);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(1500));
  EXPECT_EQ(n, 1);
  EXPECT_FALSE(end.stopped);
  EXPECT_EQ(end.status, 200);
  EXPECT_FALSE(end.error.empty());
}

}  // namespace
}  // namespace tessera::kube
