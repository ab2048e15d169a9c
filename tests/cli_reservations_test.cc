// `tessera reservation` against a real `tessera serve`, as docs/service.md shows it: the admin
// reserves GPUs for a tenant, `tessera nodes` marks them, another tenant's job that needs them
// waits with ReservedGpus, and a deleted reservation gives them back.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "cli_util.h"
#include "service_test_util.h"

namespace tessera {
namespace {

using testing::kAdminToken;
using testing::last_line;
using testing::run_tessera_env;
using testing::ServerProcess;
using testing::TempDir;

TEST(CliReservations, TheAdminReservesGpusAndAnotherTenantsJobWaitsForThem) {
  TempDir dir("cli-reservations");
  ServerProcess server(dir.str(), {"--virtual-gpus", "8"});
  ASSERT_TRUE(server.up()) << server.log();
  const auto env = [&](const std::string& token) {
    return "TESSERA_ADDR=" + server.addr() + " TESSERA_TOKEN=" + token + " ";
  };
  const std::string admin = env(kAdminToken);
  ASSERT_EQ(run_tessera_env(admin, "tenant create nlp").status, 0);
  const auto cv = run_tessera_env(admin, "tenant create cv");
  ASSERT_EQ(cv.status, 0) << cv.output;

  const auto made =
      run_tessera_env(admin, "reservation create deadline --tenant nlp --gpus 4 --duration 4h");
  ASSERT_EQ(made.status, 0) << made.output;
  EXPECT_NE(made.output.find("reservation deadline: 4 GPUs for nlp"), std::string::npos)
      << made.output;
  const auto list = run_tessera_env(admin, "reservation list");
  EXPECT_NE(list.output.find("deadline         nlp                  active"), std::string::npos)
      << list.output;
  const auto nodes = run_tessera_env(admin, "nodes");
  EXPECT_NE(nodes.output.find("RESERVED"), std::string::npos) << nodes.output;
  size_t marked = 0;
  for (size_t at = nodes.output.find("deadline"); at != std::string::npos;
       at = nodes.output.find("deadline", at + 1)) {
    ++marked;
  }
  EXPECT_EQ(marked, 4u) << nodes.output;
  // A tenant may not reserve, and bad times are refused before anything is sent.
  const auto refused = run_tessera_env(
      env(last_line(cv.output)), "reservation create mine --tenant cv --gpus 1 --duration 1h");
  EXPECT_NE(refused.status, 0);
  EXPECT_NE(refused.output.find("only the admin reserves GPUs"), std::string::npos)
      << refused.output;
  const auto bad_time = run_tessera_env(
      admin, "reservation create x --tenant nlp --gpus 1 --start tomorrow --duration 1h");
  EXPECT_NE(bad_time.status, 0);
  EXPECT_NE(bad_time.output.find("--start 'tomorrow': expected now, +DURATION"), std::string::npos)
      << bad_time.output;

  const std::string spec = dir.str() + "/big.yaml";
  { std::ofstream(spec) << "name: big\nresources: {gpus: 6}\ncommand: [sleep, \"60\"]\n"; }
  const auto submitted = run_tessera_env(env(last_line(cv.output)), "submit " + spec);
  ASSERT_EQ(submitted.status, 0) << submitted.output;
  const std::string id = last_line(submitted.output);
  std::string page;
  for (int i = 0; i < 100 && page.find("ReservedGpus") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    page = run_tessera_env(admin, "job " + id).output;
  }
  EXPECT_NE(page.find("(reservation deadline)"), std::string::npos) << page;

  const auto deleted = run_tessera_env(admin, "reservation delete deadline");
  EXPECT_EQ(deleted.status, 0) << deleted.output;
  for (int i = 0; i < 100 && page.find("State:          running") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    page = run_tessera_env(admin, "job " + id).output;
  }
  EXPECT_NE(page.find("State:          running"), std::string::npos) << page;
  run_tessera_env(admin, "cancel --force " + id);
}

}  // namespace
}  // namespace tessera
