#include "kube_emulator/tables.h"

#include "kube_emulator/pods.h"

namespace kube_emulator {

IncludeObject include_object_of(const std::string& p) {
  if (p == "None") return IncludeObject::None;
  if (p == "Object") return IncludeObject::Object;
  return IncludeObject::Metadata;
}

namespace {

json column(const std::string& name, const std::string& type, const std::string& description,
            int priority = 0, const std::string& format = "") {
  return {{"name", name},
          {"type", type},
          {"format", format},
          {"description", description},
          {"priority", priority}};
}

std::string age_of(const json& obj) {
  const auto t = parse_rfc3339(string_at(obj, "metadata.creationTimestamp"));
  if (!t) return "<unknown>";
  return human_duration(std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - *t));
}

std::string or_none(const std::string& s) {
  return s.empty() ? "<none>" : s;
}

json pod_cells(const json& pod) {
  const json* cs = find_path(pod, "spec.containers");
  const size_t total = cs != nullptr && cs->is_array() ? cs->size() : 0;
  size_t ready = 0;
  int64_t restarts = 0;
  std::string reason = string_at(pod, "status.phase");
  if (const std::string r = string_at(pod, "status.reason"); !r.empty()) reason = r;
  if (const json* st = find_path(pod, "status.containerStatuses");
      st != nullptr && st->is_array()) {
    for (const auto& c : *st) {
      restarts += c.value("restartCount", int64_t{0});
      if (c.value("ready", false) && find_path(c, "state.running") != nullptr) ++ready;
      if (const json* w = find_path(c, "state.waiting.reason"); w != nullptr && w->is_string()) {
        reason = w->get<std::string>();
      } else if (const json* t = find_path(c, "state.terminated.reason");
                 t != nullptr && t->is_string()) {
        reason = t->get<std::string>();
      }
    }
  }
  if (reason == "Pending") {
    const json* gates = find_path(pod, "spec.schedulingGates");
    if (gates != nullptr && gates->is_array() && !gates->empty()) reason = "SchedulingGated";
  }
  if (find_path(pod, "metadata.deletionTimestamp") != nullptr) {
    reason = string_at(pod, "status.reason") == "NodeLost" ? "Unknown" : "Terminating";
  }
  std::string gates = "<none>";
  if (const json* rg = find_path(pod, "spec.readinessGates");
      rg != nullptr && rg->is_array() && !rg->empty()) {
    size_t ok = 0;
    for (const auto& g : *rg) {
      if (condition_status(pod, g.value("conditionType", "")) == "True") ++ok;
    }
    gates = std::to_string(ok) + "/" + std::to_string(rg->size());
  }
  return {string_at(pod, "metadata.name"),
          std::to_string(ready) + "/" + std::to_string(total),
          reason,
          std::to_string(restarts),
          age_of(pod),
          or_none(string_at(pod, "status.podIP")),
          or_none(string_at(pod, "spec.nodeName")),
          or_none(string_at(pod, "status.nominatedNodeName")),
          gates};
}

json node_cells(const json& node) {
  const std::string ready = condition_status(node, "Ready");
  std::string status = ready == "True" ? "Ready" : ready == "False" ? "NotReady" : "Unknown";
  if (const json* u = find_path(node, "spec.unschedulable");
      u != nullptr && u->is_boolean() && u->get<bool>()) {
    status += ",SchedulingDisabled";
  }
  std::string roles;
  if (const json* l = find_path(node, "metadata.labels"); l != nullptr && l->is_object()) {
    for (const auto& [k, v] : l->items()) {
      if (starts_with(k, "node-role.kubernetes.io/")) {
        roles += (roles.empty() ? "" : ",") + k.substr(24);
      } else if (k == "kubernetes.io/role" && v.is_string()) {
        roles += (roles.empty() ? "" : ",") + v.get<std::string>();
      }
    }
  }
  std::string internal, external;
  if (const json* a = find_path(node, "status.addresses"); a != nullptr && a->is_array()) {
    for (const auto& addr : *a) {
      if (addr.value("type", "") == "InternalIP" && internal.empty())
        internal = addr.value("address", "");
      if (addr.value("type", "") == "ExternalIP" && external.empty())
        external = addr.value("address", "");
    }
  }
  return {string_at(node, "metadata.name"),
          status,
          or_none(roles),
          age_of(node),
          string_at(node, "status.nodeInfo.kubeletVersion"),
          or_none(internal),
          or_none(external),
          or_none(string_at(node, "status.nodeInfo.osImage")),
          or_none(string_at(node, "status.nodeInfo.kernelVersion")),
          or_none(string_at(node, "status.nodeInfo.containerRuntimeVersion"))};
}

}  // namespace

json table_columns(const ResourceInfo& r) {
  const std::string name_doc =
      "Name must be unique within a namespace. Is required when creating resources, although "
      "some resources may allow a client to request the generation of an appropriate name "
      "automatically. Name is primarily intended for creation idempotence and configuration "
      "definition. Cannot be updated. More info: "
      "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
  const std::string age_doc =
      "CreationTimestamp is a timestamp representing the server time when this object was "
      "created.";
  if (!r.printer_columns.empty()) {
    json cols = {column("Name", "string", name_doc, 0, "name")};
    for (const PrinterColumn& c : r.printer_columns) {
      cols.push_back(column(c.name, c.type, c.description, c.priority));
    }
    return cols;
  }
  if (r.is("", "pods")) {
    return {column("Name", "string", name_doc, 0, "name"),
            column("Ready", "string",
                   "The aggregate readiness state of this pod for accepting traffic."),
            column("Status", "string", "The aggregate status of the containers in this pod."),
            column("Restarts", "string",
                   "The number of times the containers in this pod have been restarted and when "
                   "the last container in this pod has restarted."),
            column("Age", "string", age_doc),
            column("IP", "string", "podIP is the IP address allocated to the pod.", 1),
            column("Node", "string", "nodeName indicates in which node this pod is scheduled.", 1),
            column("Nominated Node", "string",
                   "nominatedNodeName is set when this pod preempts other pods on the node.", 1),
            column("Readiness Gates", "string",
                   "If specified, all readiness gates will be evaluated for pod readiness.", 1)};
  }
  if (r.is("", "nodes")) {
    return {
        column("Name", "string", name_doc, 0, "name"),
        column("Status", "string", "The status of the node"),
        column("Roles", "string", "The roles of the node"),
        column("Age", "string", age_doc),
        column("Version", "string", "Kubelet Version reported by the node."),
        column("Internal-IP", "string", "List of internal IPs of the node.", 1),
        column("External-IP", "string", "List of external IPs of the node.", 1),
        column("OS-Image", "string",
               "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 "
               "(wheezy)).",
               1),
        column("Kernel-Version", "string",
               "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).",
               1),
        column("Container-Runtime", "string",
               "Container runtime version reported by the node through runtime remote API (e.g. "
               "containerd://1.4.2).",
               1)};
  }
  if (r.is("", "namespaces")) {
    return {column("Name", "string", name_doc, 0, "name"),
            column("Status", "string", "The status of the namespace"),
            column("Age", "string", age_doc)};
  }
  return {column("Name", "string", name_doc, 0, "name"), column("Age", "string", age_doc)};
}

json partial_metadata(const json& obj) {
  return {{"kind", "PartialObjectMetadata"},
          {"apiVersion", "meta.k8s.io/v1"},
          {"metadata", obj.value("metadata", json::object())}};
}

json table_row(const ResourceInfo& r, const json& obj, IncludeObject include) {
  json cells;
  if (!r.printer_columns.empty()) {
    // As the real server prints a CRD: the name, then each column at its JSON path (null
    // where the object has no value there; a date as an age).
    cells = {string_at(obj, "metadata.name")};
    for (const PrinterColumn& c : r.printer_columns) {
      const std::string_view path =
          std::string_view(c.json_path).substr(c.json_path.starts_with('.') ? 1 : 0);
      const json* v = find_path(obj, path);
      if (v == nullptr || v->is_null()) {
        cells.push_back(nullptr);
      } else if (c.type == "date" && v->is_string()) {
        const auto t = parse_rfc3339(v->get<std::string>());
        cells.push_back(
            t ? human_duration(std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - *t))
              : "<unknown>");
      } else {
        cells.push_back(*v);
      }
    }
  } else if (r.is("", "pods")) {
    cells = pod_cells(obj);
  } else if (r.is("", "nodes")) {
    cells = node_cells(obj);
  } else if (r.is("", "namespaces")) {
    cells = {string_at(obj, "metadata.name"), string_at(obj, "status.phase"), age_of(obj)};
  } else {
    cells = {string_at(obj, "metadata.name"), age_of(obj)};
  }
  json row = {{"cells", cells}};
  if (include == IncludeObject::Metadata) row["object"] = partial_metadata(obj);
  if (include == IncludeObject::Object) row["object"] = obj;
  return row;
}

json make_table(const ResourceInfo& r, const std::vector<const json*>& objs, IncludeObject include,
                const std::string& rv, const std::string& cont, bool with_columns) {
  json meta = {{"resourceVersion", rv}};
  if (!cont.empty()) meta["continue"] = cont;
  json rows = json::array();
  for (const json* o : objs) rows.push_back(table_row(r, *o, include));
  json t = {{"kind", "Table"}, {"apiVersion", "meta.k8s.io/v1"}, {"metadata", meta}};
  t["columnDefinitions"] = with_columns ? table_columns(r) : json::array();
  t["rows"] = rows;
  return t;
}

}  // namespace kube_emulator
