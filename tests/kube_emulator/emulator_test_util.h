// Helpers for the emulator's tests: a started emulator, an HTTP client, a watch reader.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "kube_emulator/emulator.h"

namespace kube_emulator::testing {

using namespace std::chrono_literals;

inline Options small_options(int nodes = 4, int gpus = 8) {
  Options o;
  o.nodes = {NodePool{.count = nodes, .gpus = gpus}};
  o.kubelet.start_delay = std::chrono::milliseconds(0);
  o.threads = 32;
  o.watch_timeout = std::chrono::seconds(30);
  return o;
}

inline json pod_json(const std::string& name, const std::string& gpus = "",
                     const std::string& ns = "default") {
  json c = {{"name", "main"}, {"image", "busybox:1.36"}};
  if (!gpus.empty()) c["resources"] = {{"limits", {{"nvidia.com/gpu", gpus}}}};
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}, {"namespace", ns}}},
          {"spec", {{"schedulerName", "tessera"}, {"containers", {c}}}}};
}

inline json binding_json(const std::string& pod, const std::string& node,
                         const std::string& ns = "default") {
  return {{"apiVersion", "v1"},
          {"kind", "Binding"},
          {"metadata", {{"name", pod}, {"namespace", ns}}},
          {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", node}}}};
}

// A small HTTP client over the emulator's socket.
class Http {
 public:
  explicit Http(int port) : cli_("127.0.0.1", port) {
    cli_.set_read_timeout(30);
    cli_.set_tcp_nodelay(true);
  }
  struct R {
    int status = 0;
    json body;
    std::string text;
  };
  R get(const std::string& path, const std::string& accept = "application/json") {
    return wrap(cli_.Get(path.c_str(), {{"Accept", accept}}));
  }
  R post(const std::string& path, const json& body) {
    return wrap(cli_.Post(path.c_str(), body.dump(), "application/json"));
  }
  R put(const std::string& path, const json& body) {
    return wrap(cli_.Put(path.c_str(), body.dump(), "application/json"));
  }
  R patch(const std::string& path, const json& body, const std::string& type) {
    return wrap(cli_.Patch(path.c_str(), body.dump(), type.c_str()));
  }
  R del(const std::string& path, const json& body = json()) {
    if (body.is_null()) return wrap(cli_.Delete(path.c_str()));
    return wrap(cli_.Delete(path.c_str(), body.dump(), "application/json"));
  }

 private:
  static R wrap(const httplib::Result& res) {
    R r;
    if (!res) return r;
    r.status = res->status;
    r.text = res->body;
    r.body = json::parse(res->body, nullptr, false);
    return r;
  }
  httplib::Client cli_;
};

// Reads a watch stream on a thread; next() returns its events one by one.
class WatchReader {
 public:
  WatchReader(int port, const std::string& path) {
    client_ = std::make_unique<httplib::Client>("127.0.0.1", port);
    client_->set_read_timeout(60);
    thread_ = std::thread([this, path] {
      auto res = client_->Get(path.c_str(), [this](const char* d, size_t n) {
        std::lock_guard<std::mutex> lock(mu_);
        buf_.append(d, n);
        size_t nl;
        while ((nl = buf_.find('\n')) != std::string::npos) {
          lines_.push_back(buf_.substr(0, nl));
          buf_.erase(0, nl + 1);
        }
        cv_.notify_all();
        return true;
      });
      std::lock_guard<std::mutex> lock(mu_);
      status_ = res ? res->status : -1;
      ended_ = true;
      cv_.notify_all();
    });
  }
  ~WatchReader() {
    client_->stop();
    thread_.join();
  }
  // The next event, or nullopt when none arrives within `timeout` or the stream ended.
  std::optional<json> next(std::chrono::milliseconds timeout = 5000ms) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, timeout, [&] { return !lines_.empty() || ended_; });
    if (lines_.empty()) return std::nullopt;
    const std::string line = lines_.front();
    lines_.pop_front();
    return json::parse(line);
  }
  // The next event that is not a BOOKMARK.
  std::optional<json> next_change(std::chrono::milliseconds timeout = 5000ms) {
    while (true) {
      auto e = next(timeout);
      if (!e || (*e)["type"] != "BOOKMARK") return e;
    }
  }
  bool wait_ended(std::chrono::milliseconds timeout = 5000ms) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return ended_; });
  }
  int status() {
    std::lock_guard<std::mutex> lock(mu_);
    return status_;
  }

 private:
  std::unique_ptr<httplib::Client> client_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::string buf_;
  std::deque<std::string> lines_;
  bool ended_ = false;
  int status_ = 0;
};

// Polls `pred` until it holds or `timeout` passes.
template <class F>
bool eventually(F pred, std::chrono::milliseconds timeout = 5000ms) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return pred();
}

}  // namespace kube_emulator::testing
