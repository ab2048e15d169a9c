// PATCH bodies: RFC 7386 merge patch, RFC 6902 JSON patch, and strategic merge patch with the
// merge keys of the built-in kinds (containers by name, conditions by type, ...).
#pragma once

#include <string>

#include "kube_emulator/util.h"

namespace kube_emulator {

enum class PatchType { Merge, Strategic, Json, Apply, Unknown };
PatchType patch_type_of(const std::string& content_type);

// Applies a strategic merge patch to an object of `kind` (Pod, Node, Deployment, ...).
// Lists without a known merge key are replaced, as for merge patch. Throws
// std::invalid_argument on a malformed patch.
json strategic_merge(const json& original, const json& patch, const std::string& kind);
// Throws std::invalid_argument when the patch does not apply (failed "test", bad path).
json json_patch(const json& original, const json& patch);
json merge_patch(const json& original, const json& patch);

}  // namespace kube_emulator
