// Request routing for the emulated API: discovery, resource paths (/api/v1/..., /apis/G/V/...,
// the legacy /watch/ prefix), verbs, query parameters, content negotiation (Table,
// PartialObjectMetadata) and the /emulator/ test hooks. Watches are returned as a WatchPlan
// that the HTTP layer streams with run_watch().
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "kube_emulator/cluster.h"
#include "kube_emulator/tables.h"

namespace kube_emulator {

struct ApiRequest {
  std::string method;
  std::string path;
  std::multimap<std::string, std::string> params;  // URL-decoded query
  std::string content_type;
  std::string accept;
  std::string body;
  std::string param(const std::string& k) const {
    const auto it = params.find(k);
    return it == params.end() ? "" : it->second;
  }
  bool has(const std::string& k) const { return params.count(k) != 0; }
};

struct WatchPlan {
  const ResourceInfo* resource = nullptr;
  std::string ns;
  LabelSelector labels;
  FieldSelector fields;
  bool from_now = true;  // no resourceVersion (or "0"): synthetic ADDED for current objects
  uint64_t rv = 0;
  bool bookmarks = false;
  bool send_initial = false;  // sendInitialEvents=true
  std::chrono::milliseconds timeout{0};
  bool table = false;
  IncludeObject include = IncludeObject::Metadata;
};

struct ApiResponse {
  int code = 200;
  std::string content_type = "application/json";
  std::string body;
  std::optional<WatchPlan> watch;
};

struct RouterOptions {
  std::chrono::milliseconds bookmark_interval{60000};
  std::chrono::seconds watch_timeout{0};
  bool watch_expired_as_http_410 = false;
  std::string server_address;  // host:port for /api
};

class Router {
 public:
  Router(Cluster& cluster, RouterOptions opt, uint64_t seed);
  ApiResponse handle(const ApiRequest& req);
  // Streams a watch: `write` sends one chunk (false: the client is gone); `alive` says
  // whether the connection is still open; returns when the watch ends.
  void run_watch(const WatchPlan& plan, const std::function<bool(const std::string&)>& write,
                 const std::function<bool()>& alive, const std::atomic<bool>& stopping);
  // Hooks the Emulator serves itself (/emulator/...): set by the Emulator.
  std::function<ApiResponse(const ApiRequest&)> hooks;
  void set_server_address(const std::string& a) { opt_.server_address = a; }

 private:
  ApiResponse resource_request(const ApiRequest& req, const std::vector<std::string>& segs);
  ApiResponse respond(const ResourceInfo& r, const Result& res, const ApiRequest& req);
  ApiResponse list(const ResourceInfo& r, const std::string& ns, const ApiRequest& req);
  std::string event_line(const char* type, const ResourceInfo& r, const json* obj,
                         const std::string* text, const WatchPlan& plan, bool& first);

  Cluster& cluster_;
  RouterOptions opt_;
  std::mutex rng_mu_;
  Random rng_;
};

ApiResponse json_response(int code, const json& body);

}  // namespace kube_emulator
