// Helpers for the Kubernetes client tests: a temporary folder and a small scripted HTTP(S)
// server on 127.0.0.1 running on its own thread.
#pragma once

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include <httplib.h>

namespace tessera::kube::testing {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "kube_client_XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::string write(const std::string& name, const std::string& text) const {
    std::string p = file(name);
    std::filesystem::create_directories(std::filesystem::path(p).parent_path());
    std::ofstream(p, std::ios::binary | std::ios::trunc) << text;
    return p;
  }

 private:
  std::filesystem::path path_;
};

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Runs an httplib::Server (or SSLServer) on 127.0.0.1. Handlers that block must watch
// `closing()` so that the server can stop.
class TestServer {
 public:
  explicit TestServer(std::unique_ptr<httplib::Server> svr = std::make_unique<httplib::Server>())
      : svr_(std::move(svr)) {
    svr_->set_keep_alive_max_count(100000);
    // Short, because stop() waits for idle kept-alive connections to time out.
    svr_->set_keep_alive_timeout(1);
    svr_->set_tcp_nodelay(true);
  }
  ~TestServer() { stop(); }
  TestServer(const TestServer&) = delete;
  TestServer& operator=(const TestServer&) = delete;

  httplib::Server& svr() { return *svr_; }
  const std::atomic<bool>& closing() const { return closing_; }

  // Listens on `port` (0: any free port) and returns the port.
  int start(int port = 0) {
    if (port == 0) {
      port_ = svr_->bind_to_any_port("127.0.0.1");
    } else {
      port_ = svr_->bind_to_port("127.0.0.1", port) ? port : -1;
    }
    if (port_ <= 0) throw std::runtime_error("test server: cannot bind");
    thread_ = std::thread([this] { svr_->listen_after_bind(); });
    for (int i = 0; i < 500 && !svr_->is_running(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return port_;
  }
  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::string https_url() const { return "https://127.0.0.1:" + std::to_string(port_); }

  void stop() {
    closing_ = true;
    if (thread_.joinable()) {
      svr_->stop();
      thread_.join();
    }
  }

 private:
  std::unique_ptr<httplib::Server> svr_;
  std::thread thread_;
  std::atomic<bool> closing_{false};
  int port_ = -1;
};

// Polls `pred` until true or `timeout` passes; returns its last value.
template <typename Pred>
bool wait_for(Pred pred, std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) {
  auto until = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= until) return pred();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

}  // namespace tessera::kube::testing
