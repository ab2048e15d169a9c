// Long-term (decayed) usage as saved between runs, by queue path rather than by queue id (ids
// change when the tree does): {"path": [milli-GPU, milli-CPU, MiB], ...}. `tessera serve` keeps
// it in its database, `tessera kube` in a ConfigMap.
#pragma once

#include <array>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "engine/decayed_usage.h"
#include "model/queue_tree.h"

namespace tessera {

using UsageByPath = std::map<std::string, std::array<double, kNumDims>>;

// The leaves of `tree` with their averages (ids beyond `d`'s size are left out).
UsageByPath usage_by_path(const QueueTree& tree, const DecayedUsage& d);
std::string usage_to_json(const UsageByPath& usage);
// nullopt when `text` is not a JSON object; entries that are not kNumDims non-negative numbers
// are skipped.
std::optional<UsageByPath> usage_from_json(std::string_view text);
// Gives each queue of `tree` that `saved` names its saved value, and takes it out of `saved`
// (what is left names queues the tree does not have yet).
void apply_usage(const QueueTree& tree, UsageByPath& saved, DecayedUsage& d);

}  // namespace tessera
