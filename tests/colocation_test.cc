// The co-location experiment and its data readers, on small generated inputs: work is
// conserved at the pair speeds, the recommender avoids a clearly bad pair that FCFS makes, bad
// CSV is reported by file, line and column, and `tessera colocate` writes its JSON.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "input_error_util.h"
#include "sim/colocation_experiment.h"
#include "sim/interference_data.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using testing::Contains;
using testing::error_of;

// A catalogue of jobs with the given clusters (uncertainty 1, features by cluster).
ColocWorld world_of(const std::vector<uint32_t>& clusters, size_t k) {
  ColocWorld w;
  w.seeded = InterferenceModel(k);
  for (uint32_t c : clusters) {
    Candidate x;
    x.cluster = c;
    x.uncertainty = 1;
    x.features = {c == 0 ? 20.0 : 80.0, 30, 10};
    w.jobs.push_back(x);
    w.alone_seconds.push_back(0);
  }
  return w;
}

ColocPolicy fcfs() {
  return *find_colocation_policy("fcfs", 0);
}

TEST(Colocation, EachJobFinishesAfterExactlyItsWorkAtThePairSpeeds) {
  ColocWorld w = world_of({0, 1, 0}, 2);
  w.truth.set(0, 1, 0.5, 0.8);
  w.seeded.observe_speeds(0, 1, 0.5, 0.8);
  ColocOptions o;
  o.gpus = 1;
  o.slots = 2;
  // Job 0 (100 s alone) and job 1 (200 s) share the GPU from t = 0: job 0 runs at 0.5 and
  // ends at 200; job 1 has done 160 s of work by then and runs the last 40 alone. Job 2
  // (50 s) arrives at 10, waits for a slot, then shares with job 1 at the fallback speed.
  const std::vector<ColocJob> jobs = {{0, 100, 0}, {1, 200, 0}, {2, 50, 10}};
  const ColocRun r = run_colocation(w, jobs, fcfs(), o, 1);
  EXPECT_NEAR(r.jobs[0].start, 0, 1e-9);
  EXPECT_NEAR(r.jobs[0].finish, 200, 1e-6);
  EXPECT_NEAR(r.jobs[2].start, 200, 1e-9);
  // Job 2 (cluster 0) beside job 1 (cluster 1): not measured, so the cluster-pair mean 0.5 for
  // job 2 and 0.8 for job 1. Job 1 needs 40 more: 50 s at 0.8. Job 2 needs 100 s at 0.5.
  EXPECT_NEAR(r.jobs[1].finish, 250, 1e-6);
  // Job 2 did 25 s of work by 250 and runs the other 25 alone.
  EXPECT_NEAR(r.jobs[2].finish, 275, 1e-6);
  // IndSD: job 0 (200-100)/100 = 1, job 1 (250-200)/200 = 0.25, job 2 (75-50)/50 = 0.5.
  EXPECT_NEAR(r.indsd_mean, (1 + 0.25 + 0.5) / 3, 1e-9);
  // PacSav: (350 - busy 275) / 350.
  EXPECT_NEAR(r.pacsav, 75.0 / 350, 1e-9);
  EXPECT_EQ(r.colocated_jobs, 3u);
  // Per pair: jobs 0 + 1 from t = 0 (300 s alone), first finish at 200, job 1 has 40 left:
  // (300 - 200 - 40) / 300. Jobs 1 + 2 from t = 200 (40 + 50), job 1 ends at 250 and job 2
  // has 25 left: (90 - 50 - 25) / 90.
  EXPECT_EQ(r.episodes, 2u);
  EXPECT_NEAR(r.pacsav_pairs, (60.0 / 300 + 15.0 / 90) / 2, 1e-9);
}

TEST(Colocation, AJobAloneFinishesAfterItsWork) {
  ColocWorld w = world_of({0}, 1);
  ColocOptions o;
  o.gpus = 2;
  const std::vector<ColocJob> jobs = {{0, 123, 5}};
  const ColocRun r = run_colocation(w, jobs, fcfs(), o, 1);
  EXPECT_NEAR(r.jobs[0].finish, 128, 1e-9);
  EXPECT_DOUBLE_EQ(r.indsd_mean, 0);
  EXPECT_DOUBLE_EQ(r.pacsav, 0);
}

TEST(Colocation, RecommenderBeatsFcfsWhenOnePairIsClearlyBad) {
  // Catalogue: job 0 light, job 1 heavy. Heavy beside heavy crawls; anything with a light job
  // is nearly free. Arrivals come heavy, heavy, light, light, ... so FCFS pairs the heavies.
  ColocWorld w = world_of({0, 1}, 2);
  w.truth.set(0, 0, 0.95, 0.95);
  w.truth.set(0, 1, 0.9, 0.9);
  w.truth.set(1, 1, 0.3, 0.3);
  w.seeded.observe_speeds(0, 0, 0.95, 0.95);
  w.seeded.observe_speeds(0, 1, 0.9, 0.9);
  w.seeded.observe_speeds(1, 1, 0.3, 0.3);
  std::vector<ColocJob> jobs;
  for (int i = 0; i < 40; ++i) {
    const uint32_t type = (i % 4) < 2 ? 1 : 0;
    jobs.push_back({type, 300, static_cast<double>(i)});
  }
  ColocOptions o;
  o.gpus = 2;
  const ColocRun base = run_colocation(w, jobs, fcfs(), o, 1);
  for (const char* name : {"min-indsd", "balance", "max-pacsav", "max-pacsav-mem"}) {
    const ColocRun rec = run_colocation(w, jobs, *find_colocation_policy(name, 0), o, 1);
    EXPECT_LT(rec.indsd_mean, base.indsd_mean - 0.2) << name;
    EXPECT_GT(rec.pacsav, base.pacsav + 0.05) << name;
  }
}

TEST(Colocation, EstimatesAreExactWithoutErrorAndSeededWithIt) {
  ColocWorld w = world_of({0, 1, 0}, 2);
  ColocOptions o;
  o.jobs = 30;
  o.estimate_error = 0;
  const auto exact = make_colocation_workload(w, o, 7);
  for (const ColocJob& j : exact) EXPECT_DOUBLE_EQ(j.estimate, j.work);
  o.estimate_error = 0.3;
  const auto noisy = make_colocation_workload(w, o, 7);
  const auto again = make_colocation_workload(w, o, 7);
  const auto other = make_colocation_workload(w, o, 8);
  ASSERT_EQ(noisy.size(), exact.size());
  size_t differ = 0;
  for (size_t i = 0; i < noisy.size(); ++i) {
    // The same jobs and arrivals for every error level; the estimates are seeded.
    EXPECT_EQ(noisy[i].catalog, exact[i].catalog);
    EXPECT_DOUBLE_EQ(noisy[i].work, exact[i].work);
    EXPECT_DOUBLE_EQ(noisy[i].submit, exact[i].submit);
    EXPECT_DOUBLE_EQ(noisy[i].estimate, again[i].estimate);
    EXPECT_GT(noisy[i].estimate, 0);
    differ += noisy[i].estimate != exact[i].estimate;
  }
  EXPECT_EQ(differ, noisy.size());
  EXPECT_NE(other[0].estimate / other[0].work, noisy[0].estimate / noisy[0].work);
  o.estimate_error = -1;
  EXPECT_THROW(make_colocation_workload(w, o, 7), std::invalid_argument);
}

TEST(Colocation, DurationAwarePacSavPairsTheResidentWithTheMatchingJob) {
  // One cluster, one GPU: all jobs arrive at once. The head (300 s) takes the empty GPU; with
  // exact estimates the duration-aware policy picks the 310 s job, FCFS the next in line.
  ColocWorld w = world_of({0}, 1);
  w.truth.set(0, 0, 0.8, 0.8);
  w.seeded.observe_speeds(0, 0, 0.8, 0.8);
  ColocOptions o;
  o.gpus = 1;
  o.estimate_error = 0;
  std::vector<ColocJob> jobs = {{0, 300, 0}, {0, 1000, 0}, {0, 310, 0}, {0, 60, 0}};
  for (ColocJob& j : jobs) j.estimate = j.work;
  for (const char* name : {"max-pacsav-dur-pair", "max-pacsav-dur-pair-greedy"}) {
    const ColocRun r = run_colocation(w, jobs, *find_colocation_policy(name, 0), o, 1);
    EXPECT_DOUBLE_EQ(r.jobs[2].start, 0) << name;
    EXPECT_GT(r.jobs[1].start, 0) << name;
  }
  const ColocRun f = run_colocation(w, jobs, fcfs(), o, 1);
  EXPECT_DOUBLE_EQ(f.jobs[1].start, 0);
  EXPECT_GT(f.jobs[2].start, 0);
}

TEST(Colocation, ExperimentIsDeterministicForASeed) {
  ColocWorld w = world_of({0, 1, 0, 1}, 2);
  w.truth.set(0, 1, 0.7, 0.6);
  w.seeded.observe_speeds(0, 1, 0.7, 0.6);
  w.seeded.observe_speeds(1, 1, 0.4, 0.4);
  ColocOptions o;
  o.jobs = 50;
  o.gpus = 3;
  const auto policies = standard_colocation_policies(0.2);
  const auto a = run_colocation_experiment(w, policies, o, 4, 3);
  const auto b = run_colocation_experiment(w, policies, o, 4, 3);
  ASSERT_EQ(a.size(), policies.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].indsd_per_seed, b[i].indsd_per_seed) << a[i].policy;
    EXPECT_EQ(a[i].pacsav_per_seed, b[i].pacsav_per_seed) << a[i].policy;
    EXPECT_EQ(a[i].pacsav_pairs_per_seed, b[i].pacsav_pairs_per_seed) << a[i].policy;
  }
  // Exact estimates and noisy ones: each deterministic, and they change a duration-aware run
  // but not FCFS (which never looks at estimates).
  o.estimate_error = 0;
  const auto exact = run_colocation_experiment(w, policies, o, 4, 3);
  const auto exact2 = run_colocation_experiment(w, policies, o, 4, 3);
  bool changed = false;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(exact[i].indsd_per_seed, exact2[i].indsd_per_seed) << a[i].policy;
    if (a[i].policy == "fcfs") {
      EXPECT_EQ(exact[i].indsd_per_seed, a[i].indsd_per_seed);
    }
    if (a[i].policy.find("-dur") != std::string::npos) {
      changed = changed || exact[i].indsd_per_seed != a[i].indsd_per_seed;
    }
  }
  EXPECT_TRUE(changed);
}

const char* kSingle =
    "model,dataset,batchsize,amp,speed,gpu_util,gmem_util,gmem,label\n"
    "Light,D,32,0,100,20,5,2048,0\n"
    "Heavy,D,64,0,50,90,60,8192,2\n";
const char* kPairs =
    ",model1,dataset1,gpu_num1,batchsize1,amp1,speed1,model2,dataset2,gpu_num2,batchsize2,amp2,"
    "speed2,gpu_util,gmem_util,gmem\n"
    "0,Light,D,1,32,0,0.95,Heavy,D,1,64,0,0.9,90,60,9000\n"
    "1,Heavy,D,1,64,0,0.3,Heavy,D,1,64,0,0.3,99,80,16000\n";

TEST(InterferenceData, ReadsLucidJobsAndPairs) {
  InterferenceData d;
  parse_lucid(kSingle, "single.csv", kPairs, "pairs.csv", d);
  ASSERT_EQ(d.jobs.size(), 2u);
  EXPECT_EQ(d.jobs[1].name, "lucid:Heavy/D/bs64/amp0");
  EXPECT_DOUBLE_EQ(d.jobs[1].features.gpu_util, 90);
  EXPECT_DOUBLE_EQ(d.jobs[1].features.mem_alloc, 100.0 * 8192 / kLucidGpuMemoryMb);
  ASSERT_EQ(d.pairs.size(), 2u);
  EXPECT_EQ(d.pairs[0].a, 0u);
  EXPECT_EQ(d.pairs[0].b, 1u);
  EXPECT_DOUBLE_EQ(d.pairs[1].speed_a, 0.3);
}

TEST(InterferenceData, BadCsvNamesFileLineAndColumn) {
  InterferenceData d;
  std::string bad = kSingle;
  bad.replace(bad.find(",90,"), 4, ",abc,");
  std::string msg = error_of([&] { parse_lucid(bad, "single.csv", kPairs, "pairs.csv", d); });
  EXPECT_TRUE(Contains(msg, "single.csv:3"));
  EXPECT_TRUE(Contains(msg, "gpu_util"));
  InterferenceData e;
  std::string unknown = kPairs;
  unknown.replace(unknown.find("0,Light"), 7, "0,Nope");
  msg = error_of([&] { parse_lucid(kSingle, "single.csv", unknown, "pairs.csv", e); });
  EXPECT_TRUE(Contains(msg, "pairs.csv:2"));
  EXPECT_TRUE(Contains(msg, "model1"));
  msg = error_of([&] {
    parse_alnair_clustering_features("ID,MGUP,MGMAP,MGTSAMP\n1,20,30,40\n2,20,130,40\n", "f.csv");
  });
  EXPECT_TRUE(Contains(msg, "f.csv:3"));
  EXPECT_TRUE(Contains(msg, "MGMAP"));
  const std::vector<AlnairProfile> profiles = {{"MobileNet", 32, {40, 50, 20}}};
  msg = error_of([&] {
    InterferenceData s;
    parse_seed_pairs(
        "job_a,job_b,cluster_a,cluster_b,jct_a_s,jct_b_s,ind_slowdown_a_pct,ind_slowdown_b_pct,"
        "packing_saving_pct\n"
        "MobileNet on X (BS=32 Epoch=1),Mystery on Y (BS=8 Epoch=1),0,1,10,20,5,5,30\n",
        "seed.csv", profiles, s);
  });
  EXPECT_TRUE(Contains(msg, "seed.csv:2"));
  EXPECT_TRUE(Contains(msg, "job_b"));
}

TEST(InterferenceData, SeedJobsTakeProfileFeaturesInterpolatedInBatchSize) {
  const std::vector<AlnairProfile> profiles = {{"Nasnet_Mobile", 32, {40, 20, 10}},
                                               {"Nasnet_Mobile", 128, {80, 40, 30}}};
  InterferenceData d;
  parse_seed_pairs(
      "job_a,job_b,jct_a_s,jct_b_s,ind_slowdown_a_pct,ind_slowdown_b_pct,packing_saving_pct\n"
      "NasnetMobile on G (BS=80 Epoch=5),NasnetMobile on G (BS=1024 Epoch=5),110,200,10,0,40\n",
      "seed.csv", profiles, d);
  ASSERT_EQ(d.jobs.size(), 2u);
  EXPECT_DOUBLE_EQ(d.jobs[0].features.gpu_util, 60);
  EXPECT_DOUBLE_EQ(d.jobs[1].features.gpu_util, 80);
  EXPECT_NEAR(d.jobs[0].alone_seconds, 100, 1e-9);
  EXPECT_NEAR(d.pairs[0].speed_a, 1 / 1.1, 1e-12);
  EXPECT_DOUBLE_EQ(d.pairs[0].pacsav, 0.4);
}

// --- the CLI on a generated data directory ---

using testing::CmdResult;
CmdResult run(const std::string& args) {
  return testing::run_tessera(args);
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

fs::path data_dir() {
  const fs::path dir = fs::temp_directory_path() / ("tessera-coloc-" + std::to_string(getpid()));
  fs::create_directories(dir / "interference");
  std::ofstream(dir / "interference/lucid_single_data.csv") << kSingle;
  std::ofstream(dir / "interference/lucid_colocate_info.csv") << kPairs;
  std::ofstream f(dir / "interference/alnair_clustering_features.csv");
  f << "ID,Model,Dataset,Batch Size,MGUP,MGMAP,MGTSAMP\n";
  for (int i = 0; i < 10; ++i) {
    f << i << ",1,1,32," << (i < 5 ? 15 + i : 85 + i) << ",30,10\n";
  }
  f.close();
  std::ofstream(dir / "interference/alnair_profiles.csv") << "ID,Model,BS,MGUP,MaGTSAMP,MGMAP\n"
                                                             "1,A,32,20,10,30\n";
  return dir;
}

TEST(ColocateCli, WritesTheJsonAndIsDeterministic) {
  const fs::path dir = data_dir();
  const std::string args = "colocate --quiet --data-dir " + dir.string() +
                           " --sources lucid --seeds 2 --jobs 40 --gpus 2 --interarrival 5";
  const fs::path a = dir / "a.json", b = dir / "b.json";
  const CmdResult r = run(args + " --json " + a.string());
  ASSERT_EQ(r.status, 0) << r.output;
  ASSERT_EQ(run(args + " --json " + b.string()).status, 0);
  EXPECT_EQ(slurp(a), slurp(b));
  const auto doc = nlohmann::json::parse(slurp(a));
  EXPECT_EQ(doc["knowledge_base"]["k"], 2);
  ASSERT_TRUE(doc["policies"].is_array());
  EXPECT_EQ(doc["policies"].size(), standard_colocation_policies(0.1).size());
  for (const char* k : {"indsd_lower_vs_fcfs", "indsd_lower_vs_random",
                        "indsd_lower_with_epsilon_vs_fcfs", "pacsav_higher_vs_fcfs",
                        "pacsav_higher_vs_random", "pacsav_higher_memory_packing_vs_fcfs"}) {
    EXPECT_TRUE(doc["improvements"].contains(k)) << k;
  }
  for (const char* k : {"dur:indsd_lower_vs_fcfs", "dur:indsd_lower_with_epsilon_vs_fcfs",
                        "dir:indsd_lower_with_epsilon_vs_fcfs", "dur:pacsav_higher_vs_fcfs",
                        "dur:pacsav_higher_memory_packing_vs_fcfs", "pairs:pacsav_higher_vs_fcfs",
                        "pairs:dur:pacsav_higher_vs_random"}) {
    EXPECT_TRUE(doc["improvements"].contains(k)) << k;
  }
  std::vector<std::string> names;
  for (const auto& p : doc["policies"]) {
    names.push_back(p["name"].get<std::string>());
    EXPECT_TRUE(p.contains("pacsav_pairs_pct"));
  }
  for (const char* n : {"max-pacsav-dur", "max-pacsav-dur-mem", "max-pacsav-dur-pair",
                        "min-indsd-dur", "min-indsd-dur-eps", "min-indsd-eps-dir"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  }
  EXPECT_DOUBLE_EQ(doc["options"]["estimate_error"].get<double>(), 0.3);
  // The recommender avoids the heavy-heavy pair that arrival order makes.
  EXPECT_GT(doc["improvements"]["indsd_lower_vs_fcfs"]["ours_pp"].get<double>(), 0);
  // Another estimate error is written, and exact estimates are deterministic too.
  const fs::path c = dir / "c.json", d = dir / "d.json";
  ASSERT_EQ(run(args + " --estimate-error 0 --json " + c.string()).status, 0);
  ASSERT_EQ(run(args + " --estimate-error 0 --json " + d.string()).status, 0);
  EXPECT_EQ(slurp(c), slurp(d));
  EXPECT_DOUBLE_EQ(nlohmann::json::parse(slurp(c))["options"]["estimate_error"].get<double>(), 0);
}

TEST(ColocateCli, ReportsBadInputAndUnknownPolicies) {
  const fs::path dir = data_dir();
  std::ofstream(dir / "interference/lucid_single_data.csv")
      << "model,dataset,batchsize,amp,speed,gpu_util,gmem_util,gmem\nX,D,32,0,1,2,3\n";
  CmdResult r = run("colocate --quiet --data-dir " + dir.string() + " --sources lucid");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("lucid_single_data.csv:2"), std::string::npos) << r.output;
  r = run("colocate --quiet --policy nope --data-dir " + dir.string());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("unknown policy 'nope'"), std::string::npos) << r.output;
  r = run("colocate --quiet --estimate-error -1 --data-dir " + dir.string());
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("--estimate-error"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace tessera
