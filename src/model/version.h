// The version of this build, for `tessera --version` and the provenance every result file
// records. Defined in a file generated at build time (cmake/version.cmake).
#pragma once

#include <string_view>

namespace tessera {

std::string_view tessera_version();  // the project version, "0.1.0"
std::string_view tessera_commit();    // `git describe --always --dirty`, or "unknown"

}  // namespace tessera
