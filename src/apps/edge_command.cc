#include "apps/edge_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <stdexcept>
#include <vector>

#include "apps/data_dir.h"
#include "apps/json_file.h"
#include "apps/provenance.h"
#include "engine/policy.h"
#include "model/sites.h"
#include "sim/edge_simulation.h"
#include "sim/interference_data.h"
#include "sim/trace_readers.h"

namespace tessera {

CLI::App* add_edge_command(CLI::App& app, EdgeArgs& a) {
  CLI::App* e = app.add_subcommand(
      "edge", "edge sites: latency-bound inference near its users, under link outages");
  e->add_option("--sites", a.sites, "sites YAML: the main site and edge sites (docs/edge.md)")
      ->required();
  e->add_option("--workload", a.workload, "JSONL jobs; inference services carry `service`")
      ->required();
  e->add_option("--placement", a.placement,
                "edge-first, main-only, or both (compare them; default)");
  e->add_option("--policy", a.policy,
                "each site's scheduling policy, as simulate's (default fair)");
  e->add_option("--seed", a.seed, "random seed");
  e->add_option("--degraded-mbps", a.degraded_mbps,
                "tally apart the requests sent while their link is down or below this (Mbit/s)")
      ->check(CLI::NonNegativeNumber);
  e->add_flag("--pack", a.pack,
              "place 1-GPU services as GPU shares sized from request rate x compute time");
  e->add_option("--pack-headroom", a.pack_headroom,
                "with --pack: a GPU is kept at most 1/this busy (default 1.5)")
      ->check(CLI::Range(1.0, 100.0));
  e->add_option("--colocation-slowdown", a.colocation_slowdown,
                "with --pack: how much slower a service computes beside others (0.25 = 25 %); "
                "default: the mean measured over the interference data's co-located pairs")
      ->check(CLI::Range(0.0, 10.0));
  e->add_option("--data-dir", a.data_dir, "measured data (default: ../shared/data)");
  e->add_option("--json", a.json_out, "write the results as JSON here");
  e->add_flag("--quiet", a.quiet, "no table on stdout");
  return e;
}

namespace {

void print_run(const EdgeResult& r) {
  std::cout << fmt::format(
      "{}{}: {:.0f} requests, {:.1f}% answered, {:.1f}% within SLO, mean latency {:.0f} ms; "
      "starts edge {} / main {}, {} moved to the edge, {} preempted, {} rejected\n",
      r.placement,
      r.pack ? fmt::format(" packed (headroom {:g}, slowdown {:.2f})", r.pack_headroom,
                           r.colocation_slowdown)
             : std::string(),
      r.total.requests, 100 * r.total.served_fraction(), 100 * r.total.slo_attainment(),
      r.total.mean_latency_ms(), r.starts_at_edge, r.starts_at_main, r.migrations, r.preemptions,
      r.rejected.size());
  if (r.degraded.requests > 0) {
    std::cout << fmt::format(
        "  while links were down or below {:g} Mbit/s: {:.0f} requests, {:.1f}% answered, "
        "{:.1f}% within SLO\n",
        r.degraded_mbps, r.degraded.requests, 100 * r.degraded.served_fraction(),
        100 * r.degraded.slo_attainment());
  }
  std::cout << fmt::format("  {:<12} {:>10} {:>10} {:>10} {:>12}\n", "region", "requests",
                           "answered%", "in SLO%", "latency ms");
  for (const auto& [name, t] : r.regions) {
    std::cout << fmt::format("  {:<12} {:>10.0f} {:>10.1f} {:>10.1f} {:>12.0f}\n", name, t.requests,
                             100 * t.served_fraction(), 100 * t.slo_attainment(),
                             t.mean_latency_ms());
  }
  for (const auto& [job, why] : r.rejected)
    std::cout << "  rejected " << job << ": " << why << "\n";
}

// The mean individual slowdown (IndSD = 1 / speed - 1) of every job in every measured
// co-located pair of the interference data: what a service is charged beside others.
double measured_colocation_slowdown(const std::string& data_dir) {
  const InterferenceData d = load_interference_data(data_dir, "all");
  double sum = 0;
  size_t n = 0;
  for (const MeasuredPair& p : d.pairs) {
    for (const double speed : {p.speed_a, p.speed_b}) {
      if (speed > 0) {
        sum += 1.0 / speed - 1.0;
        ++n;
      }
    }
  }
  if (n == 0) throw std::runtime_error(data_dir + "/interference: no measured co-located pairs");
  return sum / static_cast<double>(n);
}

}  // namespace

int run_edge_command(const EdgeArgs& a) {
  std::vector<SitePolicy> placements;
  if (a.placement == "both") {
    placements = {SitePolicy::kMainOnly, SitePolicy::kEdgeFirst};
  } else if (const auto p = parse_site_policy(a.placement)) {
    placements = {*p};
  } else {
    throw std::invalid_argument("--placement: expected edge-first, main-only or both, got '" +
                                a.placement + "'");
  }
  make_policy(a.policy, a.seed);  // an unknown policy is an error before any file is read
  const Sites sites = load_sites(a.sites);
  ReaderOptions ro;
  ro.gpu_types = &sites.sites[sites.main].cluster.gpu_types();
  const Workload w = read_workload(a.workload, trace_format_for(a.workload, "jsonl"), ro);
  nlohmann::ordered_json doc;
  doc["command"] = "edge";
  doc["tessera"] = build_identity();
  doc["sites"] = file_identity(a.sites);
  auto links = nlohmann::ordered_json::array();
  for (const Site& s : sites.sites) {
    if (!s.connectivity_path.empty()) links.push_back(file_identity(s.connectivity_path));
  }
  doc["connectivity"] = std::move(links);
  doc["workload"] = file_identity(a.workload);
  doc["policy"] = a.policy;
  doc["seed"] = a.seed;
  double slowdown = a.colocation_slowdown;
  if (a.pack && slowdown < 0) {
    const std::string dir = data_dir_or_default(a.data_dir);
    slowdown = measured_colocation_slowdown(dir);
    doc["colocation_slowdown_from"] = dir + "/interference";
  }
  for (const SitePolicy p : placements) {
    EdgeOptions opt;
    opt.placement = p;
    opt.policy = a.policy;
    opt.seed = a.seed;
    opt.degraded_mbps = a.degraded_mbps;
    opt.pack = a.pack;
    opt.pack_headroom = a.pack_headroom;
    opt.colocation_slowdown = std::max(0.0, slowdown);
    const EdgeResult r = run_edge_simulation(sites, w, opt);
    if (!a.quiet) print_run(r);
    doc["runs"].push_back(to_json(r));
  }
  write_json_file(a.json_out, doc);
  return 0;
}

}  // namespace tessera
