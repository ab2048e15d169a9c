// Reading fields of the API's JSON without throwing: a field of the wrong type or missing reads
// as null, "" or empty, and the parsers decide what that means (a default, or an error naming
// the field).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "control/kube/kube_objects.h"

namespace tessera::kube {

inline const nlohmann::json& field(const nlohmann::json& obj, const char* name) {
  static const nlohmann::json kNull;
  if (!obj.is_object()) return kNull;
  auto it = obj.find(name);
  return it == obj.end() ? kNull : *it;
}

inline std::string str(const nlohmann::json& obj, const char* name) {
  const nlohmann::json& v = field(obj, name);
  return v.is_string() ? v.get<std::string>() : std::string();
}

// An integer field, or `otherwise` when it is absent or not an integer.
inline int64_t integer(const nlohmann::json& obj, const char* name, int64_t otherwise) {
  const nlohmann::json& v = field(obj, name);
  return v.is_number_integer() ? v.get<int64_t>() : otherwise;
}

inline Labels string_map(const nlohmann::json& obj) {
  Labels out;
  if (!obj.is_object()) return out;
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    if (it->is_string()) out.emplace(it.key(), it->get<std::string>());
  }
  return out;
}

inline const std::string* find(const Labels& m, const char* key) {
  auto it = m.find(key);
  return it == m.end() ? nullptr : &it->second;
}

}  // namespace tessera::kube
