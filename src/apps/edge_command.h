// tessera edge: jobs over a main site and edge sites under a connectivity series (docs/edge.md).
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

namespace tessera {

struct EdgeArgs {
  std::string sites;               // sites YAML (model/sites.h)
  std::string workload;            // JSONL jobs; services carry `service` (docs/edge.md)
  std::string placement = "both";  // edge-first | main-only | both
  std::string policy = "fair";
  uint64_t seed = 1;
  double degraded_mbps = 0.5;
  bool pack = false;  // services as GPU shares (EdgeOptions::pack)
  double pack_headroom = 1.5;
  double colocation_slowdown = -1;  // < 0: the mean measured in data_dir's interference pairs
  std::string data_dir;             // ../shared/data unless given (apps/data_dir.h)
  std::string json_out;
  bool quiet = false;
};
CLI::App* add_edge_command(CLI::App& app, EdgeArgs& args);
int run_edge_command(const EdgeArgs& args);

}  // namespace tessera
