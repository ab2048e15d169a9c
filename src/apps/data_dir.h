// Where the measured data (../shared/data: traces, profiles, interference measurements) is
// looked for when a command's --data-dir is not given.
#pragma once

#include <cstdlib>
#include <string>

namespace tessera {

// `given` if set, else $TESSERA_DATA, else the path the build was configured with.
inline std::string data_dir_or_default(const std::string& given) {
  if (!given.empty()) return given;
  if (const char* env = std::getenv("TESSERA_DATA")) return env;
  return TESSERA_SHARED_DATA;
}

}  // namespace tessera
