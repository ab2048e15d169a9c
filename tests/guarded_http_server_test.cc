// GuardedHttpServer and request framing: what a client that is slow, idle, greedy or
// malformed can do to an HTTP server, with limits small
// enough to reach in a test.
#include "api/guarded_http_server.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "api/http_util.h"
#include "api/request_framing.h"
#include "raw_socket.h"

namespace tessera {
namespace {

using namespace std::chrono_literals;
using testing::RawSocket;
using testing::status_of;

TEST(RequestFraming, FindsTheEndOfARequestAndItsBody) {
  const FramingLimits lim;
  Framing f = frame_request("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /next", lim);
  EXPECT_EQ(f.kind, Framing::kComplete);
  EXPECT_EQ(f.length, std::string("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").size());
  f = frame_request("POST /v1/jobs HTTP/1.1\r\nContent-Length: 5\r\n\r\nabc", lim);
  EXPECT_EQ(f.kind, Framing::kIncomplete);
  EXPECT_TRUE(f.headers_done);
  f = frame_request("POST /v1/jobs HTTP/1.1\r\ncontent-length:  5 \r\n\r\nabcdeGET", lim);
  EXPECT_EQ(f.kind, Framing::kComplete);
  EXPECT_EQ(f.length, f.length);
  // A POST without Content-Length has no body.
  f = frame_request("POST /x HTTP/1.1\r\nHost: y\r\n\r\n", lim);
  EXPECT_EQ(f.kind, Framing::kComplete);
  EXPECT_EQ(f.length, 29u);
  // Bare LF line ends and CONNECT are refused (and the connection closed with them).
  f = frame_request("POST /x HTTP/1.1\nHost: y\n\n", lim);
  EXPECT_EQ(f.kind, Framing::kRefused);
  EXPECT_EQ(f.status, 400);
  f = frame_request("GET /x HTTP/1.1\r\nHost: y\n\r\n", lim);
  EXPECT_EQ(f.kind, Framing::kRefused);
  f = frame_request("CONNECT 127.0.0.1:22 HTTP/1.1\r\nHost: y\r\n\r\n", lim);
  EXPECT_EQ(f.kind, Framing::kRefused);
  EXPECT_EQ(f.status, 501);
  EXPECT_EQ(frame_request("GET / HTTP/1.1\r\nHost: x\r\n", lim).kind, Framing::kIncomplete);
  EXPECT_EQ(leading_empty_lines("\r\n\r\nGET"), 4u);
}

TEST(RequestFraming, BrotliIsDroppedFromAcceptEncodingAndTheRestKept) {
  std::string r =
      "GET /ui/ HTTP/1.1\r\nHost: x\r\nACCEPT-Encoding: gzip, deflate, BR;q=1, zstd\r\n\r\n";
  drop_brotli(r);
  EXPECT_EQ(r, "GET /ui/ HTTP/1.1\r\nHost: x\r\nACCEPT-Encoding: gzip, deflate, zstd\r\n\r\n");
  std::string only = "GET / HTTP/1.1\r\nAccept-Encoding: br\r\n\r\nbody: br";
  drop_brotli(only);
  EXPECT_EQ(only, "GET / HTTP/1.1\r\nAccept-Encoding:\r\n\r\nbody: br");
  // Bare LF line ends (the framer accepts them): the next field and the body stay as they are.
  std::string lf =
      "GET / HTTP/1.1\nAccept-Encoding: gzip, br;\nContent-Length: 10\n\nAccept-Encoding: br\r\n";
  drop_brotli(lf);
  EXPECT_EQ(lf,
            "GET / HTTP/1.1\nAccept-Encoding: gzip\nContent-Length: 10\n\nAccept-Encoding: br\r\n");
  std::string body_only = "POST / HTTP/1.1\r\nHost: x\r\n\r\n\r\nAccept-Encoding: br\r\n";
  const std::string body_before = body_only;
  drop_brotli(body_only);
  EXPECT_EQ(body_only, body_before);
  std::string none = "GET / HTTP/1.1\r\nX-Accept-Encoding-Note: br\r\n\r\n";
  const std::string before = none;
  drop_brotli(none);
  EXPECT_EQ(none, before);
}

TEST(RequestFraming, RefusesWhatCannotBeBounded) {
  FramingLimits lim;
  lim.max_header_bytes = 1024;
  lim.max_body_bytes = 100;
  auto status = [&](const std::string& raw) {
    const Framing f = frame_request(raw, lim);
    return f.kind == Framing::kRefused ? f.status : 0;
  };
  EXPECT_EQ(status("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"), 411);
  EXPECT_EQ(status("POST / HTTP/1.1\r\nContent-Length: 101\r\n\r\n"), 413);
  EXPECT_EQ(status("POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n"), 413);
  EXPECT_EQ(status("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n"), 400);
  EXPECT_EQ(status("POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n"), 400);
  EXPECT_EQ(status("GET / HTTP/1.1\r\nX: " + std::string(2000, 'a')), 431);  // no end yet
  EXPECT_EQ(status("GET / HTTP/1.1\r\nX: " + std::string(2000, 'a') + "\r\n\r\n"), 431);
  EXPECT_EQ(status("GET / HTTP/2.0\r\n\r\n"), 505);
  EXPECT_EQ(status("GET /\r\n\r\n"), 400);
  EXPECT_EQ(status("GET / HTTP/1.1\r\nbad header\r\n\r\n"), 400);
  EXPECT_EQ(status("GET / HTTP/1.1\r\n: empty name\r\n\r\n"), 400);
}

// A server with a /fast and a /slow handler on a free port, with small limits.
class GuardedServerTest : public ::testing::Test {
 protected:
  void start(HttpLimits limits) {
    server_ = std::make_unique<GuardedHttpServer>(limits);
    server_->Get("/fast", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("fast\n", "text/plain");
    });
    server_->Post("/echo", [](const httplib::Request& req, httplib::Response& res) {
      res.set_content(req.body, "text/plain");
    });
    port_ = bind_server(*server_, "127.0.0.1", 0);
    thread_ = std::thread([this] { server_->listen_after_bind(); });
    addr_ = "127.0.0.1:" + std::to_string(port_);
  }
  void TearDown() override {
    if (server_) server_->shutdown();
    if (thread_.joinable()) thread_.join();
  }
  // GET /fast on a new connection; the status (0: no answer within a second).
  int fast(const std::string& from = "127.0.0.1") {
    RawSocket s(addr_, from);
    if (!s.ok() || !s.send("GET /fast HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")) {
      return 0;
    }
    return status_of(s.receive(1000ms, "fast\n"));
  }

  // Waits (up to 10 s) until the server has registered exactly `n` open connections: the
  // accept loop runs on its own thread, behind the client's connect.
  bool open_connections_reach(int64_t n) {
    for (int i = 0; i < 1000; ++i) {
      if (server_->stats().open_connections == n) return true;
      std::this_thread::sleep_for(10ms);
    }
    return false;
  }

  std::unique_ptr<GuardedHttpServer> server_;
  std::thread thread_;
  int port_ = 0;
  std::string addr_;
};

TEST_F(GuardedServerTest, IdleAndSlowConnectionsHoldNoWorker) {
  HttpLimits l;
  l.workers = 1;
  l.max_connections_per_client = 1000;
  start(l);
  std::vector<RawSocket> idle, slow;
  for (int i = 0; i < 300; ++i) idle.emplace_back(addr_);
  for (int i = 0; i < 70; ++i) {
    slow.emplace_back(addr_);
    slow.back().send("GET /fast HTTP/1.1\r\nX-Slow: ");
  }
  // One worker, 370 connections that hold it in httplib's model: every request still answers.
  for (int k = 0; k < 5; ++k) EXPECT_EQ(fast(), 200);
  for (RawSocket& s : slow) s.send("a");
  EXPECT_EQ(fast(), 200);
}

TEST_F(GuardedServerTest, SlowRequestsTimeOutAndIdleConnectionsClose) {
  HttpLimits l;
  l.header_timeout = 300ms;
  l.request_timeout = 600ms;
  l.idle_timeout = 300ms;
  start(l);
  RawSocket headers(addr_);
  headers.send("GET /fast HTTP/1.1\r\nX-Slow: a");
  RawSocket body(addr_);
  body.send("POST /echo HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc");
  RawSocket idle(addr_);
  // A byte at a time does not extend the deadline.
  for (int i = 0; i < 4; ++i) {
    std::this_thread::sleep_for(100ms);
    headers.send("a");
  }
  EXPECT_EQ(status_of(headers.receive(2000ms)), 408);
  EXPECT_EQ(status_of(body.receive(2000ms)), 408);
  EXPECT_TRUE(idle.closed_by_peer(2000ms));
  EXPECT_EQ(server_->stats().timed_out, 2);
  EXPECT_GE(server_->stats().idle_closed, 1);
}

TEST_F(GuardedServerTest, ConnectionsAreLimitedPerClientAndInTotal) {
  HttpLimits l;
  l.max_connections_per_client = 5;
  l.max_connections = 8;
  start(l);
  std::vector<RawSocket> greedy;
  for (int i = 0; i < 5; ++i) greedy.emplace_back(addr_, "127.0.0.2");
  ASSERT_TRUE(open_connections_reach(5)) << server_->stats().open_connections;
  RawSocket sixth(addr_, "127.0.0.2");
  EXPECT_EQ(status_of(sixth.receive(1000ms)), 429);
  EXPECT_EQ(fast("127.0.0.1"), 200);  // another client is served
  // Its connection gone, the five greedy ones are all that is open.
  ASSERT_TRUE(open_connections_reach(5)) << server_->stats().open_connections;
  std::vector<RawSocket> others;
  for (int i = 0; i < 3; ++i) others.emplace_back(addr_, "127.0.0.3");
  ASSERT_TRUE(open_connections_reach(8)) << server_->stats().open_connections;
  RawSocket over(addr_, "127.0.0.4");
  EXPECT_EQ(status_of(over.receive(1000ms)), 503);
  // Places free up when connections close.
  greedy.clear();
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(fast("127.0.0.2"), 200);
  EXPECT_EQ(server_->stats().refused_per_client, 1);
  EXPECT_EQ(server_->stats().refused_busy, 1);
}

TEST_F(GuardedServerTest, BodiesAreBoundedAndMustCarryTheirLength) {
  HttpLimits l;
  l.framing.max_body_bytes = 1000;
  l.framing.max_header_bytes = 4096;
  start(l);
  RawSocket chunked(addr_);
  chunked.send("POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n");
  EXPECT_EQ(status_of(chunked.receive(1000ms)), 411);
  // Refused from its headers, before its body is read.
  RawSocket big(addr_);
  big.send("POST /echo HTTP/1.1\r\nContent-Length: 300000000\r\n\r\n");
  EXPECT_EQ(status_of(big.receive(1000ms)), 413);
  RawSocket headers(addr_);
  std::string many = "GET /fast HTTP/1.1\r\n";
  for (int i = 0; i < 200; ++i) many += "X-Header-" + std::to_string(i) + ": value\r\n";
  headers.send(many);
  EXPECT_EQ(status_of(headers.receive(1000ms)), 431);
  // Finding 18: a POST without Content-Length was answered only after a 5 s read timeout.
  RawSocket no_length(addr_);
  no_length.send("POST /echo HTTP/1.1\r\nHost: t\r\n\r\n");
  EXPECT_EQ(status_of(no_length.receive(1000ms, "\r\n\r\n")), 200);
}

TEST_F(GuardedServerTest, PipelinedAndHalfClosedRequestsAreServed) {
  start(HttpLimits{});
  RawSocket s(addr_);
  s.send(
      "POST /echo HTTP/1.1\r\nContent-Length: 3\r\n\r\nonePOST /echo HTTP/1.1\r\nContent-Length: "
      "3\r\nConnection: close\r\n\r\ntwo");
  const std::string both = s.receive(2000ms);
  EXPECT_NE(both.find("one"), std::string::npos) << both;
  EXPECT_NE(both.find("two"), std::string::npos) << both;
  RawSocket half(addr_);
  half.send("GET /fast HTTP/1.1\r\nHost: t\r\n\r\n");
  half.shutdown_write();
  EXPECT_EQ(status_of(half.receive(1000ms)), 200);
}

}  // namespace
}  // namespace tessera
