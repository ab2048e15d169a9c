// What produced a result file: the build, and each input file by path and
// content hash, so a result can be run again and a changed input noticed.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace tessera {

// {"version": "0.1.0", "commit": "..."}
nlohmann::ordered_json build_identity();
// {"path": PATH, "bytes": N, "sha256": "..."}; throws naming the path if it cannot be read.
nlohmann::ordered_json file_identity(const std::string& path);

// "tessera: warning: TEXT" on stderr, for an option that has no effect on this input.
void warn(const std::string& text);

}  // namespace tessera
