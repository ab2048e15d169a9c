#include "kube_emulator/cluster.h"

#include <algorithm>
#include <stdexcept>

#include "kube_emulator/patch.h"
#include "kube_emulator/pods.h"

namespace kube_emulator {

namespace {

const std::string kPods = "/pods";
const std::string kNodes = "/nodes";
const std::string kNamespaces = "/namespaces";
const std::string kPriorityClasses = "scheduling.k8s.io/priorityclasses";
const std::string kCrds = "apiextensions.k8s.io/customresourcedefinitions";

Result fail(int code, const std::string& message, const std::string& name = "",
            const std::string& qualified = "") {
  return Result{code, status_failure(code, reason_for_code(code), message, name, qualified), {}};
}

Result not_found(const ResourceInfo& r, const std::string& name) {
  return fail(404, r.qualified() + " \"" + name + "\" not found", name, r.qualified());
}

bool valid_dns_subdomain(const std::string& n) {
  if (n.empty() || n.size() > 253) return false;
  if (!std::isalnum(static_cast<unsigned char>(n.front())) ||
      !std::isalnum(static_cast<unsigned char>(n.back()))) {
    return false;
  }
  return std::all_of(n.begin(), n.end(), [](unsigned char c) {
    return (std::islower(c) != 0) || (std::isdigit(c) != 0) || c == '-' || c == '.';
  });
}

bool valid_path_segment(const std::string& n) {
  return !n.empty() && n != "." && n != ".." && n.find('/') == std::string::npos &&
         n.find('%') == std::string::npos;
}

// Everything but metadata and status: a change bumps metadata.generation.
json spec_part(const json& o) {
  json s = o;
  s.erase("metadata");
  s.erase("status");
  return s;
}

}  // namespace

json BindRecord::to_json() const {
  return {{"time", time},
          {"namespace", ns},
          {"name", name},
          {"uid", uid},
          {"node", node},
          {"requests", requests},
          {"annotations", annotations},
          {"code", code},
          {"message", message}};
}

Cluster::Cluster(const ClusterOptions& opt)
    : store_(opt.history), seed_(opt.seed), random_(opt.seed) {
  if (!opt.binding_log_file.empty()) {
    bind_log_ = std::fopen(opt.binding_log_file.c_str(), "a");
    if (bind_log_ == nullptr) {
      throw std::runtime_error("cannot open the binding log " + opt.binding_log_file);
    }
  }
  std::lock_guard<std::mutex> lock(store_.mutex());
  seed_builtin_objects();
}

Cluster::~Cluster() {
  if (bind_log_ != nullptr) std::fclose(bind_log_);
}

json Cluster::view(const ResourceInfo& r, const json& stored) const {
  return has_view(r) ? event_core_to_v1(stored) : stored;
}

bool Cluster::has_view(const ResourceInfo& r) const {
  return r.is("events.k8s.io", "events");
}

json Cluster::to_storage(const ResourceInfo& r, json body) const {
  return has_view(r) ? event_v1_to_core(body) : body;
}

ObjPtr Cluster::get_locked(const std::string& storage, const std::string& key) {
  return store_.get(store_.collection(storage), key);
}

void Cluster::notify(const std::string& storage, const ObjPtr& before, const ObjPtr& after) {
  dirty_ = true;
  if (storage == kPods && pod_observer_) pod_observer_(before, after);
  if (storage == kNodes && node_observer_) node_observer_(before, after);
}

ObjPtr Cluster::put_locked(const std::string& storage, const std::string& key, json obj) {
  Collection& c = store_.collection(storage);
  ObjPtr before = store_.get(c, key);
  ObjPtr after = store_.put(c, key, std::move(obj));
  notify(storage, before, after);
  return after;
}

ObjPtr Cluster::erase_locked(const std::string& storage, const std::string& key) {
  Collection& c = store_.collection(storage);
  ObjPtr before = store_.get(c, key);
  ObjPtr last = store_.erase(c, key);
  if (last) notify(storage, before, nullptr);
  return last;
}

std::optional<Result> Cluster::namespace_missing(const ResourceInfo& r, const std::string& ns) {
  if (!r.namespaced) return std::nullopt;
  if (store_.get(store_.collection(kNamespaces), ns)) return std::nullopt;
  return fail(404, "namespaces \"" + ns + "\" not found", ns, "namespaces");
}

void Cluster::prepare_node(json& node, const json* /*before*/) {
  // Node lifecycle controller: NoSchedule taints follow the Ready condition.
  const std::string ready = condition_status(node, "Ready");
  json& spec = node["spec"];
  if (!spec.is_object()) spec = json::object();
  json taints =
      spec.contains("taints") && spec["taints"].is_array() ? spec["taints"] : json::array();
  const auto managed = [](const json& t) {
    const std::string k = t.value("key", "");
    return t.value("effect", "") == "NoSchedule" &&
           (k == "node.kubernetes.io/not-ready" || k == "node.kubernetes.io/unreachable");
  };
  json kept = json::array();
  std::string had;
  for (const auto& t : taints) {
    if (managed(t)) {
      had = t.value("key", "");
    } else {
      kept.push_back(t);
    }
  }
  std::string want;
  if (ready == "False") want = "node.kubernetes.io/not-ready";
  if (ready == "Unknown") want = "node.kubernetes.io/unreachable";
  if (want == had) return;
  if (!want.empty()) kept.push_back({{"key", want}, {"effect", "NoSchedule"}});
  if (kept.empty()) {
    spec.erase("taints");
  } else {
    spec["taints"] = kept;
  }
}

Result Cluster::create(const ResourceInfo& r, const std::string& ns, json body, bool dry_run) {
  std::lock_guard<std::mutex> lock(store_.mutex());
  return create_locked(r, ns, std::move(body), dry_run);
}

Result Cluster::create_locked(const ResourceInfo& r, const std::string& ns, json body,
                              bool dry_run) {
  if (!body.is_object()) return fail(400, "the body of the request must be a JSON object");
  const std::string kind = body.value("kind", r.kind);
  const std::string api_version = body.value("apiVersion", r.group_version());
  if (kind != r.kind || api_version != r.group_version()) {
    return fail(400, "the API version in the data (" + api_version + ") and kind (" + kind +
                         ") do not match the expected " + r.group_version() + " " + r.kind);
  }
  body["kind"] = r.kind;
  body["apiVersion"] = r.group_version();
  json stored = to_storage(r, std::move(body));
  json& meta = stored["metadata"];
  if (!meta.is_object()) meta = json::object();
  if (r.namespaced) {
    const std::string body_ns = meta.value("namespace", "");
    if (!body_ns.empty() && body_ns != ns) {
      return fail(400,
                  "the namespace of the provided object does not match the namespace sent "
                  "on the request");
    }
    meta["namespace"] = ns;
  } else {
    meta.erase("namespace");
  }
  if (auto missing = namespace_missing(r, ns)) return *missing;
  Collection& coll = store_.collection(r.storage);
  std::string name = meta.value("name", "");
  const std::string generate = meta.value("generateName", "");
  // As the real server: generateName is itself validated as a name (a trailing '-' allowed),
  // so "pod." is refused though every name generated from it would be valid.
  if (name.empty() && !generate.empty() && r.group != "rbac.authorization.k8s.io") {
    std::string masked = generate;
    if (masked.size() > 1 && masked.back() == '-') masked.back() = 'a';
    if (!valid_dns_subdomain(masked)) {
      return fail(422,
                  r.kind + " \"" + generate +
                      "\" is invalid: metadata.generateName: Invalid value: \"" + generate +
                      "\": a lowercase RFC 1123 subdomain must consist of lower case "
                      "alphanumeric characters, '-' or '.', and must start and end with an "
                      "alphanumeric character",
                  generate, r.qualified());
    }
  }
  if (name.empty() && !generate.empty()) {
    do {
      name = generate + random_.name_suffix();
    } while (store_.get(coll, object_key(ns, name)));
    meta["name"] = name;
  }
  if (name.empty()) {
    return fail(422,
                r.kind +
                    " \"\" is invalid: metadata.name: Required value: name or "
                    "generateName is required",
                "", r.qualified());
  }
  const bool rbac = r.group == "rbac.authorization.k8s.io";
  if (rbac ? !valid_path_segment(name) : !valid_dns_subdomain(name)) {
    return fail(422,
                r.kind + " \"" + name + "\" is invalid: metadata.name: Invalid value: \"" + name +
                    "\": a lowercase RFC 1123 subdomain must consist of lower case "
                    "alphanumeric characters, '-' or '.', and must start and end with an "
                    "alphanumeric character",
                name, r.qualified());
  }
  const std::string key = object_key(r.namespaced ? ns : "", name);
  if (store_.get(coll, key)) {
    return Result{
        409,
        status_failure(409, "AlreadyExists", r.qualified() + " \"" + name + "\" already exists",
                       name, r.qualified()),
        {}};
  }
  meta["uid"] = random_.uid();
  meta["creationTimestamp"] = rfc3339(Clock::now());
  meta.erase("deletionTimestamp");
  meta.erase("deletionGracePeriodSeconds");
  meta.erase("resourceVersion");
  meta.erase("selfLink");
  meta.erase("managedFields");
  meta["generation"] = 1;

  if (r.is("", "pods")) {
    const json* cs = find_path(stored, "spec.containers");
    if (cs == nullptr || !cs->is_array() || cs->empty()) {
      return fail(422, "Pod \"" + name + "\" is invalid: spec.containers: Required value", name,
                  "pods");
    }
    const std::string err =
        default_pod(stored, [&](const std::string& pc) -> std::optional<PriorityInfo> {
          Collection& pcs = store_.collection(kPriorityClasses);
          const auto to_info = [](const json& j) {
            return PriorityInfo{string_at(j, "metadata.name"), j.value("value", int64_t{0}),
                                j.value("preemptionPolicy", "PreemptLowerPriority")};
          };
          if (!pc.empty()) {
            const ObjPtr o = store_.get(pcs, pc);
            if (!o) return std::nullopt;
            return to_info(o->j());
          }
          for (const auto& [_, o] : pcs.items) {
            if (o->j().value("globalDefault", false)) return to_info(o->j());
          }
          return std::nullopt;
        });
    if (!err.empty()) {
      return fail(403, "pods \"" + name + "\" is forbidden: " + err, name, "pods");
    }
  } else if (r.is("", "namespaces")) {
    stored["status"] = {{"phase", "Active"}};
    if (!stored.contains("spec")) stored["spec"] = {{"finalizers", {"kubernetes"}}};
    meta["labels"]["kubernetes.io/metadata.name"] = name;
  } else if (r.is("", "nodes")) {
    prepare_node(stored, nullptr);
  } else if (r.is("apiextensions.k8s.io", "customresourcedefinitions")) {
    const json names = find_path(stored, "spec.names") ? *find_path(stored, "spec.names") : json();
    stored["status"] = {{"acceptedNames", names},
                        {"storedVersions", json::array()},
                        {"conditions",
                         {{{"type", "NamesAccepted"},
                           {"status", "True"},
                           {"reason", "NoConflicts"},
                           {"lastTransitionTime", meta["creationTimestamp"]}},
                          {{"type", "Established"},
                           {"status", "True"},
                           {"reason", "InitialNamesAccepted"},
                           {"lastTransitionTime", meta["creationTimestamp"]}}}}};
    if (!dry_run) registry_.add_crd(stored);
  } else if (r.has_subresource("status")) {
    stored.erase("status");  // status is written through the subresource only
  }
  if (dry_run) return Result{201, stored, {}};
  ObjPtr obj = put_locked(r.storage, key, std::move(stored));
  if (r.is("", "namespaces")) {
    put_locked("/serviceaccounts", object_key(name, "default"),
               {{"apiVersion", "v1"},
                {"kind", "ServiceAccount"},
                {"metadata",
                 {{"name", "default"},
                  {"namespace", name},
                  {"uid", random_.uid()},
                  {"creationTimestamp", rfc3339(Clock::now())}}}});
  }
  return Result{201, {}, obj};
}

Result Cluster::get(const ResourceInfo& r, const std::string& ns, const std::string& name) {
  std::lock_guard<std::mutex> lock(store_.mutex());
  ObjPtr o = store_.get(store_.collection(r.storage), object_key(r.namespaced ? ns : "", name));
  if (!o) return not_found(r, name);
  return Result{200, {}, o};
}

Result Cluster::update(const ResourceInfo& r, const std::string& ns, const std::string& name,
                       json body, bool status_only, bool dry_run) {
  std::lock_guard<std::mutex> lock(store_.mutex());
  if (!body.is_object()) return fail(400, "the body of the request must be a JSON object");
  ObjPtr existing =
      store_.get(store_.collection(r.storage), object_key(r.namespaced ? ns : "", name));
  if (!existing) return not_found(r, name);
  const std::string body_name = string_at(body, "metadata.name");
  if (!body_name.empty() && body_name != name) {
    return fail(400, "the name of the object (" + body_name +
                         ") does not match the name on the URL (" + name + ")");
  }
  return update_locked(r, ns, name, to_storage(r, std::move(body)), existing, status_only, dry_run);
}

Result Cluster::patch(const ResourceInfo& r, const std::string& ns, const std::string& name,
                      const std::string& content_type, const json& p, bool status_only,
                      bool dry_run) {
  const PatchType type = patch_type_of(content_type);
  const std::string accepted = r.custom
                                   ? "application/json-patch+json, application/merge-patch+json"
                                   : "application/json-patch+json, application/merge-patch+json, "
                                     "application/strategic-merge-patch+json";
  if (type == PatchType::Unknown || type == PatchType::Apply ||
      (type == PatchType::Strategic && r.custom)) {
    return fail(415,
                "the body of the request was in an unknown format - accepted media types "
                "include: " +
                    accepted +
                    (type == PatchType::Apply ? " (server-side apply is not emulated)" : ""));
  }
  std::lock_guard<std::mutex> lock(store_.mutex());
  ObjPtr existing =
      store_.get(store_.collection(r.storage), object_key(r.namespaced ? ns : "", name));
  if (!existing) return not_found(r, name);
  const json current = view(r, existing->j());
  json patched;
  try {
    switch (type) {
      case PatchType::Merge:
        patched = merge_patch(current, p);
        break;
      case PatchType::Strategic:
        patched = strategic_merge(current, p, r.kind);
        break;
      default:
        patched = json_patch(current, p);
        break;
    }
  } catch (const std::invalid_argument& e) {
    return fail(type == PatchType::Json ? 422 : 400, e.what(), name, r.qualified());
  }
  if (!patched.is_object()) return fail(422, "the patch produced an invalid object");
  return update_locked(r, ns, name, to_storage(r, std::move(patched)), existing, status_only,
                       dry_run);
}

Result Cluster::update_locked(const ResourceInfo& r, const std::string& ns, const std::string& name,
                              json nw, const ObjPtr& existing, bool status_only, bool dry_run) {
  const json& old = existing->j();
  const std::string key = object_key(r.namespaced ? ns : "", name);
  json& meta = nw["metadata"];
  if (!meta.is_object()) meta = json::object();
  const std::string want_uid = meta.value("uid", "");
  const std::string old_uid = string_at(old, "metadata.uid");
  if (!want_uid.empty() && want_uid != old_uid) {
    return fail(409,
                "Operation cannot be fulfilled on " + r.qualified() + " \"" + name +
                    "\": Precondition failed: UID in precondition: " + want_uid +
                    ", UID in object meta: " + old_uid,
                name, r.qualified());
  }
  const std::string want_rv = meta.value("resourceVersion", "");
  if (!want_rv.empty() && want_rv != std::to_string(existing->rv())) {
    return fail(409,
                "Operation cannot be fulfilled on " + r.qualified() + " \"" + name +
                    "\": the object has been modified; please apply your changes to the "
                    "latest version and try again",
                name, r.qualified());
  }
  nw["kind"] = old["kind"];
  nw["apiVersion"] = old["apiVersion"];
  for (const char* f : {"uid", "creationTimestamp", "namespace", "name", "deletionTimestamp",
                        "deletionGracePeriodSeconds", "generation"}) {
    if (old["metadata"].contains(f)) {
      meta[f] = old["metadata"][f];
    } else {
      meta.erase(f);
    }
  }
  meta.erase("managedFields");
  meta.erase("selfLink");
  meta["resourceVersion"] = std::to_string(existing->rv());
  if (r.has_subresource("status")) {
    if (status_only) {
      json merged = old;
      if (nw.contains("status")) {
        merged["status"] = nw["status"];
      } else {
        merged.erase("status");
      }
      if (r.is("", "pods")) {  // pod status updates may also change labels and annotations
        for (const char* f : {"labels", "annotations"}) {
          if (meta.contains(f)) {
            merged["metadata"][f] = meta[f];
          } else {
            merged["metadata"].erase(f);
          }
        }
      }
      nw = std::move(merged);
    } else if (old.contains("status")) {
      nw["status"] = old["status"];
    } else {
      nw.erase("status");
    }
  }
  if (r.is("", "pods") && !status_only) {
    const std::string err = pod_update_error(old, nw);
    if (!err.empty()) return fail(422, err, name, "pods");
  }
  if (r.is("", "nodes")) prepare_node(nw, &old);
  if (r.is("scheduling.k8s.io", "priorityclasses") &&
      nw.value("value", int64_t{0}) != old.value("value", int64_t{0})) {
    return fail(422,
                "PriorityClass.scheduling.k8s.io \"" + name +
                    "\" is invalid: value: Forbidden: may not be changed in an update.",
                name, r.qualified());
  }
  if (spec_part(nw) != spec_part(old)) {
    nw["metadata"]["generation"] = old["metadata"].value("generation", int64_t{0}) + 1;
  }
  if (nw == old) return Result{200, {}, existing};  // no-op: no new resourceVersion
  if (dry_run) return Result{200, nw, {}};
  if (r.is("apiextensions.k8s.io", "customresourcedefinitions")) registry_.add_crd(nw);
  // The last finalizer removed from an object being deleted completes the deletion.
  const json* fin = find_path(nw, "metadata.finalizers");
  if (nw["metadata"].contains("deletionTimestamp") &&
      (fin == nullptr || !fin->is_array() || fin->empty()) &&
      (!r.is("", "pods") || nw["metadata"].value("deletionGracePeriodSeconds", 1) == 0)) {
    put_locked(r.storage, key, nw);
    return Result{200, {}, erase_locked(r.storage, key)};
  }
  return Result{200, {}, put_locked(r.storage, key, std::move(nw))};
}

Result Cluster::remove(const ResourceInfo& r, const std::string& ns, const std::string& name,
                       const json& options, bool dry_run) {
  std::lock_guard<std::mutex> lock(store_.mutex());
  return delete_locked(r, ns, name, options, dry_run);
}

Result Cluster::delete_locked(const ResourceInfo& r, const std::string& ns, const std::string& name,
                              const json& options, bool dry_run) {
  const std::string key = object_key(r.namespaced ? ns : "", name);
  ObjPtr existing = store_.get(store_.collection(r.storage), key);
  if (!existing) return not_found(r, name);
  const json& old = existing->j();
  const std::string uid = string_at(old, "metadata.uid");
  const std::string want_uid = string_at(options, "preconditions.uid");
  if (!want_uid.empty() && want_uid != uid) {
    return fail(409,
                "Operation cannot be fulfilled on " + r.qualified() + " \"" + name +
                    "\": Precondition failed: UID in precondition: " + want_uid +
                    ", UID in object meta: " + uid,
                name, r.qualified());
  }
  const std::string want_rv = string_at(options, "preconditions.resourceVersion");
  if (!want_rv.empty() && want_rv != std::to_string(existing->rv())) {
    return fail(409,
                "Operation cannot be fulfilled on " + r.qualified() + " \"" + name +
                    "\": Precondition failed: ResourceVersion in precondition: " + want_rv +
                    ", ResourceVersion in object meta: " + std::to_string(existing->rv()),
                name, r.qualified());
  }
  if (r.is("", "pods")) return delete_pod_locked(r, key, existing, options, dry_run);
  if (dry_run) return Result{200, status_success(200, name, r.qualified(), uid), {}};
  const json* fin = find_path(old, "metadata.finalizers");
  if (fin != nullptr && fin->is_array() && !fin->empty()) {
    if (old["metadata"].contains("deletionTimestamp")) return Result{200, {}, existing};
    json nw = old;
    nw["metadata"]["deletionTimestamp"] = rfc3339(Clock::now());
    nw["metadata"]["deletionGracePeriodSeconds"] = 0;
    return Result{200, {}, put_locked(r.storage, key, std::move(nw))};
  }
  if (r.is("", "namespaces")) {
    json nw = old;
    nw["metadata"]["deletionTimestamp"] = rfc3339(Clock::now());
    nw["status"]["phase"] = "Terminating";
    delete_namespace_contents(name);
    erase_locked(r.storage, key);
    return Result{200, nw, {}};
  }
  if (r.is("apiextensions.k8s.io", "customresourcedefinitions")) {
    registry_.remove_crd(old);
  }
  erase_locked(r.storage, key);
  return Result{200, status_success(200, name, r.qualified(), uid), {}};
}

void Cluster::delete_namespace_contents(const std::string& ns) {
  const std::string prefix = ns + "/";
  std::vector<std::pair<std::string, std::string>> doomed;
  for (const auto& [storage, c] : store_.collections()) {
    for (auto it = c->items.lower_bound(prefix);
         it != c->items.end() && starts_with(it->first, prefix); ++it) {
      doomed.emplace_back(storage, it->first);
    }
  }
  for (const auto& [storage, key] : doomed) erase_locked(storage, key);
}

Result Cluster::remove_collection(const ResourceInfo& r, const std::string& ns, const ListQuery& q,
                                  const json& options) {
  ListQuery all = q;
  all.limit = 0;
  all.cont.clear();
  ListResult l = list(r, ns, all);
  if (l.code != 200) return Result{l.code, l.error, {}};
  std::lock_guard<std::mutex> lock(store_.mutex());
  json items = json::array();
  for (const auto& o : l.items) {
    Result d = delete_locked(r, string_at(o->j(), "metadata.namespace"),
                             string_at(o->j(), "metadata.name"), options, false);
    if (d.ok()) items.push_back(view(r, o->j()));
  }
  return Result{200,
                {{"kind", r.list_kind()},
                 {"apiVersion", r.group_version()},
                 {"metadata", {{"resourceVersion", std::to_string(store_.rv())}}},
                 {"items", items}},
                {}};
}

void Cluster::reload_crds() {
  for (const auto& [_, o] : store_.collection(kCrds).items) registry_.add_crd(o->j());
}

void Cluster::resume_after(uint64_t rv) {
  // splitmix64 of (seed, rv): distinct restarts of one seed draw unrelated streams.
  uint64_t z = seed_ + 0x9E3779B97F4A7C15ULL * (rv + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  random_ = Random(z ^ (z >> 31));
}

void Cluster::count_request(const std::string& verb) {
  std::lock_guard<std::mutex> lock(log_mu_);
  ++requests_[verb];
}

json Cluster::stats() const {
  json objects = json::object();
  uint64_t rv = 0;
  {
    auto& self = const_cast<Cluster&>(*this);
    std::lock_guard<std::mutex> lock(self.store_.mutex());
    for (const auto& [name, c] : self.store_.collections()) {
      objects[name] = c->items.size();
    }
    rv = self.store_.rv();
  }
  std::lock_guard<std::mutex> lock(log_mu_);
  return {{"resourceVersion", rv},
          {"objects", objects},
          {"bindsAccepted", binds_ok_},
          {"bindsRejected", binds_failed_},
          {"requests", requests_}};
}

}  // namespace kube_emulator
