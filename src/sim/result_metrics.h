// Turns a simulation result into the metrics of DESIGN.md ("one definition, used everywhere"):
// the --json document and the summary table.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/cluster.h"
#include "model/job.h"
#include "sim/simulator.h"

namespace tessera {

struct Summary {
  double mean = 0, p50 = 0, p95 = 0, p99 = 0;
};
// Percentiles by linear interpolation between closest ranks (numpy's default), so a p50 of
// {1, 2} is 1.5. Empty input gives zeros.
Summary summarize(std::vector<double> values);

struct ReportContext {
  std::string policy;
  uint64_t seed = 0;
  std::string workload;  // where the jobs came from
  // How the result was produced (the command's whole configuration, input hashes, version):
  // written as "run" when not null; the summary's header shows its backfill.
  nlohmann::ordered_json run;
};

nlohmann::ordered_json make_report(const Workload& w, const Cluster& c, const SimResult& r,
                                   const ReportContext& ctx);
// A readable table of the main numbers.
std::string format_summary(const nlohmann::ordered_json& report);
// The histories of the jobs asked about (--why), one line per entry; "" when none.
std::string format_histories(const nlohmann::ordered_json& report);

}  // namespace tessera
