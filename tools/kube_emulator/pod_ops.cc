// Cluster: the pod subresources (binding, eviction), graceful pod deletion, PDB checks and the
// binding log.
#include <cmath>

#include "kube_emulator/cluster.h"
#include "kube_emulator/pods.h"

namespace kube_emulator {

namespace {

const std::string kPods = "/pods";

Result fail(int code, const std::string& message, const std::string& name = "",
            const std::string& qualified = "") {
  return Result{code, status_failure(code, reason_for_code(code), message, name, qualified), {}};
}

// An int or a "N%" of `total` (rounded up), as intstr.GetScaledValueFromIntOrPercent.
int64_t scaled(const json& v, int64_t total) {
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_string()) {
    std::string s = v.get<std::string>();
    if (!s.empty() && s.back() == '%') {
      s.pop_back();
      try {
        return static_cast<int64_t>(std::ceil(std::stod(s) * static_cast<double>(total) / 100.0));
      } catch (const std::exception&) {
        return 0;
      }
    }
    try {
      return std::stoll(s);
    } catch (const std::exception&) {
      return 0;
    }
  }
  return 0;
}

}  // namespace

std::string Cluster::pdb_violation(const std::string& ns, const json& pod, int& code) {
  std::vector<ObjPtr> pdbs;
  Collection& pc = store_.collection("policy/poddisruptionbudgets");
  const std::string prefix = ns + "/";
  const json labels =
      find_path(pod, "metadata.labels") ? *find_path(pod, "metadata.labels") : json::object();
  for (auto it = pc.items.lower_bound(prefix);
       it != pc.items.end() && starts_with(it->first, prefix); ++it) {
    const json* sel = find_path(it->second->j(), "spec.selector");
    if (sel == nullptr) continue;
    const auto s = LabelSelector::from_json(*sel);
    if (s && s->matches(labels)) pdbs.push_back(it->second);
  }
  if (pdbs.empty()) return "";
  if (pdbs.size() > 1) {
    code = 500;
    return "This pod has more than one PodDisruptionBudget, which the eviction subresource does "
           "not support.";
  }
  const json& pdb = pdbs.front()->j();
  const auto sel = LabelSelector::from_json(*find_path(pdb, "spec.selector"));
  int64_t expected = 0, healthy = 0;
  Collection& pods = store_.collection(kPods);
  for (auto it = pods.items.lower_bound(prefix);
       it != pods.items.end() && starts_with(it->first, prefix); ++it) {
    const json& p = it->second->j();
    const json* pl = find_path(p, "metadata.labels");
    if (!sel->matches(pl != nullptr ? *pl : json::object()) || pod_terminal(p)) continue;
    ++expected;
    if (!p["metadata"].contains("deletionTimestamp") && condition_status(p, "Ready") == "True") {
      ++healthy;
    }
  }
  int64_t desired = 1;
  if (const json* min = find_path(pdb, "spec.minAvailable"); min != nullptr && !min->is_null()) {
    desired = scaled(*min, expected);
  } else if (const json* max = find_path(pdb, "spec.maxUnavailable");
             max != nullptr && !max->is_null()) {
    desired = expected - scaled(*max, expected);
  }
  if (healthy - desired > 0) return "";
  code = 429;
  return "The disruption budget " + string_at(pdb, "metadata.name") + " needs " +
         std::to_string(desired) + " healthy pods and has " + std::to_string(healthy) +
         " currently";
}

Result Cluster::evict(const std::string& ns, const std::string& name, const json& eviction) {
  count_request("evict");
  if (!eviction.is_object() || eviction.value("kind", "Eviction") != "Eviction") {
    return fail(400, "the body of the request must be a policy/v1 Eviction");
  }
  std::lock_guard<std::mutex> lock(store_.mutex());
  const std::string key = object_key(ns, name);
  ObjPtr pod = store_.get(store_.collection(kPods), key);
  if (!pod) return fail(404, "pods \"" + name + "\" not found", name, "pods");
  const json options = eviction.value("deleteOptions", json::object());
  const std::string uid = string_at(pod->j(), "metadata.uid");
  const std::string want_uid = string_at(options, "preconditions.uid");
  if (!want_uid.empty() && want_uid != uid) {
    return fail(409,
                "Operation cannot be fulfilled on pods \"" + name +
                    "\": Precondition failed: UID in precondition: " + want_uid +
                    ", UID in object meta: " + uid,
                name, "pods");
  }
  if (pod->j()["metadata"].contains("deletionTimestamp")) {
    return Result{201, status_success(201), {}};
  }
  const std::string phase = string_at(pod->j(), "status.phase");
  if (phase != "Succeeded" && phase != "Failed" && phase != "Pending") {
    int code = 0;
    const std::string why = pdb_violation(ns, pod->j(), code);
    if (code == 429) {
      Result r = fail(429, "Cannot evict pod as it would violate the pod's disruption budget.",
                      name, "pods");
      r.body["details"]["causes"] = {{{"reason", "DisruptionBudget"}, {"message", why}}};
      return r;
    }
    if (code != 0) return fail(code, why, name, "pods");
  }
  json nw = pod->j();
  set_condition(nw, "DisruptionTarget", "True", "EvictionByEvictionAPI", "Eviction API: evicting");
  pod = put_locked(kPods, key, std::move(nw));
  const Result d = delete_pod_locked(*registry_.find("", "v1", "pods"), key, pod, options, false);
  if (!d.ok()) return d;
  return Result{201, status_success(201), {}};
}

Result Cluster::delete_pod_locked(const ResourceInfo& r, const std::string& key, const ObjPtr& pod,
                                  const json& options, bool dry_run) {
  const json& old = pod->j();
  int64_t grace = 30;
  if (const json* g = find_path(old, "spec.terminationGracePeriodSeconds");
      g != nullptr && g->is_number_integer()) {
    grace = g->get<int64_t>();
  }
  if (const auto it = options.find("gracePeriodSeconds");
      it != options.end() && it->is_number_integer()) {
    grace = it->get<int64_t>();
  }
  if (grace < 0) grace = 0;
  if (string_at(old, "spec.nodeName").empty() || pod_terminal(old)) grace = 0;
  if (dry_run) return Result{200, old, {}};
  const json* fin = find_path(old, "metadata.finalizers");
  const bool finalizers = fin != nullptr && fin->is_array() && !fin->empty();
  const json& meta = old["metadata"];
  if (meta.contains("deletionTimestamp") &&
      meta.value("deletionGracePeriodSeconds", int64_t{0}) <= grace) {
    return Result{200, {}, pod};  // already terminating, no shorter grace asked
  }
  if (grace == 0 && !finalizers) return Result{200, {}, erase_locked(r.storage, key)};
  json nw = old;
  nw["metadata"]["deletionTimestamp"] = rfc3339(Clock::now() + std::chrono::seconds(grace));
  nw["metadata"]["deletionGracePeriodSeconds"] = grace;
  return Result{200, {}, put_locked(r.storage, key, std::move(nw))};
}

Result Cluster::bind(const std::string& ns, const std::string& name, const json& binding) {
  count_request("bind");
  BindRecord rec;
  rec.time = rfc3339_micro(Clock::now());
  rec.ns = ns;
  rec.name = name;
  rec.node = string_at(binding, "target.name");
  rec.annotations = json::object();
  if (const json* a = find_path(binding, "metadata.annotations"); a != nullptr && a->is_object()) {
    rec.annotations = *a;
  }
  rec.requests = json::object();
  const auto finish = [&](Result r) {
    rec.code = r.code;
    rec.message = r.body.is_object() ? r.body.value("message", "") : "";
    log_bind(rec);
    return r;
  };
  const std::string qualified = "pods/binding";
  const auto conflict = [&](const std::string& why) {
    return fail(409, "Operation cannot be fulfilled on pods/binding \"" + name + "\": " + why, name,
                qualified);
  };
  std::lock_guard<std::mutex> lock(store_.mutex());
  if (!binding.is_object() || binding.value("kind", "Binding") != "Binding") {
    return finish(fail(400, "the body of the request must be a v1 Binding"));
  }
  const std::string body_name = string_at(binding, "metadata.name");
  if (!body_name.empty() && body_name != name) {
    return finish(fail(400, "name in URL does not match name in Binding object"));
  }
  const std::string target_kind = string_at(binding, "target.kind");
  if (rec.node.empty() || (!target_kind.empty() && target_kind != "Node")) {
    return finish(fail(422,
                       "Binding \"" + name +
                           "\" is invalid: target: Invalid value: "
                           "must be a Node with a name",
                       name, qualified));
  }
  const std::string key = object_key(ns, name);
  ObjPtr pod = store_.get(store_.collection(kPods), key);
  if (!pod) return finish(fail(404, "pods \"" + name + "\" not found", name, "pods"));
  const json& p = pod->j();
  rec.uid = string_at(p, "metadata.uid");
  rec.requests = resources_to_json(pod_requests(p));
  {
    std::lock_guard<std::mutex> flock(log_mu_);
    for (auto it = faults_.begin(); it != faults_.end(); ++it) {
      if ((it->pod.empty() || it->pod == key) && (it->node.empty() || it->node == rec.node)) {
        const int code = it->code;
        const std::string msg = it->message.empty() ? "injected failure" : it->message;
        if (--it->count <= 0) faults_.erase(it);
        Result r = code == 409 ? conflict(msg) : fail(code, msg, name, qualified);
        rec.code = r.code;
        rec.message = msg;
        binds_.push_back(rec);
        ++binds_failed_;
        if (bind_log_ != nullptr) {
          std::fprintf(bind_log_, "%s\n", rec.to_json().dump().c_str());
          std::fflush(bind_log_);
        }
        return r;
      }
    }
  }
  const std::string want_uid = string_at(binding, "metadata.uid");
  if (!want_uid.empty() && want_uid != rec.uid) {
    return finish(conflict("Precondition failed: UID in precondition: " + want_uid +
                           ", UID in object meta: " + rec.uid));
  }
  if (p["metadata"].contains("deletionTimestamp")) {
    return finish(conflict("pod " + name + " is being deleted, cannot be assigned to a host"));
  }
  const std::string assigned = string_at(p, "spec.nodeName");
  if (!assigned.empty()) {
    return finish(conflict("pod " + name + " is already assigned to node \"" + assigned + "\""));
  }
  if (const json* g = find_path(p, "spec.schedulingGates");
      g != nullptr && g->is_array() && !g->empty()) {
    return finish(conflict("pod " + name + " has non-empty .spec.schedulingGates"));
  }
  json nw = p;
  nw["spec"]["nodeName"] = rec.node;
  if (rec.annotations.is_object()) {
    for (const auto& [k, v] : rec.annotations.items()) nw["metadata"]["annotations"][k] = v;
  }
  set_condition(nw, "PodScheduled", "True");
  put_locked(kPods, key, std::move(nw));
  return finish(Result{201, status_success(201), {}});
}

void Cluster::log_bind(BindRecord rec) {
  std::lock_guard<std::mutex> lock(log_mu_);
  if (rec.code < 300) {
    ++binds_ok_;
  } else {
    ++binds_failed_;
  }
  if (bind_log_ != nullptr) {
    std::fprintf(bind_log_, "%s\n", rec.to_json().dump().c_str());
    std::fflush(bind_log_);
  }
  binds_.push_back(std::move(rec));
}

void Cluster::add_bind_fault(const BindFault& f) {
  std::lock_guard<std::mutex> lock(log_mu_);
  faults_.push_back(f);
}

std::vector<BindRecord> Cluster::bindings() const {
  std::lock_guard<std::mutex> lock(log_mu_);
  return binds_;
}

namespace {

std::string encode_continue(uint64_t rv, const std::string& start) {
  return base64_encode(json{{"v", "meta.k8s.io/v1"}, {"rv", rv}, {"start", start}}.dump());
}

bool decode_continue(const std::string& token, uint64_t& rv, std::string& start) {
  const auto raw = base64_decode(token);
  if (!raw) return false;
  try {
    const json j = json::parse(*raw);
    rv = j.at("rv").get<uint64_t>();
    start = j.at("start").get<std::string>();
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

ListResult Cluster::list(const ResourceInfo& r, const std::string& ns, const ListQuery& q) {
  count_request("list");
  ListResult out;
  std::lock_guard<std::mutex> lock(store_.mutex());
  Collection& c = store_.collection(r.storage);
  out.rv = store_.rv();
  std::string start;
  if (!q.cont.empty()) {
    uint64_t rv = 0;
    if (!decode_continue(q.cont, rv, start)) {
      out.code = 400;
      out.error = status_failure(400, "BadRequest", "continue key is not valid: invalid token");
      return out;
    }
    if (rv < c.floor) {
      out.code = 410;
      out.error = status_failure(
          410, "Expired",
          "The provided continue parameter is too old to display a consistent list result. You "
          "can start a new list without the continue parameter, or use the continue token in "
          "this response to retrieve the remainder of the results. Continuing with the provided "
          "token results in an inconsistent list - objects that were created, modified, or "
          "deleted between the time the first chunk was returned and now may show up in the "
          "list.");
      out.error["metadata"]["continue"] = encode_continue(store_.rv(), start);
      return out;
    }
    out.rv = rv;
  }
  const std::string prefix = (r.namespaced && !ns.empty()) ? ns + "/" : "";
  if (start.empty()) start = prefix;
  const auto matches = [&](const ObjPtr& o) {
    const json& j = o->j();
    const json* labels = find_path(j, "metadata.labels");
    return q.labels.matches(labels != nullptr ? *labels : json()) && q.fields.matches(j);
  };
  const auto take = [&](const std::string& key, const ObjPtr& o) {
    if (!matches(o)) return true;
    if (q.limit > 0 && out.items.size() == q.limit) {
      out.cont = encode_continue(out.rv, key);
      return false;
    }
    out.items.push_back(o);
    return true;
  };
  // Index: pods by spec.nodeName (a non-empty node name).
  std::optional<std::string> node;
  if (r.is("", "pods")) node = q.fields.equals("spec.nodeName");
  if (node && !node->empty()) {
    const auto it = c.by_node.find(*node);
    if (it != c.by_node.end()) {
      for (auto k = it->second.lower_bound(start); k != it->second.end(); ++k) {
        if (!starts_with(*k, prefix)) continue;
        if (!take(*k, c.items.at(*k))) break;
      }
    }
    return out;
  }
  for (auto it = c.items.lower_bound(start); it != c.items.end(); ++it) {
    if (!prefix.empty() && !starts_with(it->first, prefix)) break;
    if (!take(it->first, it->second)) break;
  }
  return out;
}

}  // namespace kube_emulator
