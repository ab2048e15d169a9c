#include "apps/report_command.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>

#include "apps/data_dir.h"
#include "model/version.h"
#include "report/events.h"
#include "report/fgd_reference.h"

#ifndef TESSERA_SHARED_DATA
#define TESSERA_SHARED_DATA "../shared/data"
#endif

namespace tessera {

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw report::ReportError(path + ": cannot read (" + std::strerror(errno) + ")");
  std::ostringstream s;
  s << in.rdbuf();
  if (in.bad()) throw report::ReportError(path + ": cannot read");
  return s.str();
}

nlohmann::ordered_json read_result(const std::string& path) {
  if (std::filesystem::is_directory(path)) {
    throw report::ReportError(path + ": is a directory, not a result file");
  }
  const std::string text = read_file(path);
  try {
    return nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // e.what() is "[json.exception.parse_error.101] parse error at line 1, column 2: ...".
    std::string why = e.what();
    if (const size_t at = why.find("] "); at != std::string::npos) why = why.substr(at + 2);
    throw report::ReportError(path + ": malformed JSON: " + why);
  }
}

// The published curves of every pod list the frag results name, when the data is at hand.
std::map<std::string, report::FragBaselines> load_baselines(
    const std::vector<report::ResultInput>& results, const std::string& data_dir) {
  std::map<std::string, report::FragBaselines> out;
  const std::filesystem::path dir = std::filesystem::path(data_dir) / "fgd-reference";
  const std::filesystem::path allo = dir / "analysis_allo_discrete.csv";
  const std::filesystem::path frag = dir / "analysis_frag_ratio_discrete.csv";
  if (!std::filesystem::exists(allo)) return out;
  std::string allo_text, frag_text;
  for (const report::ResultInput& r : results) {
    if (report::classify(r.result, r.name) != report::ResultKind::kFrag) continue;
    const std::string stem = report::frag_workload(r.result);
    if (out.count(stem) != 0) continue;
    if (allo_text.empty()) allo_text = read_file(allo.string());
    if (frag_text.empty() && std::filesystem::exists(frag)) frag_text = read_file(frag.string());
    report::FragBaselines b;
    b.allocation = report::published_curves(allo_text, stem, allo.string());
    if (!frag_text.empty()) b.frag_ratio = report::published_curves(frag_text, stem, frag.string());
    out[stem] = std::move(b);
  }
  return out;
}

}  // namespace

CLI::App* add_report_command(CLI::App& app, ReportArgs& a) {
  CLI::App* r = app.add_subcommand(
      "report",
      "One self-contained HTML page (tables and plots, opens offline) from the --json results "
      "of simulate, frag, colocate and predict");
  r->add_option("results", a.results, "RESULT.json files (simulate runs are compared side by side)")
      ->required()
      ->type_name("RESULT.json");
  r->add_option("-o,--output", a.out, "the HTML file to write")->required()->type_name("FILE");
  r->add_option("--events", a.events,
                "a simulate --events log (repeatable: the i-th goes with the i-th simulate "
                "result), for CDFs and the timeline of results that lack them")
      ->type_name("EVENTS.jsonl");
  r->add_option("--title", a.title, "the page's title");
  r->add_option("--data-dir", a.data_dir,
                "where fgd-reference/ is, for the published FGD curves beside frag results "
                "(default: $TESSERA_DATA or ../shared/data)");
  return r;
}

void write_report_file(const std::string& path, report::ReportInput in) {
  if (in.generator.empty()) {
    in.generator = fmt::format("tessera {} ({})", tessera_version(), tessera_commit());
  }
  const std::string html = report::build_report_html(in);
  const std::filesystem::path target(path);
  const std::filesystem::path tmp =
      target.parent_path() / ("." + target.filename().string() + ".tmp");
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error("cannot write " + path + " (" + std::strerror(errno) + ")");
    out << html;
    out.close();
    if (!out) {
      std::error_code ignored;
      std::filesystem::remove(tmp, ignored);
      throw std::runtime_error("cannot write " + path);
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, target, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    throw std::runtime_error("cannot write " + path + " (" + ec.message() + ")");
  }
}

int run_report(const ReportArgs& a) {
  report::ReportInput in;
  in.title = a.title;
  for (const std::string& path : a.results) {
    in.results.push_back({path, read_result(path), nullptr});
    report::classify(in.results.back().result, path);  // not a result: fail before anything
  }
  // Event logs, matched in order to the simulate results.
  std::vector<std::unique_ptr<report::EventsDigest>> digests;
  size_t next = 0;
  for (const std::string& path : a.events) {
    while (next < in.results.size() &&
           report::classify(in.results[next].result, in.results[next].name) !=
               report::ResultKind::kSimulate) {
      ++next;
    }
    if (next == in.results.size()) {
      throw report::ReportError(fmt::format(
          "--events {}: more event logs than simulate results (the i-th log goes with the i-th "
          "simulate result)",
          path));
    }
    std::ifstream f(path);
    if (!f) throw report::ReportError(path + ": cannot read (" + std::strerror(errno) + ")");
    digests.push_back(std::make_unique<report::EventsDigest>(report::digest_events(f, path)));
    in.results[next++].events = digests.back().get();
  }
  in.fgd = load_baselines(in.results, data_dir_or_default(a.data_dir));
  write_report_file(a.out, std::move(in));
  return 0;
}

}  // namespace tessera
