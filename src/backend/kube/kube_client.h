// A client of the Kubernetes REST API (the calls a scheduler makes), over HTTPS or HTTP with a
// bearer token and/or a client certificate, CA verification, and a pool of keep-alive
// connections so that many requests (binds) can run in parallel from several threads.
//
// Thread-safe: every method may be called from any thread at once.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/kube/field_mask.h"
#include "backend/kube/kube_config.h"

namespace tessera::kube {

// The answer to one request. status 0: no answer (connection refused, TLS failure, timeout):
// `error` says why. Otherwise `body` is the server's body (JSON: an object or a Status).
struct Response {
  int status = 0;
  std::string body;
  std::string error;

  bool ok() const { return status >= 200 && status < 300; }
  nlohmann::json json() const;  // parsed body; a discarded (is_discarded()) value if not JSON
  // The Status message/reason of a failed request, or the transport error, for logs.
  std::string describe() const;
};

enum class PatchType { kMerge, kStrategicMerge, kJsonPatch };

// One event of a watch stream.
struct WatchEvent {
  std::string type;  // ADDED, MODIFIED, DELETED, BOOKMARK, ERROR
  nlohmann::json object;
};

// How a watch stream ended.
struct WatchEnd {
  int status = 0;        // HTTP status of the watch request (0: no answer)
  bool stopped = false;  // the caller's stop flag, or on_event returning false
  std::string error;     // transport error or the body of a non-200 answer
};

struct ClientOptions {
  int connections = 16;                      // keep-alive connections in the pool
  std::chrono::milliseconds timeout{30000};  // connect/read/write, ordinary calls
  std::string user_agent = "tessera-scheduler";
  // A watch whose stream stays silent this long is treated as dead (its read timeout).
  // 0: the path's timeoutSeconds (1800 when absent) plus 30 s.
  std::chrono::milliseconds watch_idle_timeout{0};
  // A request answered 429 or 5xx with Retry-After (seconds) is sent again after that wait
  // (at most retry_after_cap), up to this many times (client-go: 10).
  int retry_after_attempts = 10;
  std::chrono::milliseconds retry_after_cap{10000};
};

class Client {
 public:
  Client(KubeConfig config, ClientOptions opt = {});
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // `path` is the URL path with its query (e.g. "/api/v1/pods?limit=500"), already escaped.
  Response get(const std::string& path);
  Response post(const std::string& path, const nlohmann::json& body);
  Response put(const std::string& path, const nlohmann::json& body);
  Response patch(const std::string& path, const nlohmann::json& body, PatchType type);
  Response del(const std::string& path, const nlohmann::json& body = nullptr);

  // Opens a watch (path must carry watch=1 and the rest of the query) and calls on_event for
  // every line of the stream until the server closes it, `stop` becomes true, or on_event
  // returns false. Blocks. A malformed line ends the stream with an error. With `objects`, each
  // event's object keeps only the fields that mask names.
  WatchEnd watch(const std::string& path, const std::function<bool(const WatchEvent&)>& on_event,
                 const std::atomic<bool>& stop, const FieldMask* objects = nullptr);

  const KubeConfig& config() const { return config_; }
  // Requests the server asked to come back later (429, or 5xx with Retry-After), and waited.
  uint64_t throttled() const { return throttled_.load(); }

 private:
  struct Pool;
  Response send(const char* method, const std::string& path, const nlohmann::json* body,
                const char* content_type);
  KubeConfig config_;
  ClientOptions opt_;
  std::unique_ptr<Pool> pool_;
  std::atomic<uint64_t> throttled_{0};
};

// Percent-escapes a query value (selectors contain '=', ',', '!').
std::string escape_query(std::string_view value);

}  // namespace tessera::kube
