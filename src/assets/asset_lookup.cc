#include "assets/web_assets.h"

namespace tessera {

std::optional<WebAsset> web_asset(std::string_view path) {
  // A dozen assets: a scan is as fast as a map and needs no static initialisation.
  for (const WebAsset& a : web_assets()) {
    if (a.path == path) return a;
  }
  return std::nullopt;
}

}  // namespace tessera
