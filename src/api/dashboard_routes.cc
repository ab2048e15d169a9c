#include "api/dashboard_routes.h"

#include <cmath>
#include <fstream>
#include <iterator>
#include <optional>

#include "api/http_util.h"
#include "model/version.h"
#include "assets/web_assets.h"

namespace tessera {

// Revalidated by ETag (the content's hash), so an upgraded server is never shadowed by a cached
// page, and answered 304 when unchanged.
void serve_dashboard_file(const httplib::Request& req, httplib::Response& res,
                          const std::string& path, const std::string& ui_dir) {
  const std::string name = path.empty()                    ? "dashboard/index.html"
                           : path.rfind("vendor/", 0) == 0 ? path
                                                           : "dashboard/" + path;
  std::optional<WebAsset> asset = web_asset(name);
  std::string from_disk;
  // --ui-dir: the dashboard's own files from disk (never a path that climbs out of it).
  if (!ui_dir.empty() && name.rfind("dashboard/", 0) == 0 && name.find("..") == std::string::npos) {
    std::ifstream in(ui_dir + "/" + name, std::ios::binary);
    if (in) {
      from_disk.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
      const std::string_view type = name.ends_with(".html")  ? "text/html; charset=utf-8"
                                    : name.ends_with(".css") ? "text/css; charset=utf-8"
                                                             : "text/javascript; charset=utf-8";
      asset = WebAsset{name, type, from_disk};
    } else {
      asset.reset();
    }
  }
  if (!asset) {
    send_error(res, 404, "no dashboard file /ui/" + path);
    return;
  }
  const std::string etag = "\"" + std::to_string(std::hash<std::string_view>{}(asset->body)) + "\"";
  res.set_header("ETag", etag);
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Content-Type-Options", "nosniff");
  if (name.ends_with(".html")) {
    // Scripts and data only from this server; the page cannot be framed (clickjacking).
    res.set_header("Content-Security-Policy",
                   "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
                   "frame-ancestors 'none'; base-uri 'none'; form-action 'none'");
    res.set_header("X-Frame-Options", "DENY");
    res.set_header("Referrer-Policy", "no-referrer");
  }
  if (req.get_header_value("If-None-Match") == etag) {
    res.status = 304;
    return;
  }
  res.set_content(std::string(asset->body), std::string(asset->content_type));
}

void send_server_info(httplib::Response& res, const std::string& server, bool read_only,
                      bool token_required) {
  res.set_content(json_text(nlohmann::json{{"server", server},
                                           {"version", std::string(tessera_version())},
                                           {"read_only", read_only},
                                           {"token_required", token_required}}),
                  kJson);
}

void send_history(const httplib::Request& req, httplib::Response& res, double now_s,
                  double interval, double window, const HistoryReader& read) {
  constexpr double kMaxPoints = 2000;
  const auto now = static_cast<int64_t>(std::ceil(now_s));
  const int64_t until = int_param(req, "until", now, 0, INT64_MAX);
  const int64_t since = int_param(req, "since", until - 3600, 0, INT64_MAX);
  if (since > until) throw FieldError("since", "since must not be after until");
  double step = static_cast<double>(
      int_param(req, "step", static_cast<int64_t>(std::ceil(interval)), 1, 86400 * 366));
  const double span = static_cast<double>(until - since);
  if (span / step > kMaxPoints) step = std::ceil(span / kMaxPoints);
  nlohmann::json samples = nlohmann::json::array();
  for (const HistorySample& s :
       read(static_cast<double>(since), static_cast<double>(until), step)) {
    samples.push_back(to_json(s));
  }
  res.set_content(json_text(nlohmann::json{{"interval_s", interval},
                                           {"retention_s", window},
                                           {"since", since},
                                           {"until", until},
                                           {"step_s", step},
                                           {"samples", std::move(samples)}}),
                  kJson);
}

}  // namespace tessera
