// `tessera user` against a real `tessera serve`: a tenant's people, each with their own token,
// as the docs show them (add, list, a member refused a colleague's job, remove).
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "cli_util.h"
#include "service_test_util.h"

namespace tessera {
namespace {

using testing::kAdminToken;
using testing::last_line;
using testing::run_tessera_env;
using testing::ServerProcess;
using testing::TempDir;

TEST(CliUsers, ATenantsPeopleHaveTheirOwnTokensAndAMemberActsOnlyOnTheirOwnJobs) {
  TempDir dir("cli-users");
  ServerProcess server(dir.str(), {"--virtual-gpus", "2"});
  ASSERT_TRUE(server.up()) << server.log();
  const auto env = [&](const std::string& token) {
    return "TESSERA_ADDR=" + server.addr() + " TESSERA_TOKEN=" + token + " ";
  };
  const auto tenant = run_tessera_env(env(kAdminToken), "tenant create team-a");
  ASSERT_EQ(tenant.status, 0) << tenant.output;
  const std::string team = last_line(tenant.output);
  // The tenant's own token manages its people.
  const auto alice = run_tessera_env(env(team), "user add team-a alice");
  ASSERT_EQ(alice.status, 0) << alice.output;
  const auto bob = run_tessera_env(env(team), "user add team-a bob");
  const auto lead = run_tessera_env(env(team), "user add team-a lead --role admin");
  ASSERT_EQ(lead.status, 0) << lead.output;
  const auto list = run_tessera_env(env(last_line(lead.output)), "user list team-a");
  ASSERT_EQ(list.status, 0) << list.output;
  EXPECT_NE(list.output.find("USER"), std::string::npos) << list.output;
  for (const char* row : {"alice@team-a", "bob@team-a", "lead@team-a"}) {
    EXPECT_NE(list.output.find(row), std::string::npos) << list.output;
  }
  EXPECT_NE(list.output.find("admin"), std::string::npos) << list.output;

  const std::string spec = dir.str() + "/job.yaml";
  { std::ofstream(spec) << "name: mine\nresources: {gpus: 1}\ncommand: [sleep, \"30\"]\n"; }
  const auto submitted = run_tessera_env(env(last_line(alice.output)), "submit " + spec);
  ASSERT_EQ(submitted.status, 0) << submitted.output;
  const std::string id = last_line(submitted.output);
  const auto page = run_tessera_env(env(last_line(bob.output)), "job " + id);
  EXPECT_NE(page.output.find("User:           alice@team-a"), std::string::npos) << page.output;
  const auto refused = run_tessera_env(env(last_line(bob.output)), "cancel " + id);
  EXPECT_NE(refused.status, 0);
  EXPECT_NE(refused.output.find("was submitted by alice@team-a"), std::string::npos)
      << refused.output;
  const auto cancelled = run_tessera_env(env(last_line(lead.output)), "cancel " + id);
  EXPECT_EQ(cancelled.status, 0) << cancelled.output;
  const auto audit = run_tessera_env(env(kAdminToken), "audit --actor lead@team-a");
  EXPECT_NE(audit.output.find("lead@team-a"), std::string::npos) << audit.output;

  // A member manages nobody; a removed user's token stops working.
  EXPECT_NE(run_tessera_env(env(last_line(bob.output)), "user add team-a eve").status, 0);
  EXPECT_EQ(run_tessera_env(env(last_line(lead.output)), "user remove team-a bob").status, 0);
  const auto gone = run_tessera_env(env(last_line(bob.output)), "jobs");
  EXPECT_NE(gone.status, 0);
  EXPECT_NE(gone.output.find("unknown bearer token"), std::string::npos) << gone.output;
}

}  // namespace
}  // namespace tessera
