// Maps strings to dense integer ids and back. Ids are assigned in first-seen order, so a
// deterministic input gives deterministic ids.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tessera {

class Interner {
 public:
  uint32_t intern(std::string_view s) {
    auto it = index_.find(std::string(s));
    if (it != index_.end()) return it->second;
    const auto id = static_cast<uint32_t>(names_.size());
    names_.emplace_back(s);
    index_.emplace(names_.back(), id);
    return id;
  }
  std::optional<uint32_t> find(std::string_view s) const {
    auto it = index_.find(std::string(s));
    if (it == index_.end()) return std::nullopt;
    return it->second;
  }
  const std::string& name(uint32_t id) const { return names_.at(id); }
  size_t size() const { return names_.size(); }
  const std::vector<std::string>& names() const { return names_; }

 private:
  std::vector<std::string> names_;
  std::unordered_map<std::string, uint32_t> index_;
};

}  // namespace tessera
