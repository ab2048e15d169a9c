// The object store: immutable JSON snapshots per object, one global resourceVersion counter
// (as etcd), a bounded per-collection change history that watches resume from, and a
// spec.nodeName index for pods. Every method expects the caller to hold mutex().
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>

#include "kube_emulator/util.h"

namespace kube_emulator {

// One published version of an object; never modified after publication, so it can be shared
// with list responses and watch streams outside the lock.
class Object {
 public:
  Object(json j, uint64_t rv) : j_(std::move(j)), rv_(rv) {}
  const json& j() const { return j_; }
  uint64_t rv() const { return rv_; }
  const std::string& text() const;  // compact JSON, computed once

 private:
  json j_;
  uint64_t rv_;
  mutable std::once_flag once_;
  mutable std::string text_;
};
using ObjPtr = std::shared_ptr<const Object>;

enum class EventType { Added, Modified, Deleted };
const char* event_name(EventType t);

struct Change {
  uint64_t rv = 0;
  EventType type = EventType::Added;
  ObjPtr obj;   // the new state (for Deleted: the last state, carrying the delete's RV)
  ObjPtr prev;  // the state before (Modified/Deleted)
};

struct Collection {
  std::string name;                     // storage key, e.g. "/pods", "apps/deployments"
  std::map<std::string, ObjPtr> items;  // "ns/name" or "name": sorted, for paging
  std::unordered_map<std::string, std::set<std::string>> by_node;  // pods: spec.nodeName
  std::deque<Change> history;
  uint64_t floor = 0;  // watches and continue tokens may resume from RVs >= floor
  uint64_t drop_epoch = 0;
  uint64_t compact_epoch = 0;
  std::condition_variable cv;
};

std::string object_key(const std::string& ns, const std::string& name);

class Store {
 public:
  explicit Store(size_t history_limit) : history_limit_(history_limit) {}
  std::mutex& mutex() { return mu_; }

  Collection& collection(const std::string& storage);
  const std::map<std::string, std::unique_ptr<Collection>>& collections() const {
    return collections_;
  }
  uint64_t rv() const { return rv_; }
  void set_rv(uint64_t rv) { rv_ = rv; }
  uint64_t next_rv() { return ++rv_; }

  ObjPtr get(Collection& c, const std::string& key) const;
  // Stores `obj` under `key` with a new RV (written into metadata.resourceVersion), records
  // the change and wakes the collection's watches.
  ObjPtr put(Collection& c, const std::string& key, json obj);
  // Removes the object; the DELETED change carries its last state with a new RV.
  ObjPtr erase(Collection& c, const std::string& key);
  // Loads an object without history (state file); RVs are kept as stored.
  void load(Collection& c, const std::string& key, json obj);

  // Test hooks: every open watch ends (drop) or gets 410 Expired (compact).
  void drop_watches();
  void compact();
  // After a restart: no history, nothing older than the current RV can be resumed.
  void start_history_at_current();
  void notify_all();
  size_t history_limit() const { return history_limit_; }

 private:
  void record(Collection& c, Change ch);
  void index(Collection& c, const std::string& key, const ObjPtr& before, const ObjPtr& after);

  std::mutex mu_;
  uint64_t rv_ = 0;
  size_t history_limit_;
  uint64_t base_floor_ = 0;  // floor of collections created later
  std::map<std::string, std::unique_ptr<Collection>> collections_;
};

}  // namespace kube_emulator
