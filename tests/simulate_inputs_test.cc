// End-to-end: what `tessera simulate` does with inputs written for other clusters: newer GPU
// types, jobs the cluster can never run (--skip-impossible), and work timed on another type
// (work_on).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_util.h"

namespace {

namespace fs = std::filesystem;
using tessera::testing::CmdResult;

fs::path dir() {
  const fs::path d =
      fs::temp_directory_path() / ("tessera-simulate-inputs-" + std::to_string(getpid()));
  fs::create_directories(d);
  return d;
}

fs::path write(const std::string& name, const std::string& text) {
  const fs::path p = dir() / name;
  std::ofstream(p) << text;
  return p;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// 8 L40S and 8 H100: the types of the first report ("unknown GPU type 'L40S'").
const char* kNewTypes =
    "nodes:\n  - {name: l, gpus: 8, gpu_type: L40S}\n  - {name: h, gpus: 8, gpu_type: H100}\n";
// 8 V100 and 8 H100 (types known before L40S was), for the tests of the other fixes.
const char* kCluster =
    "nodes:\n  - {name: v, gpus: 8, gpu_type: V100}\n  - {name: h, gpus: 8, gpu_type: H100}\n";

// Line 2 asks for 32 H100s of a cluster with 8; line 4 is the only job of tenant t3 and asks
// for a node of 16 GPUs.
const char* kWorkload =
    R"({"name": "a", "tenant": "t1", "submit": 0, "gpus": 2, "work": 3600, "gpu_types": ["H100"]})"
    "\n"
    R"({"name": "big", "tenant": "t2", "submit": 10, "gpus": 4, "members": 8, "work": 100,)"
    R"( "gpu_types": ["H100"]})"
    "\n"
    R"({"name": "b", "tenant": "t2", "submit": 20, "gpus": 1, "work": 3600})"
    "\n"
    R"({"name": "wide", "tenant": "t3", "submit": 30, "gpus": 16, "work": 60})"
    "\n";

TEST(SimulateInputs, NewerGpuTypesInTheCluster) {
  const fs::path c = write("types.yaml", kNewTypes);
  const fs::path w = write("one.jsonl", R"({"name": "a", "submit": 0, "gpus": 8, "work": 60})"
                                        "\n");
  const CmdResult r = tessera::testing::run_tessera("simulate --quiet --workload " + w.string() +
                                                    " --cluster " + c.string());
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_FALSE(contains(r.output, "unknown GPU type")) << r.output;
}

TEST(SimulateInputs, AJobThatCanNeverRunIsAnErrorThatNamesTheFlag) {
  const fs::path c = write("skip.yaml", kCluster);
  const fs::path w = write("skip.jsonl", kWorkload);
  const CmdResult r = tessera::testing::run_tessera("simulate --quiet --workload " + w.string() +
                                                    " --cluster " + c.string());
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_TRUE(contains(r.output, w.string() + ":2: job big can never run on this cluster: asks "
                                              "for 32 GPUs, but the cluster has 8"))
      << r.output;
  EXPECT_TRUE(contains(r.output, "--skip-impossible")) << r.output;
}

TEST(SimulateInputs, SkipImpossibleReportsEachSkippedJobAndLeavesThemOutOfTheMetrics) {
  const fs::path c = write("skip2.yaml", kCluster);
  const fs::path w = write("skip2.jsonl", kWorkload);
  const fs::path json = dir() / "skip2.json";
  const fs::path err = dir() / "skip2.err";
  const fs::path events = dir() / "skip2.events.jsonl";
  const CmdResult r = tessera::testing::run_tessera_cmd(
      std::string(TESSERA_BINARY) + " simulate --skip-impossible --workload " + w.string() +
      " --cluster " + c.string() + " --json " + json.string() + " --events " + events.string() +
      " 2>" + err.string());
  ASSERT_EQ(r.status, 0) << r.output << slurp(err);
  // One line on stderr per skipped job, naming its file:line and why; then the count.
  const std::string stderr_text = slurp(err);
  EXPECT_TRUE(contains(stderr_text, "tessera: skipped " + w.string() +
                                        ":2: job big can never run on this cluster: asks for 32 "
                                        "GPUs, but the cluster has 8 of the allowed types\n"))
      << stderr_text;
  EXPECT_TRUE(contains(stderr_text, "tessera: skipped " + w.string() + ":4: job wide "))
      << stderr_text;
  EXPECT_TRUE(contains(stderr_text, "skipped 2 of 4 jobs")) << stderr_text;
  EXPECT_FALSE(contains(r.output, "skipped")) << "stdout: " << r.output;
  EXPECT_TRUE(contains(r.output, "jobs 2, finished 2")) << r.output;

  // The result records how it was produced; the metrics count only the jobs simulated, and the
  // tenant whose only job was skipped is in none of them.
  const nlohmann::json j = nlohmann::json::parse(slurp(json));
  const nlohmann::json& s = j["run"]["skip_impossible"];
  EXPECT_EQ(s["jobs_read"], 4);
  EXPECT_EQ(s["skipped"], 2);
  ASSERT_EQ(s["jobs"].size(), 2u);
  EXPECT_EQ(s["jobs"][0]["name"], "big");
  EXPECT_EQ(s["jobs"][0]["source"], w.string() + ":2");
  EXPECT_TRUE(contains(s["jobs"][0]["reason"].get<std::string>(), "asks for 32 GPUs"));
  EXPECT_EQ(s["jobs"][1]["name"], "wide");
  EXPECT_EQ(j["jobs"], 2);
  EXPECT_EQ(j["finished"], 2);
  EXPECT_TRUE(j["per_tenant"].contains("t1"));
  EXPECT_EQ(j["per_tenant"]["t2"]["jobs"], 1);
  EXPECT_FALSE(j["per_tenant"].contains("t3")) << j["per_tenant"].dump();
  for (const auto& row : j["usage"]) EXPECT_NE(row["tenant"], "t3");
  // The jobs that ran keep their names in the event log; the skipped ones are not in it.
  std::ifstream ev(events);
  std::set<std::string> named;
  for (std::string line; std::getline(ev, line);) {
    const nlohmann::json e = nlohmann::json::parse(line);
    if (e.contains("job")) named.insert(e["job"].get<std::string>());
  }
  EXPECT_EQ(named, (std::set<std::string>{"a", "b"}));

  // --why about a skipped job says it was skipped.
  const CmdResult why = tessera::testing::run_tessera(
      "simulate --quiet --skip-impossible --why big"
      " --workload " +
      w.string() + " --cluster " + c.string());
  EXPECT_EQ(why.status, 2) << why.output;
  EXPECT_TRUE(contains(why.output, "--why: job 'big' was skipped")) << why.output;

  // With nothing to skip, the flag changes nothing but the record (the jobs keep their names).
  const fs::path fine = write(
      "fine.jsonl",
      R"({"name": "a", "tenant": "t1", "submit": 0, "gpus": 2, "work": 60, "gpu_types": ["H100"]})"
      "\n");
  const fs::path fine_json = dir() / "fine.json";
  const CmdResult ok = tessera::testing::run_tessera(
      "simulate --quiet --skip-impossible --why a --workload " + fine.string() + " --cluster " +
      c.string() + " --json " + fine_json.string());
  ASSERT_EQ(ok.status, 0) << ok.output;
  EXPECT_FALSE(contains(ok.output, "skipped")) << ok.output;
  const nlohmann::json f = nlohmann::json::parse(slurp(fine_json));
  EXPECT_EQ(f["run"]["skip_impossible"]["skipped"], 0);
  EXPECT_EQ(f["jobs"], 1);

  // Without the flag the result has no such record (results of runs without it are unchanged).
  const fs::path plain = dir() / "plain.json";
  ASSERT_EQ(tessera::testing::run_tessera("simulate --quiet --json " + plain.string()).status, 0);
  EXPECT_FALSE(nlohmann::json::parse(slurp(plain))["run"].contains("skip_impossible"));
}

TEST(SimulateInputs, SkipImpossibleWithNothingLeftIsAnError) {
  const fs::path c = write("none.yaml", kCluster);
  const fs::path w = write("none.jsonl", R"({"name": "x", "submit": 0, "gpus": 64, "work": 1})"
                                         "\n");
  const CmdResult r = tessera::testing::run_tessera(
      "simulate --quiet --skip-impossible --workload " + w.string() + " --cluster " + c.string());
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "skipped all 1")) << r.output;
}

TEST(SimulateInputs, WorkOnMakesTenHoursOnAnH100TenHoursThere) {
  // `work` is V100-seconds: 36,000 of them end in 36000 / 6.3 s on an H100. Timed on an
  // H100 (work_on), they take ten hours there.
  const fs::path c = write("h100.yaml", "nodes:\n  - {name: h, gpus: 8, gpu_type: H100}\n");
  const auto makespan_h = [&](const std::string& job) {
    const fs::path w = write("work_on.jsonl", job + "\n");
    const fs::path json = dir() / "work_on.json";
    const CmdResult r =
        tessera::testing::run_tessera("simulate --quiet --no-comm-model --workload " + w.string() +
                                      " --cluster " + c.string() + " --json " + json.string());
    EXPECT_EQ(r.status, 0) << r.output;
    return nlohmann::json::parse(slurp(json))["makespan"].get<double>() / 3600.0;
  };
  EXPECT_NEAR(makespan_h(R"({"name": "a", "submit": 0, "gpus": 8, "work": 36000})"), 10 / 6.3,
              0.01);
  EXPECT_NEAR(
      makespan_h(R"({"name": "a", "submit": 0, "gpus": 8, "work": 36000, "work_on": "H100"})"),
      10.0, 0.01);
  const fs::path w =
      write("bad_on.jsonl", R"({"name": "a", "submit": 0, "work": 1, "work_on": "H800"})"
                            "\n");
  const CmdResult bad = tessera::testing::run_tessera("simulate --quiet --workload " + w.string() +
                                                      " --cluster " + c.string());
  EXPECT_EQ(bad.status, 2);
  EXPECT_TRUE(contains(bad.output, w.string() + ":1: field work_on: unknown GPU type 'H800' "
                                                "(known: V100"))
      << bad.output;
}

}  // namespace
