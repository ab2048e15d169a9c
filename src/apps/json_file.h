// Writing a command's --json document.
#pragma once

#include <fstream>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace tessera {

// Writes `doc` (indented) to `path`; nothing when `path` is empty. Throws naming the path when
// it cannot be written.
template <class Json>
void write_json_file(const std::string& path, const Json& doc) {
  if (path.empty()) return;
  std::ofstream out(path);
  if (!out) throw std::runtime_error("cannot write " + path);
  out << doc.dump(2) << '\n';
  if (!out) throw std::runtime_error("cannot write " + path);
}

}  // namespace tessera
