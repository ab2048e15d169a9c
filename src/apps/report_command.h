// tessera report: results of simulate, frag, colocate and predict (their --json) as one
// self-contained HTML page (src/report/html_report.h).
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "report/html_report.h"

namespace tessera {

struct ReportArgs {
  std::vector<std::string> results;  // RESULT.json files, in the order the page shows them
  std::vector<std::string> events;   // --events: the i-th goes with the i-th simulate result
  std::string out;                   // -o
  std::string title = "Tessera report";
  std::string data_dir;  // where fgd-reference/ is (the published FGD curves)
};
CLI::App* add_report_command(CLI::App& app, ReportArgs& args);
int run_report(const ReportArgs& args);

// The page of `in` written to `path` whole or not at all (a temporary file renamed over it), so
// an error never leaves a partial report. Fills in the generator (this build) if unset.
void write_report_file(const std::string& path, report::ReportInput in);

}  // namespace tessera
