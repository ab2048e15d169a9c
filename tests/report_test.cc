// tessera report: the page builder (src/report) as a pure function, and the command on real
// results as a user runs it. The browser test (tests/browser/report_test.mjs) draws the page.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <regex>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "report/downsample.h"
#include "report/events.h"
#include "report/fgd_reference.h"
#include "report/html_report.h"

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;
using namespace tessera::report;

const std::string kHostileTenant = "a</script><script>alert(1)</script>\u2028b";

// A simulate result with every field the page draws, in the shape make_report writes.
Json simulate_result(const std::string& policy = "fifo+bestfit") {
  Json r;
  r["policy"] = policy;
  r["seed"] = 1;
  r["workload"] = "test";
  r["run"] = {{"command", "simulate"}, {"policy", {{"backfill", "easy"}}}};
  r["cluster"] = {{"nodes", 4}, {"gpus", 16}};
  r["jobs"] = 3;
  r["finished"] = 3;
  r["jct"] = {{"mean", 7200.0},
              {"p50", 3600.0},
              {"p95", 10000.0},
              {"p99", 10800.0},
              {"cdf", {60.0, 3600.0, 10800.0}}};
  r["queueing_delay"] = {
      {"mean", 60.0}, {"p50", 0.0}, {"p95", 170.0}, {"p99", 180.0}, {"cdf", {0.0, 0.0, 180.0}}};
  r["makespan"] = 14400.0;
  r["gpu_allocation"] = 0.5;
  r["effective_utilisation"] = 0.4;
  r["fairness"] = {{"jain", 0.9}};
  r["sla"] = {{"satisfaction", nullptr}};
  r["preemptions"] = 2;
  r["lost_gpu_hours"] = 0.5;
  r["per_tenant"] = {{kHostileTenant, {{"jobs", 3}, {"jct", {{"mean", 7200.0}}}}}};
  r["share_series"] = {
      {"start", 0.0},
      {"interval_s", 3600.0},
      {"queues",
       {{kHostileTenant,
         {{"gpus", {4.0, 8.0, 2.0, 0.0}}, {"entitled", {16.0, 16.0, 16.0, 0.0}}}}}}};
  r["timeline"] = {{"start", 0.0},
                   {"interval_s", 3600.0},
                   {"preemptions", {0, 2, 0, 0}},
                   {"node_failures", {0, 0, 0, 0}}};
  return r;
}

ReportInput input_of(std::vector<Json> results) {
  ReportInput in;
  for (size_t i = 0; i < results.size(); ++i) {
    in.results.push_back({"run" + std::to_string(i) + ".json", std::move(results[i]), nullptr});
  }
  return in;
}

// The text of the page's data block.
std::string data_block(const std::string& html) {
  const std::string open = "<script type=\"application/json\" id=\"data\">";
  const size_t a = html.find(open);
  EXPECT_NE(a, std::string::npos);
  const size_t b = html.find("</script>", a);
  return html.substr(a + open.size(), b - a - open.size());
}

TEST(ReportHtml, SelfContainedWithNoExternalUrl) {
  const std::string html = build_report_html(input_of({simulate_result()}));
  // No external source or link: scripts and styles are inline, the CSP allows nothing else.
  EXPECT_FALSE(std::regex_search(
      html, std::regex(R"((src|href)\s*=\s*["']?\s*(https?:)?//)", std::regex::icase)));
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_EQ(html.find("<script src"), std::string::npos);
  EXPECT_NE(html.find("default-src 'none'"), std::string::npos);
  EXPECT_NE(html.find("Chart.js v4"), std::string::npos);  // the library, inline
  for (const char* p : {"{{css}}", "{{data}}", "{{chart_js}}", "{{report_js}}", "{{title}}"}) {
    EXPECT_EQ(html.find(p), std::string::npos) << p;  // every placeholder filled
  }
}

TEST(ReportHtml, DataRoundTripsAndScriptEndIsEscaped) {
  const ReportInput in = input_of({simulate_result(), simulate_result("las+spread")});
  const std::string html = build_report_html(in);
  const std::string block = data_block(html);
  // The hostile tenant name cannot end the data element nor start a script.
  EXPECT_EQ(block.find('<'), std::string::npos);
  EXPECT_EQ(html.find("</script><script>alert"), std::string::npos);
  EXPECT_EQ(block.find("\u2028"), std::string::npos);
  EXPECT_NE(block.find("\\u2028"), std::string::npos);
  const Json back = Json::parse(block);
  EXPECT_EQ(back, report_data(in));
  ASSERT_EQ(back["simulate"].size(), 2u);
  EXPECT_EQ(back["simulate"][0]["per_tenant"][0]["tenant"], kHostileTenant);
  EXPECT_EQ(back["simulate"][0]["shares"][0]["queue"], kHostileTenant);
  EXPECT_EQ(back["simulate"][1]["label"], "las+spread");
  // CDF in hours against percent of jobs, from the result's quantiles.
  EXPECT_EQ(back["simulate"][0]["jct_cdf"]["x"], Json({0.01667, 1.0, 3.0}));  // 5 decimals
  EXPECT_EQ(back["simulate"][0]["jct_cdf"]["y"], Json({0.0, 50.0, 100.0}));
  EXPECT_EQ(back["simulate"][0]["allocation"]["y"], Json({25.0, 50.0, 12.5, 0.0}));
  EXPECT_EQ(back["simulate"][0]["timeline"]["total_preemptions"], 2.0);
}

TEST(ReportHtml, TitleIsEscaped) {
  ReportInput in = input_of({simulate_result()});
  in.title = "<b>x</b> & y";
  const std::string html = build_report_html(in);
  EXPECT_NE(html.find("<title>&lt;b&gt;x&lt;/b&gt; &amp; y</title>"), std::string::npos);
}

TEST(ReportHtml, SamePolicyTwiceIsLabelledByFile) {
  const Json d = report_data(input_of({simulate_result(), simulate_result()}));
  EXPECT_EQ(d["simulate"][0]["label"], "fifo+bestfit (run0.json)");
  EXPECT_EQ(d["simulate"][1]["label"], "fifo+bestfit (run1.json)");
}

TEST(ReportHtml, OldResultWithoutPlotDataStillRenders) {
  Json r = simulate_result();
  r["jct"].erase("cdf");
  r["queueing_delay"].erase("cdf");
  r.erase("share_series");
  r.erase("timeline");
  const Json d = report_data(input_of({r}));
  EXPECT_TRUE(d["simulate"][0]["jct_cdf"].is_null());
  EXPECT_TRUE(d["simulate"][0]["allocation"].is_null());
  EXPECT_TRUE(d["simulate"][0]["timeline"].is_null());
  EXPECT_FALSE(build_report_html(input_of({r})).empty());
}

TEST(ReportHtml, EventsFillWhatAnOldResultLacks) {
  Json r = simulate_result();
  r["jct"].erase("cdf");
  r.erase("timeline");
  std::istringstream log(
      "{\"t\":100,\"type\":\"submit\",\"job\":\"a\"}\n"
      "{\"t\":160,\"type\":\"start\",\"job\":\"a\",\"gpus\":[]}\n"
      "{\"t\":200,\"type\":\"preempt\",\"job\":\"a\"}\n"
      "{\"t\":300,\"type\":\"start\",\"job\":\"a\",\"gpus\":[]}\n"
      "{\"t\":3700,\"type\":\"finish\",\"job\":\"a\"}\n");
  const EventsDigest e = digest_events(log, "e.jsonl");
  EXPECT_EQ(e.jct, std::vector<double>({3600.0}));
  EXPECT_EQ(e.wait, std::vector<double>({60.0}));
  ReportInput in = input_of({r});
  in.results[0].events = &e;
  const Json d = report_data(in);
  EXPECT_EQ(d["simulate"][0]["jct_cdf"]["source"], "events");
  EXPECT_EQ(d["simulate"][0]["timeline"]["total_preemptions"], 1.0);
  std::istringstream bad("{\"t\":1,\"type\":\"submit\",\"job\":\"a\"}\nnot json\n");
  try {
    digest_events(bad, "e.jsonl");
    FAIL() << "a bad line was accepted";
  } catch (const std::runtime_error& err) {
    EXPECT_NE(std::string(err.what()).find("e.jsonl line 2"), std::string::npos) << err.what();
  }
}

TEST(ReportHtml, ErrorsNameTheFileAndField) {
  Json r = simulate_result();
  r["jct"].erase("p95");
  try {
    ReportInput in = input_of({r});
    in.results[0].name = "old.json";
    report_data(in);
    FAIL() << "a result without jct.p95 was accepted";
  } catch (const ReportError& e) {
    EXPECT_NE(std::string(e.what()).find("old.json: field 'jct.p95' is missing"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(classify(Json{{"hello", 1}}, "x.json"), ReportError);
  EXPECT_THROW(classify(Json::array(), "x.json"), ReportError);
  r = simulate_result();
  r["makespan"] = "long";
  EXPECT_THROW(report_data(input_of({r})), ReportError);
}

TEST(ReportHtml, OtherCommandsResults) {
  Json frag = {{"policy", "fgd"},
               {"seeds", {42}},
               {"total_gpus", 6212},
               {"pods", "/data/openb_pod_list_gpushare20.csv"},
               {"curve",
                {{{"arrived_pct", 1}, {"allocated_pct", 1.0}, {"frag_ratio_pct", 14.0}},
                 {{"arrived_pct", 2}, {"allocated_pct", 2.0}, {"frag_ratio_pct", 13.0}}}}};
  Json coloc = {{"command", "colocate"},
                {"policies", {{{"name", "fcfs"}, {"indsd_pct", 20.0}}}},
                {"improvements",
                 {{"indsd_lower_vs_fcfs", {{"ours_relative_pct", 5.0}, {"published_pct", 3.79}}}}}};
  Json predict = {{"workload", "w"},
                  {"predictors", {{{"predictor", "gbt"}, {"median_rel_error", 0.4}}}}};
  ReportInput in = input_of({frag, coloc, predict});
  EXPECT_EQ(classify(frag, "f"), ResultKind::kFrag);
  EXPECT_EQ(classify(coloc, "c"), ResultKind::kColocate);
  EXPECT_EQ(classify(predict, "p"), ResultKind::kPredict);
  EXPECT_EQ(frag_workload(frag), "openb_pod_list_gpushare20");
  const std::string csv =
      "workload,sc_policy,tune,seed,total_gpus,0,1,2\n"
      "openb_pod_list_gpushare20,06-FGD,1.3,42,6212,0,1.0,2.0\n"
      "openb_pod_list_gpushare20,06-FGD,1.3,43,6212,0,3.0,\n"
      "openb_pod_list_default,06-FGD,1.3,42,6212,0,9,9\n";
  const std::vector<PublishedCurve> c = published_curves(csv, "openb_pod_list_gpushare20", "a.csv");
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].values, std::vector<double>({0.0, 2.0, 2.0}));  // a missing cell is skipped
  EXPECT_THROW(published_curves("a,b\n", "x", "a.csv"), std::runtime_error);
  in.fgd["openb_pod_list_gpushare20"] = {c, c};
  const Json d = report_data(in);
  EXPECT_EQ(d["frag"][0]["baselines"][0]["policy"], "06-FGD");
  EXPECT_EQ(d["frag"][0]["end"]["allocated"], 2.0);
  EXPECT_EQ(d["colocate"][0]["improvements"][0]["published_pct"], 3.79);
  EXPECT_EQ(d["predict"][0]["predictors"][0]["predictor"], "gbt");
}

TEST(ReportDownsample, KeepsEndsAndBoundsTheCount) {
  Series s;
  for (int i = 0; i < 100000; ++i) {
    s.x.push_back(i);
    s.y.push_back(i == 5000 ? 1e6 : std::sin(i / 100.0));
  }
  const Series d = downsample(s, 2000);
  ASSERT_EQ(d.x.size(), 2000u);
  ASSERT_EQ(d.y.size(), 2000u);
  EXPECT_EQ(d.x.front(), 0);
  EXPECT_EQ(d.x.back(), 99999);
  EXPECT_TRUE(std::is_sorted(d.x.begin(), d.x.end()));
  EXPECT_NE(std::find(d.y.begin(), d.y.end(), 1e6), d.y.end());  // the spike survives
  Series small{{1, 2, 3}, {4, 5, 6}};
  EXPECT_EQ(downsample(small, 2000).x, small.x);

  size_t k = 0;
  const std::vector<double> sums = rebin_sum(std::vector<double>(4001, 1.0), 2000, &k);
  EXPECT_EQ(k, 3u);
  EXPECT_LE(sums.size(), 2000u);
  EXPECT_EQ(std::accumulate(sums.begin(), sums.end(), 0.0), 4001.0);

  const std::vector<double> q = quantiles({5, 1, 3}, 5);
  EXPECT_EQ(q, std::vector<double>({1, 2, 3, 4, 5}));
  EXPECT_TRUE(quantiles({}, 5).empty());
}

TEST(ReportHtml, LongSeriesAreBounded) {
  Json r = simulate_result();
  std::vector<double> held(20000, 1.0), ent(20000, 2.0), pre(20000, 0.0);
  pre[19999] = 3;
  r["share_series"]["queues"] = {{"t", {{"gpus", held}, {"entitled", ent}}}};
  r["timeline"]["preemptions"] = pre;
  r["timeline"]["node_failures"] = std::vector<double>(20000, 0.0);
  std::vector<double> cdf(5001);
  for (size_t i = 0; i < cdf.size(); ++i) cdf[i] = static_cast<double>(i);
  r["jct"]["cdf"] = cdf;
  const Json d = report_data(input_of({r}));
  const Json& run = d["simulate"][0];
  EXPECT_LE(run["shares"][0]["gpus"]["x"].size(), kMaxSeriesPoints);
  EXPECT_LE(run["allocation"]["x"].size(), kMaxSeriesPoints);
  EXPECT_LE(run["timeline"]["preemptions"].size(), kMaxSeriesPoints);
  EXPECT_EQ(run["timeline"]["total_preemptions"], 3.0);
  EXPECT_LE(run["jct_cdf"]["x"].size(), kMaxCdfPoints);
  EXPECT_EQ(run["jct_cdf"]["y"].back(), 100.0);
  EXPECT_EQ(run["jct_cdf"]["x"].back(), tessera::report::round_to(5000.0 / 3600, 5));
}

// ---- the command ----

fs::path tmp(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("tessera-report-" + std::to_string(getpid()));
  fs::create_directories(dir);
  return dir / name;
}

void write(const fs::path& p, const std::string& text) {
  std::ofstream(p) << text;
}

TEST(ReportCli, BadInputsNameTheFileAndWriteNothing) {
  const fs::path out = tmp("bad.html");
  const fs::path good = tmp("good.json");
  write(good, simulate_result().dump());
  struct Case {
    std::string file, content, expect;
  };
  const Case cases[] = {
      {tmp("missing.json").string(), "", "missing.json: cannot read"},
      {tmp("broken.json").string(), "{\"policy\": ", "broken.json: malformed JSON"},
      {tmp("other.json").string(), "{\"hello\": 1}", "other.json: not a Tessera result"},
      {tmp("nojct.json").string(), R"({"policy": "fifo", "makespan": 1})",
       "nojct.json: field 'jobs' is missing"},
  };
  for (const Case& c : cases) {
    if (!c.content.empty()) write(c.file, c.content);
    fs::remove(out);
    const auto r = tessera::testing::run_tessera("report " + good.string() + " " + c.file + " -o " +
                                                 out.string());
    EXPECT_EQ(r.status, 2) << r.output;
    EXPECT_NE(r.output.find("tessera: error: "), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(c.expect), std::string::npos) << r.output;
    EXPECT_FALSE(fs::exists(out)) << c.file;
  }
  // An earlier report is not replaced by a failed one.
  write(out, "earlier");
  EXPECT_EQ(
      tessera::testing::run_tessera("report " + tmp("broken.json").string() + " -o " + out.string())
          .status,
      2);
  std::ifstream in(out);
  std::string kept((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(kept, "earlier");
}

TEST(ReportCli, SimulateResultsAndSimulateReport) {
  const fs::path a = tmp("fifo.json"), b = tmp("las.json"), events = tmp("las.jsonl");
  const fs::path page = tmp("r.html"), own = tmp("own.html");
  ASSERT_EQ(tessera::testing::run_tessera("simulate --quiet --json " + a.string()).status, 0);
  const auto r =
      tessera::testing::run_tessera("simulate --quiet --policy las --json " + b.string() +
                                    " --events " + events.string() + " --report " + own.string());
  ASSERT_EQ(r.status, 0) << r.output;
  // The result carries what the plots need: CDF quantiles and the preemption timeline.
  std::ifstream in(b);
  const Json res = Json::parse(in);
  ASSERT_EQ(res["jct"]["cdf"].size(), 201u);
  EXPECT_LE(res["jct"]["cdf"].front().get<double>(), res["jct"]["p50"].get<double>());
  uint64_t preempted = 0;
  for (const auto& c : res["timeline"]["preemptions"]) preempted += c.get<uint64_t>();
  EXPECT_EQ(preempted, res["preemptions"].get<uint64_t>());
  EXPECT_TRUE(fs::exists(own));
  const auto rep =
      tessera::testing::run_tessera("report " + a.string() + " " + b.string() + " --events " +
                                    events.string() + " -o " + page.string());
  ASSERT_EQ(rep.status, 0) << rep.output;
  std::ifstream html(page);
  std::string text((std::istreambuf_iterator<char>(html)), std::istreambuf_iterator<char>());
  const Json d = Json::parse(data_block(text));
  ASSERT_EQ(d["simulate"].size(), 2u);
  EXPECT_EQ(d["simulate"][1]["policy"], res["policy"]);
  EXPECT_FALSE(d["simulate"][1]["jct_cdf"].is_null());
  EXPECT_LT(fs::file_size(page), 1'000'000u);
  // More event logs than simulate results is an error.
  EXPECT_EQ(tessera::testing::run_tessera("report " + a.string() + " --events " + events.string() +
                                          " --events " + events.string() + " -o " + page.string())
                .status,
            2);
}

}  // namespace
