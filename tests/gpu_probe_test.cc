// GPU discovery and black-box profiling through nvidia-smi: parsing what the driver prints,
// product names to GPU types, and `tessera gpus` / `tessera profile` end to end against a
// stand-in nvidia-smi (CI has no GPU; the real one is checked on a GPU machine, see the note
// in docs/colocation.md).
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "backend/nvidia_smi.h"
#include "backend/process_profiler.h"
#include "cli_util.h"
#include "input_error_util.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

// The first line was recorded on an H100 machine (scripts/gpu_check.sh); the second is the same
// GPU under load.
constexpr const char* kTwoGpus =
    "0, GPU-cfe81ac7-0291-a1a7-2d9e-3a88d9e3eb20, NVIDIA H100 80GB HBM3, 81559, 0, 0, 0\n"
    "1, GPU-8a1c2f3e-aaaa-bbbb-cccc-000000000001, NVIDIA H100 80GB HBM3, 81559, 40779, 97, 41\n";

TEST(NvidiaSmi, ParsesOneLinePerGpu) {
  const auto gpus = parse_nvidia_smi_csv(kTwoGpus, "nvidia-smi");
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_EQ(gpus[1].index, 1);
  EXPECT_EQ(gpus[1].name, "NVIDIA H100 80GB HBM3");
  EXPECT_DOUBLE_EQ(gpus[1].memory_total_mib, 81559);
  EXPECT_DOUBLE_EQ(gpus[1].util_gpu_pct, 97);
  EXPECT_DOUBLE_EQ(gpus[1].util_mem_pct, 41);
  EXPECT_NEAR(gpus[1].memory_used_pct(), 50.0, 0.01);
}

TEST(NvidiaSmi, CountersTheDriverDoesNotReportAreUnknown) {
  const auto gpus = parse_nvidia_smi_csv(
      "0, MIG-1, NVIDIA A100-SXM4-40GB, 40536, 9, [N/A], [Not Supported]\n", "smi");
  ASSERT_EQ(gpus.size(), 1u);
  EXPECT_EQ(gpus[0].util_gpu_pct, -1);
  EXPECT_EQ(gpus[0].util_mem_pct, -1);
  EXPECT_GT(gpus[0].memory_used_pct(), 0);
}

// The query with power.draw and power.limit (the same H100 machine's format); older outputs,
// without them, still parse (above) with the power unknown.
TEST(NvidiaSmi, ReadsThePowerDrawAndLimitWhenQueried) {
  const auto gpus = parse_nvidia_smi_csv(
      "0, GPU-cfe81ac7-0291-a1a7-2d9e-3a88d9e3eb20, NVIDIA H100 80GB HBM3, 81559, 0, 0, 0, "
      "71.52, 700.00\n"
      "1, GPU-8a1c2f3e-aaaa-bbbb-cccc-000000000001, NVIDIA H100 80GB HBM3, 81559, 40779, 97, 41, "
      "[N/A], 500.00\n",
      "nvidia-smi");
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_DOUBLE_EQ(gpus[0].power_draw_w, 71.52);
  EXPECT_DOUBLE_EQ(gpus[0].power_limit_w, 700);
  EXPECT_EQ(gpus[1].power_draw_w, -1);
  EXPECT_DOUBLE_EQ(gpus[1].power_limit_w, 500);
  const auto old = parse_nvidia_smi_csv(kTwoGpus, "nvidia-smi");
  EXPECT_EQ(old[0].power_draw_w, -1);
  EXPECT_EQ(old[0].power_limit_w, -1);
  const std::string e = testing::error_of(
      [&] { parse_nvidia_smi_csv("0, GPU-x, Tesla T4, 15360, 0, 3, 1, hot, 70\n", "smi"); });
  EXPECT_TRUE(testing::Contains(e, "smi:1: field power.draw"));
}

// The full query ends with temperature.gpu; the nine-field query leaves it unknown.
TEST(NvidiaSmi, ReadsTheTemperatureWhenQueried) {
  const auto gpus = parse_nvidia_smi_csv(
      "0, GPU-a, NVIDIA H100 80GB HBM3, 81559, 0, 0, 0, 71.52, 700.00, 33\n"
      "1, GPU-b, NVIDIA H100 80GB HBM3, 81559, 40779, 97, 41, 512.00, 700.00, [N/A]\n",
      "nvidia-smi");
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_DOUBLE_EQ(gpus[0].temperature_c, 33);
  EXPECT_DOUBLE_EQ(gpus[0].power_draw_w, 71.52);
  EXPECT_EQ(gpus[1].temperature_c, -1);
  EXPECT_DOUBLE_EQ(gpus[1].power_draw_w, 512);
  EXPECT_EQ(
      parse_nvidia_smi_csv("0, GPU-a, Tesla T4, 15360, 0, 3, 1, 20, 70\n", "smi")[0].temperature_c,
      -1);
  const std::string e = testing::error_of(
      [&] { parse_nvidia_smi_csv("0, GPU-x, Tesla T4, 15360, 0, 3, 1, 20, 70, warm\n", "smi"); });
  EXPECT_TRUE(testing::Contains(e, "smi:1: field temperature.gpu")) << e;
}

TEST(NvidiaSmi, MalformedOutputNamesLineAndField) {
  const std::string bad = std::string(kTwoGpus) + "2, GPU-x, Tesla T4, 15360, lots, 3, 1\n";
  const std::string e = testing::error_of([&] { parse_nvidia_smi_csv(bad, "nvidia-smi"); });
  for (const char* part : {"nvidia-smi:3", "memory.used", "lots"}) {
    EXPECT_TRUE(testing::Contains(e, part));
  }
  const std::string short_line =
      testing::error_of([&] { parse_nvidia_smi_csv("0, GPU-x, Tesla T4\n", "smi"); });
  EXPECT_TRUE(testing::Contains(short_line, "smi:1"));
  EXPECT_TRUE(testing::Contains(short_line, "expected 7, 9 or 10 fields"));
}

TEST(NvidiaSmi, ProductNamesMapToGpuTypes) {
  EXPECT_EQ(gpu_type_name("NVIDIA H100 80GB HBM3"), "H100");
  EXPECT_EQ(gpu_type_name("NVIDIA H200"), "H200");
  EXPECT_EQ(gpu_type_name("NVIDIA A100-SXM4-80GB"), "A100-80G");
  EXPECT_EQ(gpu_type_name("NVIDIA A100-PCIE-40GB"), "A100-40G");
  EXPECT_EQ(gpu_type_name("Tesla V100-SXM2-32GB"), "V100-32G");
  EXPECT_EQ(gpu_type_name("Tesla V100-PCIE-16GB"), "V100");
  EXPECT_EQ(gpu_type_name("Tesla T4"), "T4");
  EXPECT_EQ(gpu_type_name("NVIDIA A10G"), "A10");
  EXPECT_EQ(gpu_type_name("Tesla K80"), "K80");
  EXPECT_EQ(gpu_type_name("NVIDIA RTX 6000 Ada Generation"), "RTX 6000 Ada Generation");
}

// A stand-in nvidia-smi: GPU 0 idle, GPU 1 printing the next of `rows` ("memory.used,
// utilization.gpu, utilization.memory") on each call, then repeating the last.
fs::path fake_smi(const std::string& name, const std::vector<std::string>& rows) {
  const fs::path dir = fs::temp_directory_path() / ("tessera-smi-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const fs::path script = dir / name;
  const fs::path counter = dir / (name + ".n");
  fs::remove(counter);
  std::ofstream s(script);
  s << "#!/bin/sh\n"
    << "n=$(cat '" << counter.string() << "' 2>/dev/null || echo 0)\n"
    << "echo $((n + 1)) > '" << counter.string() << "'\n"
    << "echo '0, GPU-0, NVIDIA H100 80GB HBM3, 80000, 0, 0, 0'\n"
    << "case $n in\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    s << (i + 1 == rows.size() ? "  *)" : "  " + std::to_string(i) + ")")
      << " echo '1, GPU-1, NVIDIA H100 80GB HBM3, 80000, " << rows[i] << "' ;;\n";
  }
  s << "esac\n";
  s.close();
  fs::permissions(script, fs::perms::owner_all);
  return script;
}

TEST(Profiler, KeepsThePeaksOfTheJobsGpuOverTheWindow) {
  // memory.used (of 80000 MiB), GPU util, memory util
  const fs::path smi =
      fake_smi("smi-peaks", {"8000, 10, 5", "40000, 95, 30", "20000, 60, 55", "4000, 20, 10"});
  ProfileRunOptions opt;
  opt.command = {"sleep", "30"};
  opt.gpu = 1;
  opt.window_seconds = 2;  // long enough for the four rows even on a loaded machine
  opt.interval_seconds = 0.05;
  opt.nvidia_smi = smi.string();
  const ProfileRunResult r = profile_command(opt);
  EXPECT_TRUE(r.complete);
  EXPECT_FALSE(r.job_exited);  // stopped at the end of the window
  EXPECT_GE(r.samples.size(), 4u);
  EXPECT_DOUBLE_EQ(r.features.gpu_util, 95);
  EXPECT_DOUBLE_EQ(r.features.mem_alloc, 50);
  EXPECT_DOUBLE_EQ(r.features.mem_time, 55);
  EXPECT_EQ(r.gpu_name, "NVIDIA H100 80GB HBM3");
}

TEST(Profiler, AJobThatEndsEarlyGivesAPartialProfileAndItsStatus) {
  const fs::path smi = fake_smi("smi-early", {"8000, 50, 5"});
  ProfileRunOptions opt;
  opt.command = {"sh", "-c", "exit 3"};
  opt.window_seconds = 60;
  opt.interval_seconds = 0.05;
  opt.gpu = 1;
  opt.nvidia_smi = smi.string();
  const ProfileRunResult r = profile_command(opt);
  EXPECT_FALSE(r.complete);
  EXPECT_TRUE(r.job_exited);
  EXPECT_EQ(r.exit_status, 3);
}

TEST(Profiler, AMissingGpuOrDriverIsAClearError) {
  const fs::path smi = fake_smi("smi-missing", {"8000, 50, 5"});
  ProfileRunOptions opt;
  opt.command = {"sleep", "30"};
  opt.gpu = 7;
  opt.window_seconds = 1;
  opt.nvidia_smi = smi.string();
  auto message_of = [&] {
    try {
      profile_command(opt);
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    ADD_FAILURE() << "expected an error";
    return std::string();
  };
  EXPECT_TRUE(testing::Contains(message_of(), "no GPU 7"));
  opt.nvidia_smi = "/nonexistent/nvidia-smi";
  const std::string e = message_of();
  EXPECT_TRUE(testing::Contains(e, "/nonexistent/nvidia-smi"));
  EXPECT_TRUE(testing::Contains(e, "not found"));
}

std::string run_cli(const std::string& args, int& status) {
  testing::CmdResult r = testing::run_tessera(args);
  status = r.status;
  return std::move(r.output);
}

TEST(GpuCli, GpusListsTheHostsGpusAndWritesAClusterSpec) {
  const fs::path smi = fake_smi("smi-list", {"40000, 97, 41"});
  int status = 0;
  std::string out = run_cli("gpus --nvidia-smi " + smi.string(), status);
  ASSERT_EQ(status, 0) << out;
  EXPECT_NE(out.find("H100"), std::string::npos) << out;
  out = run_cli("gpus --cluster-yaml --nvidia-smi " + smi.string(), status);
  ASSERT_EQ(status, 0) << out;
  EXPECT_NE(out.find("gpus: 2, gpu_type: H100"), std::string::npos) << out;
  out = run_cli("gpus --nvidia-smi /nonexistent/nvidia-smi", status);
  EXPECT_EQ(status, 2);
  EXPECT_NE(out.find("not found"), std::string::npos) << out;
}

TEST(GpuCli, ProfileWritesTheFeaturesAsJson) {
  const fs::path smi = fake_smi("smi-cli", {"16000, 30, 12", "24000, 88, 47"});
  const fs::path json =
      fs::temp_directory_path() / ("tessera-profile-" + std::to_string(getpid()) + ".json");
  int status = 0;
  const std::string out = run_cli("profile --gpu 1 --window 1.5 --interval 0.05 --nvidia-smi " +
                                      smi.string() + " --json " + json.string() + " -- sleep 30",
                                  status);
  ASSERT_EQ(status, 0) << out;
  std::ifstream in(json);
  const auto j = nlohmann::json::parse(in);
  EXPECT_DOUBLE_EQ(j["features"]["MGUP"].get<double>(), 88);
  EXPECT_DOUBLE_EQ(j["features"]["MGMAP"].get<double>(), 30);
  EXPECT_DOUBLE_EQ(j["features"]["MGTSAMP"].get<double>(), 47);
  EXPECT_TRUE(j["complete"].get<bool>());
  // With the measured data at hand the job is placed in the knowledge base, with partners.
  if (fs::exists(fs::path(TESSERA_SHARED_DATA) / "interference")) {
    ASSERT_TRUE(j.contains("knowledge_base")) << out;
    const auto& kb = j["knowledge_base"];
    EXPECT_LT(kb["cluster"].get<int>(), kb["k"].get<int>());
    EXPECT_GE(kb["uncertainty"].get<double>(), 0);
    EXPECT_EQ(kb["partners"].size(), kb["k"].get<size_t>());
    EXPECT_NE(out.find("best partners"), std::string::npos) << out;
  }
}

}  // namespace
}  // namespace tessera
