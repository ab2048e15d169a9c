#pragma once
// The web assets built into the binary (cmake/embed_assets.cmake): the dashboard served at
// /ui/, the page `tessera report` fills in, and the chart library both use. Paths are relative
// to web/ ("dashboard/index.html", "report/report.js", "vendor/chart.umd.min.js").

#include <optional>
#include <span>
#include <string_view>

namespace tessera {

struct WebAsset {
  std::string_view path;
  std::string_view content_type;
  std::string_view body;
};

// Every asset, in no particular order.
std::span<const WebAsset> web_assets();
// The asset at `path`, or nullopt.
std::optional<WebAsset> web_asset(std::string_view path);

}  // namespace tessera
