// Label selectors (=, ==, !=, in, notin, exists, !exists) and field selectors (=, ==, !=) with
// the per-kind selectable fields of the real registries (pod strategy ToSelectableFields etc.).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kube_emulator/registry.h"
#include "kube_emulator/util.h"

namespace kube_emulator {

class LabelSelector {
 public:
  // Throws std::invalid_argument with the apiserver's style of message on a parse error.
  static LabelSelector parse(const std::string& text);
  bool empty() const { return reqs_.empty(); }
  bool matches(const json& labels) const;  // labels: object or null
  // matchLabels / matchExpressions of a metav1.LabelSelector (PDBs); nullopt = bad selector.
  static std::optional<LabelSelector> from_json(const json& sel);

 private:
  enum class Op { Eq, NotEq, In, NotIn, Exists, NotExists };
  struct Req {
    std::string key;
    Op op;
    std::vector<std::string> values;
  };
  std::vector<Req> reqs_;
};

class FieldSelector {
 public:
  // Throws std::invalid_argument("field label not supported: X") for unknown fields.
  static FieldSelector parse(const std::string& text, const ResourceInfo& info);
  bool empty() const { return reqs_.empty(); }
  bool matches(const json& obj) const;
  // The value required by `field=value`, if the selector has such a term (index lookups).
  std::optional<std::string> equals(const std::string& field) const;

 private:
  struct Req {
    std::string field;
    bool negate;
    std::string value;
  };
  const ResourceInfo* info_ = nullptr;
  std::vector<Req> reqs_;
};

// The value of a selectable field for this kind; nullopt when the field is not selectable.
std::optional<std::string> field_value(const ResourceInfo& info, const json& obj,
                                       const std::string& field);
bool field_supported(const ResourceInfo& info, const std::string& field);

}  // namespace kube_emulator
