#include "control/decayed_usage_json.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace tessera {

using nlohmann::json;

UsageByPath usage_by_path(const QueueTree& tree, const DecayedUsage& d) {
  UsageByPath out;
  for (QueueId q = 0; q < std::min(tree.size(), d.view().size()); ++q) {
    if (tree.queue(q).leaf()) out[tree.queue(q).path] = d.value(q);
  }
  return out;
}

std::string usage_to_json(const UsageByPath& usage) {
  json j = json::object();
  for (const auto& [path, v] : usage) j[path] = v;
  return j.dump();
}

std::optional<UsageByPath> usage_from_json(std::string_view text) {
  const json j = json::parse(text.begin(), text.end(), nullptr, false);
  if (!j.is_object()) return std::nullopt;
  UsageByPath out;
  for (const auto& [path, v] : j.items()) {
    if (!v.is_array() || v.size() != kNumDims) continue;
    std::array<double, kNumDims> a{};
    bool ok = true;
    for (size_t d = 0; d < kNumDims && ok; ++d) {
      ok = v[d].is_number() && v[d].get<double>() >= 0;
      if (ok) a[d] = v[d].get<double>();
    }
    if (ok) out[path] = a;
  }
  return out;
}

void apply_usage(const QueueTree& tree, UsageByPath& saved, DecayedUsage& d) {
  for (QueueId q = 0; q < tree.size() && !saved.empty(); ++q) {
    auto it = saved.find(tree.queue(q).path);
    if (it == saved.end()) continue;
    d.set(q, it->second);
    saved.erase(it);
  }
}

}  // namespace tessera
