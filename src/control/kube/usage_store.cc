#include "control/kube/usage_store.h"

#include "backend/kube/object_path.h"
#include "control/kube/kube_objects.h"

namespace tessera::kube {

using nlohmann::json;

namespace {
const char* const kKey = "decayed-usage";
}  // namespace

UsageByPath UsageStore::load(std::string* error) {
  UsageByPath out;
  const Response r = client_.get(object_path(kConfigMaps, ns_, name_));
  if (r.status == 404) return out;
  if (!r.ok()) {
    if (error) *error = "reading ConfigMap " + where() + ": " + r.describe();
    return out;
  }
  const json cm = r.json();
  const json* text = nullptr;
  if (cm.is_object() && cm.contains("data") && cm["data"].is_object() &&
      cm["data"].contains(kKey) && cm["data"][kKey].is_string()) {
    text = &cm["data"][kKey];
  }
  std::optional<UsageByPath> usage =
      text ? usage_from_json(text->get_ref<const std::string&>()) : std::nullopt;
  if (!usage) {
    if (error) *error = "ConfigMap " + where() + ": data." + kKey + " is not a JSON object";
    return out;
  }
  return std::move(*usage);
}

bool UsageStore::save(const UsageByPath& usage, double now, std::string* error) {
  const json cm = {{"apiVersion", "v1"},
                   {"kind", "ConfigMap"},
                   {"metadata",
                    {{"name", name_},
                     {"namespace", ns_},
                     {"labels", {{"app.kubernetes.io/managed-by", "tessera"}}},
                     {"annotations", {{"tessera.io/saved-at", format_time(now)}}}}},
                   {"data", {{kKey, usage_to_json(usage)}}}};
  // Replace without a resourceVersion: the leader is the only writer.
  Response r = client_.put(object_path(kConfigMaps, ns_, name_), cm);
  if (r.status == 404) r = client_.post(collection_path(kConfigMaps, ns_), cm);
  if (!r.ok()) {
    if (error) *error = "saving ConfigMap " + where() + ": " + r.describe();
    return false;
  }
  return true;
}

}  // namespace tessera::kube
