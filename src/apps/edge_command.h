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
  std::string json_out;
  bool quiet = false;
};
CLI::App* add_edge_command(CLI::App& app, EdgeArgs& args);
int run_edge_command(const EdgeArgs& args);

}  // namespace tessera
