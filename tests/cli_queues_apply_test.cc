// `tessera queues apply` and SIGHUP against a real `tessera serve`: the running tree changes
// without a restart, a bad file is refused naming its line, and the running tree stays.
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <string>

#include "cli_util.h"
#include "service_test_util.h"

namespace tessera {
namespace {

using testing::eventually;
using testing::kAdminToken;
using testing::run_tessera_env;
using testing::ServerProcess;
using testing::TempDir;

TEST(CliQueuesApply, TheTreeChangesWithoutARestartByCommandOrSighup) {
  TempDir dir("queues-apply");
  const std::string file = dir.str() + "/queues.yaml";
  std::ofstream(file) << "queues:\n  - name: team-a\n";
  ServerProcess server(dir.str(), {"--virtual-gpus", "2", "--queues", file});
  ASSERT_TRUE(server.up()) << server.log();
  const std::string env = "TESSERA_ADDR=" + server.addr() + " TESSERA_TOKEN=" + kAdminToken + " ";

  const std::string next = dir.str() + "/next.yaml";
  std::ofstream(next) << "queues:\n  - name: team-a\n  - name: team-b\n    weight: 2\n";
  const auto dry = run_tessera_env(env, "queues apply --dry-run " + next);
  EXPECT_EQ(dry.status, 0) << dry.output;
  EXPECT_NE(dry.output.find("valid, not applied (2 queues; added team-b)"), std::string::npos)
      << dry.output;
  EXPECT_EQ(run_tessera_env(env, "queues").output.find("team-b"), std::string::npos);
  const auto applied = run_tessera_env(env, "queues apply " + next);
  EXPECT_EQ(applied.status, 0) << applied.output;
  EXPECT_NE(applied.output.find("applied (2 queues; added team-b)"), std::string::npos)
      << applied.output;
  EXPECT_NE(run_tessera_env(env, "queues").output.find("team-b"), std::string::npos);

  const std::string broken = dir.str() + "/broken.yaml";
  std::ofstream(broken) << "queues:\n  - name: team-a\n    weight: [\n";
  const auto refused = run_tessera_env(env, "queues apply " + broken);
  EXPECT_NE(refused.status, 0);
  EXPECT_NE(refused.output.find("broken.yaml:"), std::string::npos) << refused.output;
  EXPECT_NE(refused.output.find("^"), std::string::npos) << refused.output;  // the caret

  // SIGHUP: the --queues file, edited, is read again.
  std::ofstream(file) << "queues:\n  - name: team-a\n  - name: team-b\n  - name: team-c\n";
  ASSERT_EQ(::kill(server.pid(), SIGHUP), 0);
  EXPECT_TRUE(eventually(
      [&] { return run_tessera_env(env, "queues").output.find("team-c") != std::string::npos; },
      10))
      << server.log();
  EXPECT_NE(server.log().find("SIGHUP: queue tree " + file + " applied (3 queues"),
            std::string::npos)
      << server.log();
  const auto audit = run_tessera_env(env, "audit");
  EXPECT_NE(audit.output.find("queue tree (3 queues)"), std::string::npos) << audit.output;
}

}  // namespace
}  // namespace tessera
