#include "backend/kube/field_mask.h"

#include <simdjson.h>

#include "model/json_depth.h"

namespace tessera::kube {

using nlohmann::json;

FieldMask FieldMask::of(std::initializer_list<std::string_view> paths) {
  FieldMask m;
  if (paths.size() == 0) m.all = true;
  for (std::string_view path : paths) {
    FieldMask* at = &m;
    while (!path.empty()) {
      const size_t dot = path.find('.');
      const std::string_view key = path.substr(0, dot);
      auto it = at->keys.find(key);
      if (it == at->keys.end()) it = at->keys.emplace(std::string(key), FieldMask{}).first;
      at = &it->second;
      path = dot == std::string_view::npos ? std::string_view() : path.substr(dot + 1);
    }
    at->all = true;
    at->keys.clear();  // a shorter path already keeps everything below it
  }
  return m;
}

FieldMask FieldMask::under(std::string_view key) const {
  FieldMask envelope;
  envelope.rest = true;
  envelope.keys.emplace(std::string(key), *this);
  return envelope;
}

namespace {

// The mask below `key` of an object under `m` (nullptr: keep everything below); `keep` is
// false when the key is dropped.
const FieldMask* child_mask(const FieldMask* m, std::string_view key, bool& keep) {
  keep = true;
  if (m == nullptr) return nullptr;
  auto it = m->keys.find(key);
  if (it != m->keys.end()) return it->second.all ? nullptr : &it->second;
  keep = m->rest;
  return nullptr;
}

// Arrays are transparent: their elements take the array's mask. `e` comes from a document that
// parsed, so each typed read below succeeds.
json convert(simdjson::dom::element e, const FieldMask* m) {
  using simdjson::dom::element_type;
  switch (e.type()) {
    case element_type::ARRAY: {
      json a = json::array();
      simdjson::dom::array arr;
      if (e.get(arr) == simdjson::SUCCESS) {
        for (simdjson::dom::element v : arr) a.push_back(convert(v, m));
      }
      return a;
    }
    case element_type::OBJECT: {
      json o = json::object();
      simdjson::dom::object obj;
      if (e.get(obj) == simdjson::SUCCESS) {
        for (simdjson::dom::key_value_pair kv : obj) {
          bool keep = true;
          const FieldMask* cm = child_mask(m, kv.key, keep);
          if (keep) o[std::string(kv.key)] = convert(kv.value, cm);  // a repeated key: last wins
        }
      }
      return o;
    }
    case element_type::INT64: {
      int64_t v = 0;
      return e.get(v) == simdjson::SUCCESS ? json(v) : json();
    }
    case element_type::UINT64: {
      uint64_t v = 0;
      return e.get(v) == simdjson::SUCCESS ? json(v) : json();
    }
    case element_type::DOUBLE: {
      double v = 0;
      return e.get(v) == simdjson::SUCCESS ? json(v) : json();
    }
    case element_type::STRING: {
      std::string_view v;
      return e.get(v) == simdjson::SUCCESS ? json(std::string(v)) : json();
    }
    case element_type::BOOL: {
      bool v = false;
      return e.get(v) == simdjson::SUCCESS ? json(v) : json();
    }
    case element_type::NULL_VALUE:
      return nullptr;
  }
  return nullptr;
}

// Drops what the mask does not keep from a parsed value.
void prune(json& j, const FieldMask* m) {
  if (m == nullptr) return;
  if (j.is_array()) {
    for (json& v : j) prune(v, m);
  } else if (j.is_object()) {
    for (auto it = j.begin(); it != j.end();) {
      bool keep = true;
      const FieldMask* cm = child_mask(m, it.key(), keep);
      if (!keep) {
        it = j.erase(it);
      } else {
        prune(it.value(), cm);
        ++it;
      }
    }
  }
}

}  // namespace

json parse_masked(std::string_view text, const FieldMask& mask) {
  const FieldMask* root = mask.all ? nullptr : &mask;
  // simdjson reads a large list page several times faster than nlohmann's parser; the kept
  // fields are then copied into the nlohmann value the parsers take. A parser per thread keeps
  // its buffers between pages.
  thread_local simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(text.data(), text.size(), /*realloc_if_needed=*/true).get(doc) ==
      simdjson::SUCCESS) {
    return convert(doc, root);
  }
  // What simdjson refuses (an integer beyond 64 bits, say) nlohmann may still read: answer as
  // nlohmann::json::parse would, except for nesting too deep to walk (simdjson's own limit is
  // 1,024 levels; prune() recurses).
  if (json_nesting_exceeds(text, 1024)) return json(json::value_t::discarded);
  json j = json::parse(text.begin(), text.end(), nullptr, false);
  if (!j.is_discarded()) prune(j, root);
  return j;
}

}  // namespace tessera::kube
