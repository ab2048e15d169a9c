#include "kube_emulator/pods.h"

#include <algorithm>

namespace kube_emulator {

namespace {

void default_container(json& c) {
  if (!c.is_object()) return;
  if (!c.contains("terminationMessagePath")) c["terminationMessagePath"] = "/dev/termination-log";
  if (!c.contains("terminationMessagePolicy")) c["terminationMessagePolicy"] = "File";
  if (!c.contains("imagePullPolicy")) {
    const std::string image = c.value("image", "");
    const auto slash = image.rfind('/');
    const std::string last = slash == std::string::npos ? image : image.substr(slash + 1);
    const bool tagged = last.find(':') != std::string::npos || image.find('@') != std::string::npos;
    c["imagePullPolicy"] = (!tagged || image.ends_with(":latest")) ? "Always" : "IfNotPresent";
  }
  // Quantities are strings on the wire ("1", not 1), as the server serializes them.
  for (const char* kind : {"requests", "limits"}) {
    json* q = c.contains("resources") && c["resources"].is_object() &&
                      c["resources"].contains(kind) && c["resources"][kind].is_object()
                  ? &c["resources"][kind]
                  : nullptr;
    if (q == nullptr) continue;
    for (auto& [k, v] : q->items()) {
      if (v.is_number_integer()) {
        v = std::to_string(v.get<int64_t>());
      } else if (v.is_number()) {
        const auto milli = static_cast<int64_t>(v.get<double>() * 1000 + 0.5);
        v = milli % 1000 == 0 ? std::to_string(milli / 1000) : std::to_string(milli) + "m";
      }
    }
  }
  // Requests default to limits (apiserver defaulting).
  if (c.contains("resources") && c["resources"].is_object() && c["resources"].contains("limits") &&
      c["resources"]["limits"].is_object()) {
    json& res = c["resources"];
    if (!res.contains("requests") || !res["requests"].is_object()) res["requests"] = json::object();
    for (const auto& [k, v] : res["limits"].items()) {
      if (!res["requests"].contains(k)) res["requests"][k] = v;
    }
  }
  if (!c.contains("resources")) c["resources"] = json::object();
}

Resources container_requests(const json& c) {
  Resources r;
  const json* req = find_path(c, "resources.requests");
  if (req == nullptr || !req->is_object()) return r;
  for (const auto& [k, v] : req->items()) {
    std::optional<int64_t> q;
    if (v.is_string()) q = parse_quantity_milli(v.get<std::string>());
    if (v.is_number()) q = static_cast<int64_t>(v.get<double>() * 1000);
    if (q) r[k] += *q;
  }
  return r;
}

std::string qos_class(const json& pod) {
  bool any = false, guaranteed = true;
  for (const char* list : {"containers", "initContainers"}) {
    const json* cs = find_path(pod, std::string("spec.") + list);
    if (cs == nullptr || !cs->is_array()) continue;
    for (const auto& c : *cs) {
      const json* req = find_path(c, "resources.requests");
      const json* lim = find_path(c, "resources.limits");
      const bool has_req = req != nullptr && req->is_object() && !req->empty();
      const bool has_lim = lim != nullptr && lim->is_object() && !lim->empty();
      any = any || has_req || has_lim;
      if (!has_lim || lim->find("cpu") == lim->end() || lim->find("memory") == lim->end()) {
        guaranteed = false;
        continue;
      }
      if (has_req) {
        for (const auto& [k, v] : req->items()) {
          if (lim->find(k) == lim->end() || (*lim)[k] != v) guaranteed = false;
        }
      }
    }
  }
  if (!any) return "BestEffort";
  return guaranteed ? "Guaranteed" : "Burstable";
}

}  // namespace

std::string default_pod(
    json& pod, const std::function<std::optional<PriorityInfo>(const std::string&)>& priority_of) {
  json& spec = pod["spec"];
  if (!spec.is_object()) spec = json::object();
  if (!spec.contains("schedulerName")) spec["schedulerName"] = "default-scheduler";
  if (!spec.contains("restartPolicy")) spec["restartPolicy"] = "Always";
  if (!spec.contains("terminationGracePeriodSeconds")) spec["terminationGracePeriodSeconds"] = 30;
  if (!spec.contains("dnsPolicy")) spec["dnsPolicy"] = "ClusterFirst";
  if (!spec.contains("securityContext")) spec["securityContext"] = json::object();
  if (!spec.contains("enableServiceLinks")) spec["enableServiceLinks"] = true;
  if (!spec.contains("serviceAccountName")) spec["serviceAccountName"] = "default";
  if (!spec.contains("serviceAccount")) spec["serviceAccount"] = spec["serviceAccountName"];
  for (const char* list : {"containers", "initContainers"}) {
    if (spec.contains(list) && spec[list].is_array()) {
      for (auto& c : spec[list]) default_container(c);
    }
  }
  // DefaultTolerationSeconds admission plugin.
  json tolerations = spec.contains("tolerations") && spec["tolerations"].is_array()
                         ? spec["tolerations"]
                         : json::array();
  for (const char* key : {"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"}) {
    bool has = false;
    for (const auto& t : tolerations) {
      has = has || (t.value("key", "") == key && t.value("effect", "NoExecute") == "NoExecute");
    }
    if (!has) {
      tolerations.push_back({{"key", key},
                             {"operator", "Exists"},
                             {"effect", "NoExecute"},
                             {"tolerationSeconds", 300}});
    }
  }
  spec["tolerations"] = tolerations;
  // Priority admission plugin.
  const std::string pc = spec.value("priorityClassName", "");
  const auto info = priority_of(pc);
  if (!pc.empty() && !info) {
    return "no PriorityClass with name " + pc + " was found";
  }
  if (info) {
    if (!info->name.empty()) spec["priorityClassName"] = info->name;
    spec["priority"] = info->value;
    if (!spec.contains("preemptionPolicy")) spec["preemptionPolicy"] = info->preemption_policy;
  } else {
    spec["priority"] = 0;
    if (!spec.contains("preemptionPolicy")) spec["preemptionPolicy"] = "PreemptLowerPriority";
  }
  json status = json::object();
  status["phase"] = "Pending";
  status["qosClass"] = qos_class(pod);
  pod["status"] = status;
  return "";
}

Resources pod_requests(const json& pod) {
  Resources total;
  if (const json* cs = find_path(pod, "spec.containers"); cs != nullptr && cs->is_array()) {
    for (const auto& c : *cs) {
      for (const auto& [k, v] : container_requests(c)) total[k] += v;
    }
  }
  if (const json* cs = find_path(pod, "spec.initContainers"); cs != nullptr && cs->is_array()) {
    for (const auto& c : *cs) {
      const bool sidecar = c.value("restartPolicy", "") == "Always";
      for (const auto& [k, v] : container_requests(c)) {
        if (sidecar) {
          total[k] += v;
        } else {
          total[k] = std::max(total[k], v);
        }
      }
    }
  }
  if (const json* o = find_path(pod, "spec.overhead"); o != nullptr && o->is_object()) {
    for (const auto& [k, v] : o->items()) {
      if (v.is_string()) {
        if (const auto q = parse_quantity_milli(v.get<std::string>())) total[k] += *q;
      }
    }
  }
  return total;
}

json resources_to_json(const Resources& r) {
  json out = json::object();
  for (const auto& [k, v] : r) {
    if (v % 1000 == 0) {
      out[k] = std::to_string(v / 1000);
    } else {
      out[k] = std::to_string(v) + "m";
    }
  }
  return out;
}

std::string pod_update_error(const json& old_pod, const json& updated) {
  json a = old_pod.value("spec", json::object());
  json b = updated.value("spec", json::object());
  // Fields an update may change: images, activeDeadlineSeconds, added tolerations, removed
  // scheduling gates (pkg/apis/core/validation ValidatePodUpdate).
  for (json* s : {&a, &b}) {
    for (const char* list : {"containers", "initContainers"}) {
      if (s->contains(list) && (*s)[list].is_array()) {
        for (auto& c : (*s)[list]) {
          if (c.is_object()) c.erase("image");
        }
      }
    }
    s->erase("activeDeadlineSeconds");
    s->erase("tolerations");
    s->erase("schedulingGates");
  }
  const size_t old_gates = old_pod.contains("spec") && old_pod["spec"].contains("schedulingGates")
                               ? old_pod["spec"]["schedulingGates"].size()
                               : 0;
  const size_t new_gates = updated.contains("spec") && updated["spec"].contains("schedulingGates")
                               ? updated["spec"]["schedulingGates"].size()
                               : 0;
  if (a == b && new_gates <= old_gates) return "";
  return "Pod \"" + string_at(updated, "metadata.name") +
         "\" is invalid: spec: Forbidden: pod updates may not change fields other than "
         "`spec.containers[*].image`,`spec.initContainers[*].image`,"
         "`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing "
         "tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was "
         "previously negative)";
}

void set_condition(json& obj, const std::string& type, const std::string& status,
                   const std::string& reason, const std::string& message) {
  json& st = obj["status"];
  if (!st.is_object()) st = json::object();
  json& conds = st["conditions"];
  if (!conds.is_array()) conds = json::array();
  const std::string now = rfc3339(Clock::now());
  for (auto& c : conds) {
    if (c.value("type", "") == type) {
      if (c.value("status", "") != status) c["lastTransitionTime"] = now;
      c["status"] = status;
      if (!reason.empty()) {
        c["reason"] = reason;
      } else {
        c.erase("reason");
      }
      if (!message.empty()) {
        c["message"] = message;
      } else {
        c.erase("message");
      }
      return;
    }
  }
  json c = {
      {"type", type}, {"status", status}, {"lastProbeTime", nullptr}, {"lastTransitionTime", now}};
  if (!reason.empty()) c["reason"] = reason;
  if (!message.empty()) c["message"] = message;
  conds.push_back(c);
}

std::string condition_status(const json& obj, const std::string& type) {
  const json* conds = find_path(obj, "status.conditions");
  if (conds == nullptr || !conds->is_array()) return "";
  for (const auto& c : *conds) {
    if (c.value("type", "") == type) return c.value("status", "");
  }
  return "";
}

bool pod_terminal(const json& pod) {
  const std::string phase = string_at(pod, "status.phase");
  return phase == "Succeeded" || phase == "Failed";
}

namespace {
void move_field(const json& from, json& to, const char* src, const char* dst) {
  if (const auto it = from.find(src); it != from.end() && !it->is_null()) to[dst] = *it;
}
}  // namespace

json event_core_to_v1(const json& core) {
  json v1 = {{"kind", "Event"}, {"apiVersion", "events.k8s.io/v1"}};
  move_field(core, v1, "metadata", "metadata");
  move_field(core, v1, "eventTime", "eventTime");
  move_field(core, v1, "series", "series");
  move_field(core, v1, "reportingComponent", "reportingController");
  move_field(core, v1, "reportingInstance", "reportingInstance");
  move_field(core, v1, "action", "action");
  move_field(core, v1, "reason", "reason");
  move_field(core, v1, "involvedObject", "regarding");
  move_field(core, v1, "related", "related");
  move_field(core, v1, "message", "note");
  move_field(core, v1, "type", "type");
  move_field(core, v1, "source", "deprecatedSource");
  move_field(core, v1, "firstTimestamp", "deprecatedFirstTimestamp");
  move_field(core, v1, "lastTimestamp", "deprecatedLastTimestamp");
  move_field(core, v1, "count", "deprecatedCount");
  if (!v1.contains("eventTime")) v1["eventTime"] = nullptr;
  return v1;
}

json event_v1_to_core(const json& v1) {
  json core = {{"kind", "Event"}, {"apiVersion", "v1"}};
  move_field(v1, core, "metadata", "metadata");
  move_field(v1, core, "eventTime", "eventTime");
  move_field(v1, core, "series", "series");
  move_field(v1, core, "reportingController", "reportingComponent");
  move_field(v1, core, "reportingInstance", "reportingInstance");
  move_field(v1, core, "action", "action");
  move_field(v1, core, "reason", "reason");
  move_field(v1, core, "regarding", "involvedObject");
  move_field(v1, core, "related", "related");
  move_field(v1, core, "note", "message");
  move_field(v1, core, "type", "type");
  move_field(v1, core, "deprecatedSource", "source");
  move_field(v1, core, "deprecatedFirstTimestamp", "firstTimestamp");
  move_field(v1, core, "deprecatedLastTimestamp", "lastTimestamp");
  move_field(v1, core, "deprecatedCount", "count");
  if (!core.contains("source")) core["source"] = json::object();
  if (!core.contains("involvedObject")) core["involvedObject"] = json::object();
  if (!core.contains("reportingComponent")) core["reportingComponent"] = "";
  if (!core.contains("reportingInstance")) core["reportingInstance"] = "";
  return core;
}

}  // namespace kube_emulator
