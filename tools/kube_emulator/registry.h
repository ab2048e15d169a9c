// The served API resources (built-in kinds plus those registered by CRDs) and the discovery
// documents kubectl reads: /version, /api, /api/v1, /apis, /apis/G, /apis/G/V.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "kube_emulator/util.h"

namespace kube_emulator {

// A custom resource's additionalPrinterColumns entry: what `kubectl get` shows of it.
struct PrinterColumn {
  std::string name, type, description, json_path;  // json_path: ".status.phase"
  int priority = 0;                                // 1: only with -o wide
};

struct ResourceInfo {
  std::string group;  // "" for core
  std::string version;
  std::string resource;  // plural, lower case
  std::string kind;
  std::string singular;
  bool namespaced = true;
  std::vector<std::string> short_names;
  std::vector<std::string> categories;
  std::vector<std::string> verbs;         // empty: the standard eight
  std::vector<std::string> subresources;  // "status", "binding", "eviction", "log"
  std::string storage;                    // collection key (two views may share one)
  bool custom = false;                    // served from a CRD: no strategic merge patch
  bool served = true;
  std::vector<PrinterColumn> printer_columns;  // a CRD's, as its version declares them

  std::string group_version() const { return group.empty() ? version : group + "/" + version; }
  // "pods", "leases.coordination.k8s.io": how errors name the resource.
  std::string qualified() const { return group.empty() ? resource : resource + "." + group; }
  std::string list_kind() const { return kind + "List"; }
  bool has_subresource(const std::string& s) const;
  bool is(const std::string& g, const std::string& r) const { return group == g && resource == r; }
};

class Registry {
 public:
  Registry();  // the built-in resources
  // Resources are never freed, so returned pointers stay valid for the registry's life.
  const ResourceInfo* find(const std::string& group, const std::string& version,
                           const std::string& resource) const;
  const ResourceInfo* find_kind(const std::string& api_version, const std::string& kind) const;
  // Registers (or re-serves) the versions of a CRD object; returns the resources it serves.
  std::vector<const ResourceInfo*> add_crd(const json& crd);
  void remove_crd(const json& crd);
  std::vector<const ResourceInfo*> all() const;

  json version_info() const;
  json core_versions(const std::string& server_address) const;  // /api
  json group_list() const;                                      // /apis
  std::optional<json> group(const std::string& name) const;     // /apis/G
  std::optional<json> resource_list(const std::string& group, const std::string& version) const;

 private:
  const ResourceInfo* add(ResourceInfo info);
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<ResourceInfo>> infos_;
  std::map<std::string, ResourceInfo*> by_gvr_;
  std::vector<std::string> group_order_;  // discovery order of groups
};

}  // namespace kube_emulator
