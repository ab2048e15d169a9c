#include "apps/provenance.h"

#include <cstdio>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include "control/token.h"
#include "model/version.h"

namespace tessera {

nlohmann::ordered_json build_identity() {
  return {{"version", std::string(tessera_version())}, {"commit", std::string(tessera_commit())}};
}

nlohmann::ordered_json file_identity(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  const std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return {{"path", path}, {"bytes", data.size()}, {"sha256", sha256_hex(data)}};
}

void warn(const std::string& text) {
  std::fprintf(stderr, "tessera: warning: %s\n", text.c_str());
}

}  // namespace tessera
