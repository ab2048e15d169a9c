// Parsing only the fields a client reads. A Pod as the API server sends it is mostly fields a
// scheduler never looks at (container images, probes, volumes, managedFields, container
// statuses). parse_masked() validates the whole text (with simdjson, several times faster than
// nlohmann's parser on a list page) and builds a nlohmann value of only what the mask keeps.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace tessera::kube {

// A tree of object keys to keep. Arrays are transparent: the mask of an array applies to each
// element. A node with `all` keeps its whole subtree.
//
//   FieldMask m = FieldMask::of({"metadata.name", "metadata.labels", "spec.containers.resources"});
struct FieldMask {
  bool all = false;   // keep this whole subtree
  bool rest = false;  // keep keys not in `keys` whole (an envelope around masked objects)
  std::map<std::string, FieldMask, std::less<>> keys;

  // From dotted paths; a path keeps its whole subtree. An empty list keeps everything.
  static FieldMask of(std::initializer_list<std::string_view> paths);
  // This mask for the objects of an envelope: a list's "items" or a watch event's "object";
  // the envelope's other members (kind, metadata, type) are kept whole.
  FieldMask under(std::string_view key) const;
};

// Parses `text` keeping only what `mask` names. Returns a discarded value (is_discarded())
// when the text is not JSON, as nlohmann::json::parse(text, nullptr, false) would. Thread-safe
// (a parser per thread).
nlohmann::json parse_masked(std::string_view text, const FieldMask& mask);

}  // namespace tessera::kube
