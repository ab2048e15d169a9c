#include "kube_emulator/registry.h"

#include <algorithm>

namespace kube_emulator {

namespace {

const std::vector<std::string> kStandardVerbs = {"create", "delete", "deletecollection", "get",
                                                 "list",   "patch",  "update",           "watch"};

std::string gvr_key(const std::string& g, const std::string& v, const std::string& r) {
  return g + "/" + v + "/" + r;
}

struct Builtin {
  const char* group;
  const char* version;
  const char* resource;
  const char* kind;
  bool namespaced;
  std::vector<std::string> short_names;
  std::vector<std::string> subresources;
  std::vector<std::string> categories;
  std::vector<std::string> verbs;
  const char* storage;
};

// Built-in kinds. podgroups come pre-installed as if their CRDs had been applied.
const std::vector<Builtin>& builtins() {
  static const std::vector<Builtin> b = {
      {"", "v1", "bindings", "Binding", true, {}, {}, {}, {"create"}, nullptr},
      {"", "v1", "configmaps", "ConfigMap", true, {"cm"}, {}, {}, {}, nullptr},
      {"", "v1", "endpoints", "Endpoints", true, {"ep"}, {}, {}, {}, nullptr},
      {"", "v1", "events", "Event", true, {"ev"}, {}, {}, {}, "/events"},
      {"", "v1", "limitranges", "LimitRange", true, {"limits"}, {}, {}, {}, nullptr},
      {"",
       "v1",
       "namespaces",
       "Namespace",
       false,
       {"ns"},
       {"status"},
       {},
       {"create", "delete", "get", "list", "patch", "update", "watch"},
       nullptr},
      {"", "v1", "nodes", "Node", false, {"no"}, {"status"}, {}, {}, nullptr},
      {"",
       "v1",
       "persistentvolumeclaims",
       "PersistentVolumeClaim",
       true,
       {"pvc"},
       {"status"},
       {},
       {},
       nullptr},
      {"",
       "v1",
       "persistentvolumes",
       "PersistentVolume",
       false,
       {"pv"},
       {"status"},
       {},
       {},
       nullptr},
      {"",
       "v1",
       "pods",
       "Pod",
       true,
       {"po"},
       {"binding", "eviction", "log", "status"},
       {"all"},
       {},
       nullptr},
      {"", "v1", "resourcequotas", "ResourceQuota", true, {"quota"}, {"status"}, {}, {}, nullptr},
      {"", "v1", "secrets", "Secret", true, {}, {}, {}, {}, nullptr},
      {"", "v1", "serviceaccounts", "ServiceAccount", true, {"sa"}, {}, {}, {}, nullptr},
      {"",
       "v1",
       "services",
       "Service",
       true,
       {"svc"},
       {"status"},
       {"all"},
       {"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"},
       nullptr},
      {"apiextensions.k8s.io",
       "v1",
       "customresourcedefinitions",
       "CustomResourceDefinition",
       false,
       {"crd", "crds"},
       {"status"},
       {"api-extensions"},
       {},
       nullptr},
      {"apps", "v1", "daemonsets", "DaemonSet", true, {"ds"}, {"status"}, {"all"}, {}, nullptr},
      {"apps",
       "v1",
       "deployments",
       "Deployment",
       true,
       {"deploy"},
       {"status"},
       {"all"},
       {},
       nullptr},
      {"apps", "v1", "replicasets", "ReplicaSet", true, {"rs"}, {"status"}, {"all"}, {}, nullptr},
      {"apps",
       "v1",
       "statefulsets",
       "StatefulSet",
       true,
       {"sts"},
       {"status"},
       {"all"},
       {},
       nullptr},
      {"batch", "v1", "cronjobs", "CronJob", true, {"cj"}, {"status"}, {"all"}, {}, nullptr},
      {"batch", "v1", "jobs", "Job", true, {}, {"status"}, {"all"}, {}, nullptr},
      {"coordination.k8s.io", "v1", "leases", "Lease", true, {}, {}, {}, {}, nullptr},
      {"events.k8s.io", "v1", "events", "Event", true, {"ev"}, {}, {}, {}, "/events"},
      {"policy",
       "v1",
       "poddisruptionbudgets",
       "PodDisruptionBudget",
       true,
       {"pdb"},
       {"status"},
       {},
       {},
       nullptr},
      {"rbac.authorization.k8s.io",
       "v1",
       "clusterrolebindings",
       "ClusterRoleBinding",
       false,
       {},
       {},
       {},
       {},
       nullptr},
      {"rbac.authorization.k8s.io",
       "v1",
       "clusterroles",
       "ClusterRole",
       false,
       {},
       {},
       {},
       {},
       nullptr},
      {"rbac.authorization.k8s.io",
       "v1",
       "rolebindings",
       "RoleBinding",
       true,
       {},
       {},
       {},
       {},
       nullptr},
      {"rbac.authorization.k8s.io", "v1", "roles", "Role", true, {}, {}, {}, {}, nullptr},
      {"scheduling.k8s.io",
       "v1",
       "priorityclasses",
       "PriorityClass",
       false,
       {"pc"},
       {},
       {},
       {},
       nullptr},
      {"storage.k8s.io",
       "v1",
       "storageclasses",
       "StorageClass",
       false,
       {"sc"},
       {},
       {},
       {},
       nullptr},
      {"scheduling.x-k8s.io",
       "v1alpha1",
       "podgroups",
       "PodGroup",
       true,
       {"pg", "pgs"},
       {"status"},
       {},
       {},
       nullptr},
      {"scheduling.x-k8s.io",
       "v1alpha1",
       "elasticquotas",
       "ElasticQuota",
       true,
       {"eq", "eqs"},
       {"status"},
       {},
       {},
       nullptr},
      {"scheduling.volcano.sh",
       "v1beta1",
       "podgroups",
       "PodGroup",
       true,
       {"podgroup-v1beta1"},
       {"status"},
       {},
       {},
       nullptr},
      {"scheduling.volcano.sh",
       "v1beta1",
       "queues",
       "Queue",
       false,
       {"q", "queue-v1beta1"},
       {"status"},
       {},
       {},
       nullptr},
  };
  return b;
}

std::string singular_of(const std::string& kind) {
  std::string s = kind;
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

}  // namespace

bool ResourceInfo::has_subresource(const std::string& s) const {
  return std::find(subresources.begin(), subresources.end(), s) != subresources.end();
}

Registry::Registry() {
  for (const auto& b : builtins()) {
    ResourceInfo r;
    r.group = b.group;
    r.version = b.version;
    r.resource = b.resource;
    r.kind = b.kind;
    r.singular = r.resource == "bindings" ? "binding" : singular_of(b.kind);
    r.namespaced = b.namespaced;
    r.short_names = b.short_names;
    r.subresources = b.subresources;
    r.categories = b.categories;
    r.verbs = b.verbs.empty() ? kStandardVerbs : b.verbs;
    if (b.storage != nullptr) r.storage = b.storage;
    r.custom =
        r.group.find('.') != std::string::npos && r.group.find("k8s.io") == std::string::npos;
    if (r.group == "scheduling.x-k8s.io") r.custom = true;
    add(std::move(r));
  }
}

const ResourceInfo* Registry::add(ResourceInfo info) {
  if (info.storage.empty()) info.storage = info.group + "/" + info.resource;
  const std::string key = gvr_key(info.group, info.version, info.resource);
  if (const auto it = by_gvr_.find(key); it != by_gvr_.end()) {
    *it->second = std::move(info);
    return it->second;
  }
  if (!info.group.empty() &&
      std::find(group_order_.begin(), group_order_.end(), info.group) == group_order_.end()) {
    group_order_.push_back(info.group);
  }
  infos_.push_back(std::make_unique<ResourceInfo>(std::move(info)));
  by_gvr_[key] = infos_.back().get();
  return infos_.back().get();
}

const ResourceInfo* Registry::find(const std::string& group, const std::string& version,
                                   const std::string& resource) const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = by_gvr_.find(gvr_key(group, version, resource));
  if (it == by_gvr_.end() || !it->second->served) return nullptr;
  return it->second;
}

const ResourceInfo* Registry::find_kind(const std::string& api_version,
                                        const std::string& kind) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& i : infos_) {
    if (i->served && i->kind == kind && i->group_version() == api_version &&
        i->resource != "bindings") {
      return i.get();
    }
  }
  return nullptr;
}

std::vector<const ResourceInfo*> Registry::all() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<const ResourceInfo*> out;
  for (const auto& i : infos_) out.push_back(i.get());
  return out;
}

std::vector<const ResourceInfo*> Registry::add_crd(const json& crd) {
  std::vector<const ResourceInfo*> out;
  const json* spec = find_path(crd, "spec");
  if (spec == nullptr || !spec->is_object()) return out;
  const std::string group = string_at(*spec, "group");
  const std::string plural = string_at(*spec, "names.plural");
  const std::string kind = string_at(*spec, "names.kind");
  if (group.empty() || plural.empty() || kind.empty()) return out;
  std::lock_guard<std::mutex> lock(mu_);
  const json* versions = find_path(*spec, "versions");
  if (versions == nullptr || !versions->is_array()) return out;
  for (const auto& v : *versions) {
    if (!v.value("served", true)) continue;
    ResourceInfo r;
    r.group = group;
    r.version = v.value("name", "");
    if (r.version.empty()) continue;
    r.resource = plural;
    r.kind = kind;
    r.singular = string_at(*spec, "names.singular", singular_of(kind));
    r.namespaced = spec->value("scope", "Namespaced") == "Namespaced";
    if (const json* sn = find_path(*spec, "names.shortNames"); sn != nullptr && sn->is_array()) {
      for (const auto& s : *sn) r.short_names.push_back(s.get<std::string>());
    }
    if (const json* c = find_path(*spec, "names.categories"); c != nullptr && c->is_array()) {
      for (const auto& s : *c) r.categories.push_back(s.get<std::string>());
    }
    if (find_path(v, "subresources.status") != nullptr) r.subresources.push_back("status");
    r.verbs = kStandardVerbs;
    r.custom = true;
    if (const json* cols = find_path(v, "additionalPrinterColumns");
        cols != nullptr && cols->is_array()) {
      for (const json& c : *cols) {
        if (!c.is_object()) continue;
        r.printer_columns.push_back({c.value("name", ""), c.value("type", "string"),
                                     c.value("description", ""), c.value("jsonPath", ""),
                                     c.value("priority", 0)});
      }
    }
    const auto existing = by_gvr_.find(gvr_key(r.group, r.version, r.resource));
    if (existing != by_gvr_.end() && !existing->second->custom) {
      // Never shadowed (a built-in stays), but it prints as the applied CRD says.
      existing->second->printer_columns = std::move(r.printer_columns);
      continue;
    }
    out.push_back(add(std::move(r)));
  }
  return out;
}

void Registry::remove_crd(const json& crd) {
  const std::string group = string_at(crd, "spec.group");
  const std::string plural = string_at(crd, "spec.names.plural");
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& i : infos_) {
    if (i->custom && i->group == group && i->resource == plural && group != "scheduling.x-k8s.io" &&
        group != "scheduling.volcano.sh") {
      i->served = false;
    }
  }
}

json Registry::version_info() const {
  return {{"major", "1"},
          {"minor", "31"},
          {"gitVersion", "v1.31.0-tessera-emulator"},
          {"gitCommit", "0000000000000000000000000000000000000000"},
          {"gitTreeState", "clean"},
          {"buildDate", "2025-01-01T00:00:00Z"},
          {"goVersion", "go1.22.5"},
          {"compiler", "gc"},
          {"platform", "linux/amd64"}};
}

json Registry::core_versions(const std::string& server_address) const {
  return {{"kind", "APIVersions"},
          {"versions", {"v1"}},
          {"serverAddressByClientCIDRs",
           {{{"clientCIDR", "0.0.0.0/0"}, {"serverAddress", server_address}}}}};
}

namespace {
json group_doc(const std::string& name, const std::vector<std::string>& versions) {
  json vs = json::array();
  for (const auto& v : versions) vs.push_back({{"groupVersion", name + "/" + v}, {"version", v}});
  return {{"name", name}, {"versions", vs}, {"preferredVersion", vs.front()}};
}
}  // namespace

json Registry::group_list() const {
  std::lock_guard<std::mutex> lock(mu_);
  json groups = json::array();
  for (const auto& g : group_order_) {
    std::vector<std::string> versions;
    for (const auto& i : infos_) {
      if (i->served && i->group == g &&
          std::find(versions.begin(), versions.end(), i->version) == versions.end()) {
        versions.push_back(i->version);
      }
    }
    if (!versions.empty()) groups.push_back(group_doc(g, versions));
  }
  return {{"kind", "APIGroupList"}, {"apiVersion", "v1"}, {"groups", groups}};
}

std::optional<json> Registry::group(const std::string& name) const {
  const json list = group_list();
  for (const auto& g : list["groups"]) {
    if (g["name"] == name) {
      json out = g;
      out["kind"] = "APIGroup";
      out["apiVersion"] = "v1";
      return out;
    }
  }
  return std::nullopt;
}

std::optional<json> Registry::resource_list(const std::string& group,
                                            const std::string& version) const {
  std::lock_guard<std::mutex> lock(mu_);
  json resources = json::array();
  bool any = false;
  for (const auto& i : infos_) {
    if (!i->served || i->group != group || i->version != version) continue;
    any = true;
    json r = {{"name", i->resource},
              {"singularName", i->singular},
              {"namespaced", i->namespaced},
              {"kind", i->kind},
              {"verbs", i->verbs}};
    if (!i->short_names.empty()) r["shortNames"] = i->short_names;
    if (!i->categories.empty()) r["categories"] = i->categories;
    if (i->resource != "bindings") r["storageVersionHash"] = i->kind;
    resources.push_back(r);
    for (const auto& sub : i->subresources) {
      json s = {{"name", i->resource + "/" + sub},
                {"singularName", ""},
                {"namespaced", i->namespaced},
                {"kind", i->kind}};
      if (sub == "status") {
        s["verbs"] = {"get", "patch", "update"};
      } else if (sub == "binding") {
        s["kind"] = "Binding";
        s["verbs"] = {"create"};
      } else if (sub == "eviction") {
        s["group"] = "policy";
        s["version"] = "v1";
        s["kind"] = "Eviction";
        s["verbs"] = {"create"};
      } else if (sub == "log") {
        s["verbs"] = {"get"};
      }
      resources.push_back(s);
    }
  }
  if (!any) return std::nullopt;
  return json{{"kind", "APIResourceList"},
              {"apiVersion", "v1"},
              {"groupVersion", group.empty() ? version : group + "/" + version},
              {"resources", resources}};
}

}  // namespace kube_emulator
