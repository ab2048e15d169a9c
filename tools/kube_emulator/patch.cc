#include "kube_emulator/patch.h"

#include <map>
#include <stdexcept>

namespace kube_emulator {

PatchType patch_type_of(const std::string& content_type) {
  const std::string ct = content_type.substr(0, content_type.find(';'));
  if (ct == "application/merge-patch+json") return PatchType::Merge;
  if (ct == "application/strategic-merge-patch+json") return PatchType::Strategic;
  if (ct == "application/json-patch+json") return PatchType::Json;
  if (ct == "application/apply-patch+yaml" || ct == "application/apply-patch+cbor") {
    return PatchType::Apply;
  }
  return PatchType::Unknown;
}

json merge_patch(const json& original, const json& patch) {
  json out = original;
  out.merge_patch(patch);
  return out;
}

json json_patch(const json& original, const json& patch) {
  if (!patch.is_array()) throw std::invalid_argument("json patch must be an array");
  try {
    return original.patch(patch);
  } catch (const json::exception& e) {
    throw std::invalid_argument(e.what());
  }
}

namespace {

// Merge keys by path (list field names joined by '.', list items transparent).
using KeyMap = std::map<std::string, std::string>;

void add_pod_spec_keys(KeyMap& m, const std::string& p) {
  for (const char* c : {"containers", "initContainers", "ephemeralContainers"}) {
    const std::string base = p + c;
    m[base] = "name";
    m[base + ".ports"] = "containerPort";
    m[base + ".env"] = "name";
    m[base + ".volumeMounts"] = "mountPath";
    m[base + ".volumeDevices"] = "devicePath";
    m[base + ".resizePolicy"] = "resourceName";
  }
  m[p + "volumes"] = "name";
  m[p + "imagePullSecrets"] = "name";
  m[p + "hostAliases"] = "ip";
  m[p + "schedulingGates"] = "name";
  m[p + "resourceClaims"] = "name";
  m[p + "topologySpreadConstraints"] = "topologyKey";
}

const KeyMap& keys_for(const std::string& kind) {
  static const std::map<std::string, KeyMap> all = [] {
    std::map<std::string, KeyMap> a;
    KeyMap meta = {{"metadata.ownerReferences", "uid"}, {"metadata.finalizers", ""}};
    KeyMap pod = meta;
    add_pod_spec_keys(pod, "spec.");
    pod["status.conditions"] = "type";
    pod["status.podIPs"] = "ip";
    pod["status.hostIPs"] = "ip";
    pod["status.resourceClaimStatuses"] = "name";
    a["Pod"] = pod;
    KeyMap node = meta;
    node["status.conditions"] = "type";
    node["status.addresses"] = "type";
    node["spec.podCIDRs"] = "";
    a["Node"] = node;
    for (const char* k : {"Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "Job"}) {
      KeyMap w = meta;
      add_pod_spec_keys(w, "spec.template.spec.");
      w["status.conditions"] = "type";
      a[k] = w;
    }
    KeyMap cj = meta;
    add_pod_spec_keys(cj, "spec.jobTemplate.spec.template.spec.");
    a["CronJob"] = cj;
    KeyMap pdb = meta;
    pdb["status.conditions"] = "type";
    a["PodDisruptionBudget"] = pdb;
    KeyMap ns = meta;
    ns["status.conditions"] = "type";
    a["Namespace"] = ns;
    KeyMap svc = meta;
    svc["spec.ports"] = "port";
    a["Service"] = svc;
    a[""] = meta;
    return a;
  }();
  const auto it = all.find(kind);
  return it == all.end() ? all.at("") : it->second;
}

json merge_value(const json& orig, const json& patch, const std::string& path, const KeyMap& keys);

json merge_list(const json& orig, const json& patch, const std::string& path, const KeyMap& keys,
                const json* order) {
  const auto it = keys.find(path);
  if (it == keys.end() || !orig.is_array()) {
    // No merge strategy: the patch replaces the list (minus directive-only items).
    json out = json::array();
    for (const auto& item : patch) {
      if (item.is_object() && item.contains("$patch")) continue;
      out.push_back(item);
    }
    return out;
  }
  json out = orig;
  const std::string& key = it->second;
  if (key.empty()) {  // set of primitives: union
    for (const auto& item : patch) {
      bool found = false;
      for (const auto& o : out) found = found || o == item;
      if (!found) out.push_back(item);
    }
    return out;
  }
  for (const auto& item : patch) {
    if (!item.is_object()) throw std::invalid_argument("list item without merge key " + key);
    if (item.value("$patch", "") == "replace")
      return merge_list(json::array(), patch, path, {}, order);
    const auto kv = item.find(key);
    if (kv == item.end())
      throw std::invalid_argument("map: " + item.dump() +
                                  " does not contain declared merge key: " + key);
    size_t idx = out.size();
    for (size_t i = 0; i < out.size(); ++i) {
      if (out[i].is_object() && out[i].contains(key) && out[i][key] == *kv) {
        idx = i;
        break;
      }
    }
    if (item.value("$patch", "") == "delete") {
      if (idx < out.size()) out.erase(out.begin() + static_cast<std::ptrdiff_t>(idx));
      continue;
    }
    if (idx < out.size()) {
      out[idx] = merge_value(out[idx], item, path, keys);
    } else {
      out.push_back(merge_value(json::object(), item, path, keys));
    }
  }
  if (order != nullptr && order->is_array()) {  // $setElementOrder
    json sorted = json::array();
    std::vector<bool> used(out.size(), false);
    for (const auto& o : *order) {
      const json want = o.is_object() && o.contains(key) ? o[key] : o;
      for (size_t i = 0; i < out.size(); ++i) {
        if (!used[i] && out[i].is_object() && out[i].contains(key) && out[i][key] == want) {
          sorted.push_back(out[i]);
          used[i] = true;
        }
      }
    }
    for (size_t i = 0; i < out.size(); ++i) {
      if (!used[i]) sorted.push_back(out[i]);
    }
    out = std::move(sorted);
  }
  return out;
}

json merge_value(const json& orig, const json& patch, const std::string& path, const KeyMap& keys) {
  if (!patch.is_object()) return patch;
  if (patch.value("$patch", "") == "replace") {
    json out = patch;
    out.erase("$patch");
    return out;
  }
  if (patch.value("$patch", "") == "delete") return nullptr;
  json out = orig.is_object() ? orig : json::object();
  if (const auto rk = patch.find("$retainKeys"); rk != patch.end() && rk->is_array()) {
    json kept = json::object();
    for (const auto& k : *rk) {
      if (k.is_string() && out.contains(k.get<std::string>()))
        kept[k.get<std::string>()] = out[k.get<std::string>()];
    }
    out = std::move(kept);
  }
  for (const auto& [k, v] : patch.items()) {
    if (k == "$patch" || k == "$retainKeys" || starts_with(k, "$setElementOrder/")) continue;
    const std::string child = path.empty() ? k : path + "." + k;
    if (starts_with(k, "$deleteFromPrimitiveList/")) {
      const std::string field = k.substr(25);
      if (out.contains(field) && out[field].is_array() && v.is_array()) {
        json kept = json::array();
        for (const auto& x : out[field]) {
          bool drop = false;
          for (const auto& d : v) drop = drop || d == x;
          if (!drop) kept.push_back(x);
        }
        out[field] = kept;
      }
      continue;
    }
    if (v.is_null()) {
      out.erase(k);
      continue;
    }
    const auto existing = out.find(k);
    if (v.is_array()) {
      const auto order = patch.find("$setElementOrder/" + k);
      out[k] = merge_list(existing != out.end() ? *existing : json::array(), v,
                          path.empty() ? k : path + "." + k, keys,
                          order == patch.end() ? nullptr : &*order);
    } else if (v.is_object()) {
      json merged = merge_value(existing != out.end() ? *existing : json::object(), v, child, keys);
      if (merged.is_null()) {
        out.erase(k);
      } else {
        out[k] = std::move(merged);
      }
    } else {
      out[k] = v;
    }
  }
  return out;
}

}  // namespace

json strategic_merge(const json& original, const json& patch, const std::string& kind) {
  if (!patch.is_object()) throw std::invalid_argument("strategic merge patch must be an object");
  return merge_value(original, patch, "", keys_for(kind));
}

}  // namespace kube_emulator
