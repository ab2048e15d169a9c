#include "model/sites.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <filesystem>
#include <limits>

#include "model/cluster_spec.h"
#include "model/csv.h"
#include "model/input_error.h"
#include "model/yaml_util.h"

namespace tessera {

LinkState Site::link_at(double t) const {
  if (main) return {true, std::numeric_limits<double>::infinity(), 0};
  LinkState s{true, link_mbps, link_rtt_ms};
  // The last point at or before t holds (points are sorted by time).
  for (const ConnectivityPoint& p : connectivity) {
    if (p.time > t) break;
    s.up = p.up;
    s.bandwidth_mbps = p.bandwidth_mbps;
  }
  return s;
}

double Site::next_change_after(double t) const {
  for (const ConnectivityPoint& p : connectivity) {
    if (p.time > t) return p.time;
  }
  return std::numeric_limits<double>::infinity();
}

std::optional<size_t> Sites::find(std::string_view name) const {
  for (size_t i = 0; i < sites.size(); ++i) {
    if (sites[i].name == name) return i;
  }
  return std::nullopt;
}

std::vector<ConnectivityPoint> parse_connectivity_csv(std::string_view text,
                                                      const std::string& origin) {
  csv::LineReader lines(text);
  std::string_view line;
  while (lines.next(line) && csv::is_blank(line)) {
  }
  if (csv::is_blank(line)) throw InputError(input_error_message(origin, 0, "", "empty file"));
  const csv::Header header(line, {"time", "up", "bandwidth_mbps"}, {}, origin, lines.line_number(),
                           "connectivity");
  const int c_time = header.index("time"), c_up = header.index("up"),
            c_bw = header.index("bandwidth_mbps");
  csv::Row row(origin, header);
  std::vector<ConnectivityPoint> out;
  while (lines.next(line)) {
    if (csv::is_blank(line)) continue;
    row.reset(line, lines.line_number());
    ConnectivityPoint p;
    p.time = row.number(c_time, 0, std::numeric_limits<double>::max());
    p.up = row.integer(c_up, 0, 1) == 1;
    p.bandwidth_mbps = row.number(c_bw, 0, std::numeric_limits<double>::max());
    if (p.up && p.bandwidth_mbps <= 0) {
      row.fail(c_bw, "an up link needs a bandwidth > 0 (write up = 0 for an outage)");
    }
    if (!out.empty() && p.time < out.back().time) {
      row.fail(c_time, "times must not decrease (the series is read in order)");
    }
    out.push_back(p);
  }
  return out;
}

namespace {

double number_field(const std::string& origin, const YAML::Node& parent, const char* key,
                    const std::string& where, bool positive) {
  const YAML::Node v = parent[key];
  if (!v) yaml_fail(origin, parent, where + "." + key, "required");
  return yaml_number(origin, v, where + "." + key, positive);
}

Site read_site(const std::string& origin, const YAML::Node& n, const std::string& where,
               const std::string& base_dir) {
  check_keys(origin, n, where, {"name", "main", "access_rtt_ms", "cluster", "link", "queues"});
  Site s;
  if (!n["name"]) yaml_fail(origin, n, where + ".name", "required");
  s.name = yaml_string(origin, n["name"], where + ".name");
  if (const YAML::Node m = n["main"]) {
    const std::string v = scalar_of(origin, m, where + ".main", "true or false");
    if (v != "true" && v != "false") {
      yaml_fail(origin, m, where + ".main", "expected true or false, got " + v);
    }
    s.main = v == "true";
  }
  if (n["access_rtt_ms"]) {
    s.access_rtt_ms = yaml_number(origin, n["access_rtt_ms"], where + ".access_rtt_ms", false);
  }
  const YAML::Node c = n["cluster"];
  if (!c) yaml_fail(origin, n, where + ".cluster", "required (the site's nodes)");
  if (!c.IsMap()) yaml_fail(origin, c, where + ".cluster", "expected a cluster description");
  s.cluster = parse_tessera_yaml(c, origin);
  if (s.cluster.num_gpus() == 0) yaml_fail(origin, c, where + ".cluster", "the site has no GPUs");
  if (const YAML::Node q = n["queues"]) {
    std::filesystem::path p = yaml_string(origin, q, where + ".queues");
    if (p.is_relative() && !base_dir.empty()) p = std::filesystem::path(base_dir) / p;
    auto tree = std::make_shared<QueueTree>(load_queue_tree(p.string()));
    tree->validate_against(s.cluster);
    s.queues = std::move(tree);
  }
  const YAML::Node link = n["link"];
  if (s.main && link) {
    yaml_fail(origin, link, where + ".link", "the main site has no link (edge sites link to it)");
  }
  if (!s.main) {
    if (!link) yaml_fail(origin, n, where + ".link", "required for an edge site");
    check_keys(origin, link, where + ".link", {"bandwidth_mbps", "rtt_ms", "connectivity"});
    s.link_mbps = number_field(origin, link, "bandwidth_mbps", where + ".link", true);
    s.link_rtt_ms = number_field(origin, link, "rtt_ms", where + ".link", false);
    if (const YAML::Node cs = link["connectivity"]) {
      std::filesystem::path p = yaml_string(origin, cs, where + ".link.connectivity");
      if (p.is_relative() && !base_dir.empty()) p = std::filesystem::path(base_dir) / p;
      s.connectivity = parse_connectivity_csv(csv::read_file(p.string()), p.string());
      s.connectivity_path = p.string();
    }
  }
  return s;
}

}  // namespace

Sites parse_sites_yaml(std::string_view text, const std::string& origin,
                       const std::string& base_dir) {
  try {
    const std::vector<YAML::Node> docs = load_yaml_documents(text);
    if (docs.empty() || docs.front().IsNull()) {
      throw InputError(input_error_message(origin, 0, "", "empty file"));
    }
    const YAML::Node root = docs.front();
    check_keys(origin, root, "", {"sites"});
    const YAML::Node list = root["sites"];
    if (!list || !list.IsSequence() || list.size() == 0) {
      yaml_fail(origin, list ? list : root, "sites", "expected a list of sites");
    }
    Sites out;
    size_t mains = 0;
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string where = "sites[" + std::to_string(i) + "]";
      Site s = read_site(origin, list[i], where, base_dir);
      if (out.find(s.name)) yaml_fail(origin, list[i], where + ".name", "duplicate site " + s.name);
      if (s.main) {
        out.main = i;
        ++mains;
      }
      out.sites.push_back(std::move(s));
    }
    if (mains != 1) {
      yaml_fail(origin, list, "sites",
                "exactly one site must be the main one (main: true), got " + std::to_string(mains));
    }
    return out;
  } catch (const YAML::Exception& e) {
    const size_t line = e.mark.is_null() ? 0 : static_cast<size_t>(e.mark.line) + 1;
    throw InputError(input_error_message(origin, line, "", yaml_syntax_message(text, e)));
  }
}

Sites load_sites(const std::string& path) {
  const std::string dir = std::filesystem::path(path).parent_path().string();
  return parse_sites_yaml(csv::read_file(path), path, dir);
}

}  // namespace tessera
