// List-then-watch of one resource collection, as client-go's Reflector: list in pages, watch
// from the list's resourceVersion with bookmarks, resume after a dropped stream from the last
// resourceVersion seen (with back-off), and re-list when the server says that version has
// expired (410 Gone as an HTTP status, or an ERROR event with code 410 inside the stream).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "backend/kube/kube_client.h"

namespace tessera::kube {

// Receives the cache's changes. Calls come from the reflector's thread, one at a time. An
// exception thrown by a handler method ends run() (it propagates to run's caller).
class ReflectorHandler {
 public:
  virtual ~ReflectorHandler() = default;
  // A (re)list: begin, every object of the collection, end. After end, objects not delivered
  // since begin no longer exist (the handler drops them: that is how deletions missed while
  // the watch was broken are learned).
  // A list restarted because its continue token expired (410 between pages) calls
  // on_list_begin again without on_list_end: treat it as starting over.
  virtual void on_list_begin() = 0;
  virtual void on_list_item(nlohmann::json&& object) = 0;
  virtual void on_list_end(const std::string& resource_version) = 0;
  // A watch event: type ADDED, MODIFIED or DELETED (bookmarks and errors are handled inside).
  virtual void on_event(const std::string& type, nlohmann::json&& object) = 0;
  // An optional collection is not served (404: its CRD is not installed): called once each time
  // it goes from served (or not yet listed) to absent, after an empty list was delivered.
  virtual void on_absent() {}
};

struct ReflectorOptions {
  std::string path;            // the collection, e.g. "/api/v1/pods" or "/apis/G/V/podgroups"
  std::string label_selector;  // unescaped, e.g. "app=x"
  std::string field_selector;  // unescaped, e.g. "status.phase!=Succeeded"
  // client-go's 500 made the API server's per-page cost the bulk of a restart: 50,000 pods
  // (125 MB) listed in 4.3-6.4 s in pages of 500, 2.8-3.1 s in pages of 5,000 (12 MB each).
  int page_size = 5000;
  // Only these fields of each object are parsed (lists and watch events); none: all.
  std::optional<FieldMask> fields;
  int watch_timeout_seconds = 300;  // asked of the server; it ends the stream, we resume
  std::chrono::milliseconds backoff_min{100}, backoff_max{10000};
  // The collection may not exist (a CRD that is not installed): a 404 is then an empty
  // collection, not an error; it is listed again every `absent_recheck` until it is served.
  bool optional = false;
  std::chrono::milliseconds absent_recheck{60000};
};

struct ReflectorStats {
  std::atomic<uint64_t> lists{0};       // full lists, the first included
  std::atomic<uint64_t> expired{0};     // 410s (HTTP or in-stream) that forced a re-list
  std::atomic<uint64_t> reconnects{0};  // watches resumed from the last version
  std::atomic<uint64_t> events{0};      // ADDED/MODIFIED/DELETED delivered
  std::atomic<uint64_t> bookmarks{0};
  std::atomic<uint64_t> errors{0};  // failed requests (no answer, 5xx, ...)
  std::atomic<bool> absent{false};  // an optional collection answered 404 at the last list
};

class Reflector {
 public:
  Reflector(Client& client, ReflectorOptions opt, ReflectorHandler& handler);
  // Lists and watches until `stop` is true (checked between requests and while backing off;
  // a watch blocked on a silent stream notices it within ~100 ms). Blocks.
  void run(const std::atomic<bool>& stop);
  // The last resourceVersion delivered (list, event or bookmark); "" before the first list.
  std::string resource_version() const;
  const ReflectorStats& stats() const { return stats_; }
  // The last failure (list/watch error, ERROR event), for logs; "" when none yet.
  std::string last_error() const;

 private:
  enum class ListResult { kDone, kFailed, kStopped, kAbsent };
  ListResult list_once(const std::atomic<bool>& stop);
  std::string page_path(const std::string& continue_token) const;
  void set_rv(const std::string& rv);
  void set_error(std::string e);

  Client& client_;
  ReflectorOptions opt_;
  std::optional<FieldMask> list_fields_;  // opt_.fields under a list's "items"
  ReflectorHandler& handler_;
  ReflectorStats stats_;
  mutable std::mutex mu_;
  std::string rv_;
  std::string last_error_;
};

}  // namespace tessera::kube
