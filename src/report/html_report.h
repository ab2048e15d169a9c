// tessera report: simulation, frag, colocate and predict results (their --json) as one
// self-contained HTML page: the summary tables and the plots, with the chart library and the
// data inline, so that it opens from disk with no network. A pure function of its inputs: the
// CLI (apps/report_command.cc) reads the files.
#pragma once

#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "report/events.h"
#include "report/fgd_reference.h"

namespace tessera::report {

// A result the report cannot use; the message names the file (and the field).
struct ReportError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct ResultInput {
  std::string name;  // the file it came from: errors and labels
  nlohmann::ordered_json result;
  const EventsDigest* events = nullptr;  // its --events log, if given (simulate results only)
};

// The authors' curves for one pod list (fgd_reference.h), drawn beside frag results of it.
struct FragBaselines {
  std::vector<PublishedCurve> allocation, frag_ratio;
};

struct ReportInput {
  std::vector<ResultInput> results;
  std::map<std::string, FragBaselines> fgd;  // by pod list stem ("openb_pod_list_default")
  std::string title = "Tessera report";
  std::string generator;  // "tessera 0.1.0 (abc1234)", shown in the footer
};

enum class ResultKind { kSimulate, kFrag, kColocate, kPredict };
// Which command wrote `result`; throws ReportError naming `name` when none did.
ResultKind classify(const nlohmann::ordered_json& result, const std::string& name);
// The pod list a frag result ran on, as its file stem; the default trace's for results written
// before frag recorded it.
std::string frag_workload(const nlohmann::ordered_json& result);

// Bounds that keep the page small whatever the run (a full Philly replay included).
inline constexpr size_t kMaxCdfPoints = 500;
inline constexpr size_t kMaxSeriesPoints = 2000;

// The page's data block: every run checked and reduced to what the plots draw. Throws
// ReportError on a result that lacks a field the summary needs.
nlohmann::ordered_json report_data(const ReportInput& in);
// The whole page.
std::string build_report_html(const ReportInput& in);

// `json` made safe inside <script type="application/json">: every '<' becomes \u003c (so no
// "</script>" or "<!--" can end or confuse the element), and U+2028 / U+2029 are escaped. It
// parses back to the same value.
std::string escape_script_json(std::string_view json);

}  // namespace tessera::report
