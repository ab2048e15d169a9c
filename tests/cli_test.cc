// End-to-end: the tessera binary on real and generated inputs, as a user runs it.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_util.h"

namespace {

namespace fs = std::filesystem;

using tessera::testing::CmdResult;
CmdResult run(const std::string& args) {
  return tessera::testing::run_tessera(args);
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

fs::path tmp(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("tessera-cli-" + std::to_string(getpid()));
  fs::create_directories(dir);
  return dir / name;
}

const std::string kData = TESSERA_SHARED_DATA;

bool have(const std::string& rel) {
  return fs::exists(kData + "/" + rel);
}

TEST(Cli, DefaultRunPrintsASummary) {
  const CmdResult r = run("simulate");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("jct"), std::string::npos);
  EXPECT_NE(r.output.find("finished 400"), std::string::npos) << r.output;
}

TEST(Cli, SameSeedGivesByteIdenticalJson) {
  for (const char* policy : {"fifo", "las+topology", "drf+random"}) {
    const auto a = tmp("a.json"), b = tmp("b.json");
    ASSERT_EQ(
        run("simulate --quiet --seed 9 --policy " + std::string(policy) + " --json " + a.string())
            .status,
        0);
    ASSERT_EQ(
        run("simulate --quiet --seed 9 --policy " + std::string(policy) + " --json " + b.string())
            .status,
        0);
    EXPECT_EQ(slurp(a), slurp(b)) << policy;
  }
}

TEST(Cli, JsonHasTheDocumentedKeys) {
  const auto j = tmp("k.json");
  ASSERT_EQ(run("simulate --quiet --json " + j.string()).status, 0);
  const auto doc = nlohmann::json::parse(slurp(j));
  for (const char* k : {"jobs", "finished", "makespan", "gpu_allocation", "policy", "seed"}) {
    EXPECT_TRUE(doc.contains(k)) << k;
  }
  for (const char* k : {"mean", "p50", "p95", "p99"}) {
    EXPECT_TRUE(doc["jct"].contains(k));
    EXPECT_TRUE(doc["queueing_delay"].contains(k));
  }
  EXPECT_TRUE(doc["fairness"].contains("jain"));
  ASSERT_FALSE(doc["per_tenant"].empty());
  for (const auto& [name, t] : doc["per_tenant"].items()) EXPECT_TRUE(t["jct"].contains("mean"));
  EXPECT_EQ(doc["jobs"], doc["finished"]);
}

// The independent auditor (shared/tools/audit_events.py) accepts the event log.
TEST(Cli, EventLogPassesTheIndependentAudit) {
  if (!tessera::testing::auditor_available()) GTEST_SKIP() << "auditor or python3 missing";
  std::vector<std::string> inputs = {""};
  if (have("philly/pollux/workloads/workload-3.csv")) {
    inputs.push_back("--workload " + kData + "/philly/pollux/workloads/workload-3.csv");
  }
  for (const std::string& in : inputs) {
    for (const char* policy : {"fifo", "las", "sjf+spread", "drf+topology", "fair"}) {
      const auto j = tmp("audit.json"), e = tmp("audit.jsonl");
      ASSERT_EQ(run("simulate --quiet " + in + " --policy " + policy + " --json " + j.string() +
                    " --events " + e.string())
                    .status,
                0);
      EXPECT_EQ(tessera::testing::audit(e.string(), j.string()), 0) << policy << " " << in;
    }
  }
}

// Bad input exits with tessera's error status (2, not a crash) and a message naming each of
// `mentions` (the file and line, the field, the bad value).
void expect_clean_failure(const std::string& args, const std::vector<std::string>& mentions) {
  const CmdResult r = run(args);
  EXPECT_EQ(r.status, 2) << r.output;
  for (const std::string& m : mentions) EXPECT_NE(r.output.find(m), std::string::npos) << m;
}

TEST(Cli, UnknownPolicyFailsNamingIt) {
  expect_clean_failure("simulate --policy lifo", {"lifo", "fifo"});
}

TEST(Cli, GoodputRefusesWhatItsRoundsDoNotModel) {
  expect_clean_failure("simulate --policy goodput --elastic", {"goodput", "--elastic"});
  expect_clean_failure("simulate --policy goodput --rounds 60 --hetero", {"--hetero"});
  // Its settings without it say so instead of doing nothing.
  const CmdResult r = run("simulate --goodput-exponent 2");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("no effect without --policy goodput"), std::string::npos) << r.output;
}

TEST(Cli, ImpossibleJobFailsNamingTheLine) {
  const auto w = tmp("big.jsonl");
  std::ofstream(w) << R"({"name":"ok","submit":0,"members":2,"work":60})"
                   << "\n"
                   << R"({"name":"huge","submit":5,"members":500,"work":60})"
                   << "\n";
  expect_clean_failure("simulate --workload " + w.string(), {"big.jsonl:2", "huge"});
}

TEST(Cli, MalformedCsvRowFailsNamingLineAndField) {
  const auto w = tmp("bad.csv");
  std::ofstream(w) << "name,time,application,num_replicas,batch_size\n"
                   << "a,0,cifar10,2,128\n"
                   << "b,10,cifar10,two,128\n";
  expect_clean_failure("simulate --workload " + w.string(), {"bad.csv:3", "num_replicas"});
}

TEST(Cli, MissingFileIsAnErrorNotACrash) {
  expect_clean_failure("simulate --workload /nonexistent/trace.csv", {"/nonexistent/trace.csv"});
}

TEST(Cli, BadQueueTreeFailsNamingFileLineAndField) {
  const auto q = tmp("queues.yaml");
  std::ofstream(q) << "queues:\n"
                   << "  - name: tenant-0\n"
                   << "    weight: -2\n";
  expect_clean_failure("simulate --policy fair --queues " + q.string(),
                       {"queues.yaml:3", "weight"});
}

TEST(Cli, TenantWithoutAQueueFailsNamingIt) {
  const auto q = tmp("one-queue.yaml");
  std::ofstream(q) << "queues:\n  - name: tenant-0\n";
  // The embedded workload has tenants tenant-0 .. tenant-3.
  expect_clean_failure("simulate --policy fair --queues " + q.string(), {"tenant-1", "leaf"});
}

// A queue tree with guarantees and classes runs end to end, and its event log passes the
// independent audit.
TEST(Cli, FairPolicyWithAQueueTreePassesTheAudit) {
  const auto q = tmp("tree.yaml");
  std::ofstream(q) << "fairness: {half_life: 12h}\n"
                   << "preemption: {checkpoint_grace: 20s}\n"
                   << "queues:\n"
                   << "  - name: research\n"
                   << "    weight: 2\n"
                   << "    queues: [{name: tenant-0}, {name: tenant-1}]\n"
                   << "  - name: prod\n"
                   << "    guarantee: {gpus: 16}\n"
                   << "    queues:\n"
                   << "      - {name: tenant-2, default_priority_class: production}\n"
                   << "      - {name: tenant-3, default_priority_class: inference-critical, "
                      "default_sla: 10m}\n";
  const auto j = tmp("tree.json"), e = tmp("tree.events");
  const CmdResult r = run("simulate --quiet --policy fair --queues " + q.string() + " --json " +
                          j.string() + " --events " + e.string());
  ASSERT_EQ(r.status, 0) << r.output;
  if (tessera::testing::auditor_available()) {
    EXPECT_EQ(tessera::testing::audit(e.string(), j.string()), 0);
  }
  const auto report = nlohmann::json::parse(slurp(j));
  EXPECT_GT(report["sla"]["jobs"].get<int>(), 0);
  EXPECT_TRUE(report["share_series"]["queues"].contains("prod/tenant-3"));
}

// Node failures from the seeded MTBF model: the report counts them and their recovery time, and
// the event log (failed runs appear as "fail") passes the audit.
TEST(Cli, InjectedNodeFailuresAreReportedAndAudited) {
  const auto j = tmp("fail.json"), e = tmp("fail.events");
  const CmdResult r = run("simulate --quiet --mtbf 24 --mttr 30 --seed 3 --json " + j.string() +
                          " --events " + e.string());
  ASSERT_EQ(r.status, 0) << r.output;
  const auto report = nlohmann::json::parse(slurp(j));
  ASSERT_TRUE(report.contains("failures")) << report.dump();
  EXPECT_GT(report["failures"]["node_failures"].get<int>(), 0);
  EXPECT_EQ(report["failures"]["unrecovered"].get<int>(), 0);
  EXPECT_EQ(report["finished"].get<int>(), 400);
  if (tessera::testing::auditor_available()) {
    EXPECT_EQ(tessera::testing::audit(e.string(), j.string()), 0);
  }
  const auto list = tmp("failures.csv");
  std::ofstream(list) << "time,node,repair_seconds\n60,node-99,10\n";
  expect_clean_failure("simulate --failures " + list.string(), {"failures.csv:2", "node-99"});
}

// --why prints a job's history and puts it in --json; an unknown job name is a clear error.
TEST(Cli, WhyPrintsAJobsHistory) {
  const auto j = tmp("why.json");
  const CmdResult r = run("simulate --policy fair --why job-340 --json " + j.string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("why job-340"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("submitted to queue tenant-"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("finished"), std::string::npos) << r.output;
  const auto report = nlohmann::json::parse(slurp(j));
  ASSERT_TRUE(report["why"].contains("job-340"));
  EXPECT_GE(report["why"]["job-340"].size(), 3u);  // submitted, (pending...), placed, finished
  expect_clean_failure("simulate --why no-such-job", {"--why", "no-such-job"});
}

// Tiresias' finding, reproduced on Pollux's workload: LAS beats FIFO on mean JCT.
TEST(Cli, LasBeatsFifoOnAPolluxWorkload) {
  const std::string w = "philly/pollux/workloads/workload-2.csv";
  if (!have(w)) GTEST_SKIP();
  const std::string cluster = "philly/tiresias/cluster_spec.csv";
  auto mean_jct = [&](const std::string& policy) {
    const auto j = tmp(policy + ".json");
    const CmdResult r =
        run("simulate --quiet --workload " + kData + "/" + w + " --cluster " + kData + "/" +
            cluster + " --policy " + policy + " --json " + j.string());
    EXPECT_EQ(r.status, 0) << r.output;
    return nlohmann::json::parse(slurp(j))["jct"]["mean"].get<double>();
  };
  EXPECT_LT(mean_jct("las"), mean_jct("fifo"));
}

}  // namespace

namespace {

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(CliSurface, BareTesseraPrintsHelpNotASimulation) {
  const CmdResult r = run("");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(has(r.output, "Usage: tessera")) << r.output;
  EXPECT_TRUE(has(r.output, "simulate")) << r.output;
  EXPECT_FALSE(has(r.output, "jct")) << r.output;
}

TEST(CliSurface, VersionNamesTheReleaseAndTheCommit) {
  const CmdResult r = run("--version");
  EXPECT_EQ(r.status, 0);
  EXPECT_TRUE(has(r.output, "tessera 0.")) << r.output;
  EXPECT_TRUE(has(r.output, "(")) << r.output;
}

TEST(CliSurface, UsageErrorsShareOneStyleExitTwoAndGuessTheTypo) {
  struct Case {
    const char* args;
    std::vector<const char*> says;
  };
  const Case cases[] = {
      {"simulat", {"tessera: error: unknown command 'simulat'", "did you mean 'simulate'?"}},
      {"simulate --polcy fifo", {"unknown option --polcy", "did you mean --policy?"}},
      {"simulate --seed abc", {"tessera: error:", "--seed"}},
      {"bench --nodes 0", {"tessera: error: --nodes"}},
      {"bench --gang 0", {"tessera: error: --gang"}},
      {"tenant crate x", {"unknown command 'crate'", "did you mean 'create'?"}},
  };
  for (const Case& c : cases) {
    const CmdResult r = run(c.args);
    EXPECT_EQ(r.status, 2) << c.args << "\n" << r.output;
    for (const char* s : c.says) EXPECT_TRUE(has(r.output, s)) << c.args << "\n" << r.output;
    EXPECT_TRUE(has(r.output, "--help' for usage")) << c.args << "\n" << r.output;
  }
}

TEST(CliSurface, HelpShowsEveryDefault) {
  const CmdResult r = run("simulate --help");
  EXPECT_EQ(r.status, 0);
  EXPECT_TRUE(has(r.output, "--policy TEXT=fifo")) << r.output;
  EXPECT_TRUE(has(r.output, "--seed UINT:>= 0=1")) << r.output;
}

TEST(CliSurface, BenchTimesExactlyTheClusterItNames) {
  // --nodes 10 used to time 32 nodes while printing 10.
  const CmdResult r = run("bench --nodes 10 --gang 8 --pending 100 --repeat 1");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(has(r.output, "10 nodes x 8 GPUs (80 GPUs)")) << r.output;
  EXPECT_TRUE(has(r.output, "10 placed")) << r.output;  // 10 gangs of 8 fill 80 GPUs
  const CmdResult never = run("bench --nodes 2 --gpus-per-node 4 --gang 9");
  EXPECT_EQ(never.status, 2);
  EXPECT_TRUE(has(never.output, "can never fit")) << never.output;
}

}  // namespace

namespace {

TEST(SimulateSurface, TheTextSummaryShowsNodeFailuresAndTheBackfill) {
  // Only --json had the failures; the header did not say the backfill.
  const auto list = tmp("two-failures.csv");
  std::ofstream(list) << "time,node,repair_seconds\n3600,node-0,600\n7200,node-1,600\n";
  const CmdResult r = run("simulate --failures " + list.string() + " --backfill none");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(has(r.output, "backfill none")) << r.output;
  EXPECT_TRUE(has(r.output, "node failures 2")) << r.output;
  EXPECT_TRUE(has(r.output, "recovery mean")) << r.output;
}

TEST(SimulateSurface, OptionsThatCannotApplyWarnOrAreRefused) {
  // Each of these used to be ignored without a word.
  const auto w = tmp("plain.jsonl");
  std::ofstream(w) << R"({"name":"a","submit":0,"work":60})"
                   << "\n";
  struct Case {
    std::string args;
    int status;
    std::string says;
  };
  const Case cases[] = {
      {"--workload " + w.string() + " --elastic", 0, "warning: --elastic has no effect"},
      {"--hetero", 0, "warning: --hetero has no effect: the cluster has one GPU type"},
      {"--reserve-inference", 0, "warning: --reserve-inference has no effect"},
      {"--mttr 10", 2, "error: --mttr requires --mtbf"},
      {"--max-jobs 10", 2, "error: --max-jobs requires --workload"},
      {"--format jsonl", 2, "error: --format requires --workload"},
      {"--tick 0", 2, "error: --tick: must be more than 0, got 0"},
      {"--seed -1", 2, "error: --seed: must be 0 or more, got -1"},
      {"--recovery in-place", 0, "warning: --recovery in-place has no effect"},
      {"--data-locality", 0,
       "warning: --data-locality, --locality-wait, --prestage* and "
       "--cache-eviction have no effect: the cluster declares no storage"},
      {"--prestage", 2, "error: --prestage: --prestage and --prestage-gbs go together"},
      {"--residency", 2, "error: --residency: --residency copies home datasets"},
  };
  for (const Case& c : cases) {
    const CmdResult r = run("simulate --quiet " + c.args);
    EXPECT_EQ(r.status, c.status) << c.args << "\n" << r.output;
    EXPECT_TRUE(has(r.output, "tessera: " + c.says)) << c.args << "\n" << r.output;
  }
}

TEST(SimulateSurface, DatasetsOnStorageTiersAreStagedAndCounted) {
  const auto c = tmp("tiers.yaml"), j = tmp("tiers.json");
  std::ofstream(c) << "racks: 4\nnodes_per_rack: 4\nnode: {gpus: 4}\nstorage:\n"
                      "  object_store: {bandwidth_gbs: 1, per_job_gbs: 0.5}\n"
                      "  nvme: {capacity_gb: 200, bandwidth_gbs: 2}\n";
  const CmdResult r =
      run("simulate --quiet --cluster " + c.string() + " --workload " +
          (std::filesystem::path(TESSERA_SHARED_DATA) / "philly/pollux/workloads/workload-1.csv")
              .string() +
          " --data-dir " + TESSERA_SHARED_DATA +
          " --pollux-datasets --data-locality --prestage --prestage-gbs 0.5 --json " + j.string());
  ASSERT_EQ(r.status, 0) << r.output;
  const auto out = nlohmann::json::parse(slurp(j));
  EXPECT_GT(out["data"]["runs"].get<int>(), 100);
  EXPECT_GT(out["data"]["staging_gpu_hours"].get<double>(), 0);
  EXPECT_GT(out["data"]["prestaged_gb"].get<double>(), 0);
  EXPECT_EQ(out["run"]["data"]["locality"], true);
}

TEST(SimulateSurface, TheJsonRecordsHowTheResultWasProduced) {
  // Policy with backfill and flags, inputs with a content hash, predictor,
  // seed, version: enough to run it again and to see that an input changed.
  const auto w = tmp("prov.jsonl"), j1 = tmp("prov1.json"), j2 = tmp("prov2.json");
  std::ofstream(w) << R"({"name":"a","submit":0,"work":60})"
                   << "\n";
  const std::string args =
      "simulate --quiet --policy sjf --backfill greedy --seed 7 --predictor "
      "mean --workload " +
      w.string();
  ASSERT_EQ(run(args + " --json " + j1.string()).status, 0);
  const auto run1 = nlohmann::json::parse(slurp(j1)).at("run");
  EXPECT_EQ(run1["policy"]["name"], "sjf+bestfit");
  EXPECT_EQ(run1["policy"]["backfill"], "greedy");
  EXPECT_EQ(run1["policy"]["preemption"], true);
  EXPECT_EQ(run1["seed"], 7);
  EXPECT_EQ(run1["predictor"], "mean");
  EXPECT_EQ(run1["workload"]["path"], w.string());
  EXPECT_EQ(run1["workload"]["format"], "jsonl");
  EXPECT_EQ(run1["workload"]["sha256"].get<std::string>().size(), 64u);
  EXPECT_TRUE(run1["cluster"].contains("default"));
  EXPECT_TRUE(has(run1["tessera"]["version"].get<std::string>(), "."));
  EXPECT_FALSE(run1["tessera"]["commit"].get<std::string>().empty());
  std::ofstream(w, std::ios::app) << R"({"name":"b","submit":1,"work":60})"
                                  << "\n";
  ASSERT_EQ(run(args + " --json " + j2.string()).status, 0);
  const auto run2 = nlohmann::json::parse(slurp(j2)).at("run");
  EXPECT_NE(run1["workload"]["sha256"], run2["workload"]["sha256"]);
}

}  // namespace

namespace {

TEST(ProgressLine, LongRunsShowProgressOnATerminalAndNothingOtherwise) {
  if (std::system("command -v script >/dev/null 2>&1") != 0) GTEST_SKIP() << "no script(1)";
  const auto w = tmp("many.jsonl");
  {
    std::ofstream out(w);
    for (int i = 0; i < 5000; ++i) {
      out << R"({"name":"j)" << i << R"(","submit":)" << i << R"(,"work":600})"
          << "\n";
    }
  }
  const std::string args = "simulate --quiet --workload " + w.string();
  // script(1) gives the command a terminal; its output comes back through a pipe.
  const CmdResult tty = tessera::testing::run_tessera_cmd(
      "script -qec '" + std::string(TESSERA_BINARY) + " " + args + "' /dev/null 2>&1");
  ASSERT_EQ(tty.status, 0) << tty.output;
  EXPECT_TRUE(has(tty.output, "simulate: ")) << tty.output;
  EXPECT_TRUE(has(tty.output, "/5000)")) << tty.output;
  const CmdResult piped = run(args);
  ASSERT_EQ(piped.status, 0) << piped.output;
  EXPECT_EQ(piped.output, "") << piped.output;
}

}  // namespace

namespace {

// tessera usage --result: a simulation's accounting, no server needed, in the server's tables.
TEST(Cli, UsageReadsASimulationsResult) {
  const auto j = tmp("usage.json");
  ASSERT_EQ(run("simulate --quiet --json " + j.string()).status, 0);
  const auto table = run("usage --result " + j.string());
  ASSERT_EQ(table.status, 0) << table.output;
  EXPECT_NE(table.output.find("Simulation "), std::string::npos) << table.output;
  EXPECT_NE(table.output.find("tenant-0"), std::string::npos) << table.output;
  const auto csv = run("usage --csv --result " + j.string());
  ASSERT_EQ(csv.status, 0) << csv.output;
  // The CSV's GPU-hours add up to the result's per-tenant GPU-hours.
  const auto doc = nlohmann::json::parse(slurp(j));
  double expected = 0;
  for (const auto& t : doc["per_tenant"]) expected += t["gpu_hours"].get<double>();
  double total = 0;
  std::istringstream lines(csv.output);
  std::string line;
  std::getline(lines, line);  // header
  while (std::getline(lines, line)) {
    size_t at = 0;
    for (int field = 0; field < 3; ++field) at = line.find(',', at) + 1;
    total += std::stod(line.substr(at));
  }
  EXPECT_NEAR(total, expected, 0.01 * 4);  // four tenants' values, printed to 4 decimals
  // Windows are a server's; a file that is not a result says so.
  EXPECT_EQ(run("usage --since 2 --result " + j.string()).status, 2);
  const auto bad = tmp("not-a-result.json");
  std::ofstream(bad) << R"({"jobs": 3})";
  const auto refused = run("usage --result " + bad.string());
  EXPECT_NE(refused.status, 0);
  EXPECT_NE(refused.output.find("has no \"usage\""), std::string::npos) << refused.output;
}

// A result with the simulator's energy (energy.by_tenant) shows each tenant's kWh and carbon;
// one without it shows energy as unknown, not 0.
TEST(Cli, UsageOfAResultShowsItsEnergyWhereItHasIt) {
  const nlohmann::json usage = nlohmann::json::array(
      {{{"tenant", "a"}, {"queue", "a"}, {"gpu_hours", {{"V100", 10.0}}}, {"cpu_hours", 1.0}},
       {{"tenant", "b"}, {"queue", "b"}, {"gpu_hours", {{"V100", 5.0}}}, {"cpu_hours", 0.0}}});
  const auto plain = tmp("usage-plain.json");
  std::ofstream(plain) << nlohmann::json{{"usage", usage}}.dump();
  const auto with = tmp("usage-energy.json");
  std::ofstream(with) << nlohmann::json{
      {"usage", usage},
      {"energy",
       {{"by_tenant",
         {{{"tenant", "a"}, {"gpu_kwh", 2.5}, {"kwh", 3.75}, {"carbon_kg", 1.5}},
          {{"tenant", "b"},
           {"gpu_kwh", 1.0},
           {"kwh", 1.25},
           {"carbon_kg",
            0.5}}}}}}}.dump();
  const auto j = run("usage --json --result " + with.string());
  ASSERT_EQ(j.status, 0) << j.output;
  const auto rows = nlohmann::json::parse(j.output)["usage"];
  EXPECT_DOUBLE_EQ(rows[0]["energy_kwh"].get<double>(), 3.75);
  EXPECT_DOUBLE_EQ(rows[0]["carbon_kg"].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(rows[1]["energy_kwh"].get<double>(), 1.25);
  const auto table = run("usage --result " + with.string());
  ASSERT_EQ(table.status, 0) << table.output;
  EXPECT_NE(table.output.find("3.75"), std::string::npos) << table.output;
  EXPECT_NE(table.output.find("5.00"), std::string::npos) << table.output;  // total kWh
  // An energy price costs the kWh.
  const auto prices = tmp("prices-energy.yaml");
  std::ofstream(prices) << "V100: 1.0\nkwh: 0.2\n";
  const auto priced =
      run("usage --json --prices " + prices.string() + " --result " + with.string());
  ASSERT_EQ(priced.status, 0) << priced.output;
  EXPECT_NEAR(nlohmann::json::parse(priced.output)["usage"][0]["cost"].get<double>(),
              10 * 1.0 + 3.75 * 0.2, 1e-9);

  const auto none = run("usage --json --result " + plain.string());
  ASSERT_EQ(none.status, 0) << none.output;
  EXPECT_FALSE(nlohmann::json::parse(none.output)["usage"][0].contains("energy_kwh"));
  const auto csv = run("usage --csv --result " + plain.string());
  ASSERT_EQ(csv.status, 0) << csv.output;
  EXPECT_NE(csv.output.find("a,a,V100,10.0000,1.0000,0,0,0,0,0,0.0000,0,0,,,,\n"),
            std::string::npos)
      << csv.output;
  const auto unknown = run("usage --result " + plain.string());
  std::istringstream lines(unknown.output);
  std::string line;
  bool seen = false;
  while (std::getline(lines, line)) {
    if (!line.starts_with("a ")) continue;
    seen = true;
    EXPECT_TRUE(line.ends_with(" -        -")) << unknown.output;  // KWH and CO2-KG
  }
  EXPECT_TRUE(seen) << unknown.output;
}

}  // namespace
