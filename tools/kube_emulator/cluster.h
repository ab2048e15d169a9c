// Kubernetes API semantics over the store: create/get/list/update/patch/delete with
// resourceVersion preconditions, status subresources, generateName, namespaces, finalizers,
// graceful pod deletion, bindings, evictions with PodDisruptionBudgets, the node taints of the
// node lifecycle controller, events in two API groups, and the binding log.
#pragma once

#include <atomic>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kube_emulator/registry.h"
#include "kube_emulator/selectors.h"
#include "kube_emulator/store.h"
#include "kube_emulator/util.h"

namespace kube_emulator {

// An API answer: `obj` (a stored version, served as is) or `body` (anything else).
struct Result {
  int code = 200;
  json body;
  ObjPtr obj;
  bool ok() const { return code < 300; }
};

struct ListQuery {
  LabelSelector labels;
  FieldSelector fields;
  size_t limit = 0;
  std::string cont;
};

struct ListResult {
  int code = 200;
  json error;  // Status when code != 200
  std::vector<ObjPtr> items;
  uint64_t rv = 0;
  std::string cont;
};

// One bind attempt, as the binding log records it.
struct BindRecord {
  std::string time;  // RFC 3339 with microseconds
  std::string ns, name, uid, node;
  json requests;     // the pod's effective requests
  json annotations;  // the Binding's annotations
  int code = 0;      // HTTP status answered
  std::string message;
  json to_json() const;
};

// Makes the next `count` binds matching pod ("ns/name") and/or node fail with `code`.
struct BindFault {
  std::string pod;
  std::string node;
  int count = 1;
  int code = 500;
  std::string message;
};

struct ClusterOptions {
  size_t history = 10000;
  uint64_t seed = 1;
  std::string binding_log_file;
};

class Cluster {
 public:
  explicit Cluster(const ClusterOptions& opt);
  ~Cluster();
  Registry& registry() { return registry_; }
  Store& store() { return store_; }

  // --- API verbs (take the store lock themselves) ---
  Result create(const ResourceInfo& r, const std::string& ns, json body, bool dry_run = false);
  Result get(const ResourceInfo& r, const std::string& ns, const std::string& name);
  // status_only: the /status subresource (only .status changes); otherwise .status is kept.
  Result update(const ResourceInfo& r, const std::string& ns, const std::string& name, json body,
                bool status_only, bool dry_run = false);
  Result patch(const ResourceInfo& r, const std::string& ns, const std::string& name,
               const std::string& content_type, const json& patch, bool status_only,
               bool dry_run = false);
  // options: a DeleteOptions body (gracePeriodSeconds, preconditions, propagationPolicy).
  Result remove(const ResourceInfo& r, const std::string& ns, const std::string& name,
                const json& options, bool dry_run = false);
  Result remove_collection(const ResourceInfo& r, const std::string& ns, const ListQuery& q,
                           const json& options);
  ListResult list(const ResourceInfo& r, const std::string& ns, const ListQuery& q);
  Result bind(const std::string& ns, const std::string& pod, const json& binding);
  Result evict(const std::string& ns, const std::string& pod, const json& eviction);

  // The object as the resource `r` shows it (events.k8s.io converts), for responses.
  json view(const ResourceInfo& r, const json& stored) const;
  bool has_view(const ResourceInfo& r) const;

  // --- for controllers (the fake kubelet) and test hooks; caller holds store().mutex() ---
  ObjPtr get_locked(const std::string& storage, const std::string& key);
  ObjPtr put_locked(const std::string& storage, const std::string& key, json obj);
  ObjPtr erase_locked(const std::string& storage, const std::string& key);
  // Called under the lock after each committed pod / node change (before may be null).
  using Observer = std::function<void(const ObjPtr& before, const ObjPtr& after)>;
  void set_pod_observer(Observer o) { pod_observer_ = std::move(o); }
  void set_node_observer(Observer o) { node_observer_ = std::move(o); }

  void add_bind_fault(const BindFault& f);
  std::vector<BindRecord> bindings() const;
  json stats() const;
  void count_request(const std::string& verb);
  bool dirty() const { return dirty_.load(); }
  void clear_dirty() { dirty_ = false; }
  // Re-registers CRD-served resources after loading a state file (lock held).
  void reload_crds();
  // After loading a state file saved at `rv`: new uids must differ from every uid the earlier
  // run handed out (clients key their caches by uid), so the generator moves to a stream of
  // its own, still a function of the seed and the state alone (lock held).
  void resume_after(uint64_t rv);

 private:
  Result create_locked(const ResourceInfo& r, const std::string& ns, json body, bool dry_run);
  Result update_locked(const ResourceInfo& r, const std::string& ns, const std::string& name,
                       json updated, const ObjPtr& existing, bool status_only, bool dry_run);
  Result delete_locked(const ResourceInfo& r, const std::string& ns, const std::string& name,
                       const json& options, bool dry_run);
  Result delete_pod_locked(const ResourceInfo& r, const std::string& key, const ObjPtr& pod,
                           const json& options, bool dry_run);
  void delete_namespace_contents(const std::string& ns);
  std::optional<Result> namespace_missing(const ResourceInfo& r, const std::string& ns);
  void prepare_node(json& node, const json* before);
  std::string pdb_violation(const std::string& ns, const json& pod, int& code);
  void log_bind(BindRecord rec);
  json to_storage(const ResourceInfo& r, json body) const;
  void seed_builtin_objects();
  void notify(const std::string& storage, const ObjPtr& before, const ObjPtr& after);

  Registry registry_;
  Store store_;
  uint64_t seed_;
  Random random_;
  Observer pod_observer_, node_observer_;
  std::atomic<bool> dirty_{false};

  mutable std::mutex log_mu_;  // binding log, faults, stats (leaf lock)
  std::vector<BindRecord> binds_;
  std::vector<BindFault> faults_;
  std::FILE* bind_log_ = nullptr;
  std::map<std::string, uint64_t> requests_;
  uint64_t binds_ok_ = 0, binds_failed_ = 0;
};

}  // namespace kube_emulator
