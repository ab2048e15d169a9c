// `tessera serve` against what a hostile tenant sends (issue 14): each test reproduces a
// finding against the real binary and checks the server answers it and stays up.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "cli_util.h"
#include "model/json_depth.h"
#include "service_test_util.h"

namespace tessera {
namespace {

using testing::json_of;
using testing::kAdminToken;
using testing::ServerProcess;
using testing::TempDir;

TEST(JsonDepth, CountsBracketsOutsideStringsOnly) {
  EXPECT_FALSE(json_nesting_exceeds(R"({"a": [1, {"b": []}]})", 4));
  EXPECT_TRUE(json_nesting_exceeds(R"({"a": [1, {"b": []}]})", 3));
  // Brackets in strings, escaped quotes included, are text.
  EXPECT_FALSE(json_nesting_exceeds(R"({"a": "[[[[{{{{\"[[[["})", 1));
  EXPECT_TRUE(json_nesting_exceeds(std::string(100000, '[') + std::string(100000, ']')));
  EXPECT_FALSE(json_nesting_exceeds(std::string(64, '[') + std::string(64, ']')));
  EXPECT_FALSE(json_nesting_exceeds("not json ]]]] at all"));
}

// Finding 1: a 200 KB body nested 100,000 levels deep killed the server (SIGSEGV).
TEST(ServeHardening, ADeeplyNestedBodyIsRefusedAndTheServerStaysUp) {
  TempDir dir("deep");
  ServerProcess server(dir.str(), {"--virtual-gpus", "1"});
  ASSERT_TRUE(server.up()) << server.log();
  ApiClient admin = server.client(kAdminToken);
  const HttpResult t =
      admin.post("/v1/tenants", nlohmann::json{{"name", "team-a"}}.dump(), "application/json");
  ASSERT_EQ(t.status, 201) << t.body;
  ApiClient tenant = server.client(json_of(t).value("token", ""));
  const std::string arrays = std::string(100000, '[') + std::string(100000, ']');
  const std::string objects = [] {
    std::string s;
    for (int i = 0; i < 100000; ++i) s += "{\"a\":";
    return s + "1" + std::string(100000, '}');
  }();
  for (const std::string* body : {&arrays, &objects}) {
    for (const char* type : {"application/json", "application/yaml"}) {
      const HttpResult r = tenant.post("/v1/jobs", *body, type);
      EXPECT_EQ(r.status, 400) << type << ": " << r.body.substr(0, 300) << r.error;
      EXPECT_NE(r.body.find("levels deep"), std::string::npos) << r.body.substr(0, 300);
    }
  }
  const HttpResult r = admin.post("/v1/tenants", arrays, "application/json");
  EXPECT_EQ(r.status, 400) << r.body.substr(0, 300);
  EXPECT_EQ(admin.get("/healthz").status, 200) << server.log();
}

// Runs `tessera serve ARGS` (with the test admin token and one virtual GPU) and expects it to
// refuse to start: it must exit non-zero on its own (not be stopped by the 10 s timeout).
// Returns what it logged.
std::string refused_start(const std::string& dir, const std::string& args) {
  const std::string log = dir + "/second.log";
  const std::string cmd = std::string("timeout 10 ") + TESSERA_BINARY + " serve " + args +
                          " --admin-token " + kAdminToken + " --virtual-gpus 1 > " + log + " 2>&1";
  const int rc = std::system(cmd.c_str());
  std::ifstream in(log);
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) != 0 && WEXITSTATUS(rc) != 124)
      << "rc " << rc << ": " << text;
  return text;
}

// Finding 10: a second server on an address in use bound it too (SO_REUSEPORT), and the two
// split the requests between them.
TEST(ServeHardening, ASecondServerOnAnAddressInUseRefusesToStart) {
  TempDir dir("addr");
  ServerProcess first(dir.str(), {"--virtual-gpus", "1"});
  ASSERT_TRUE(first.up()) << first.log();
  const std::string text =
      refused_start(dir.str(), "--listen " + first.addr() + " --db " + dir.str() + "/other.db");
  EXPECT_NE(text.find("address in use"), std::string::npos) << text;
  EXPECT_EQ(first.client(kAdminToken).get("/healthz").status, 200);
}

// Finding 9: two servers on the same database both ran, and a job ran twice.
TEST(ServeHardening, ASecondServerOnTheSameDatabaseRefusesToStart) {
  TempDir dir("db");
  ServerProcess first(dir.str(), {"--virtual-gpus", "1"});
  ASSERT_TRUE(first.up()) << first.log();
  const std::string text =
      refused_start(dir.str(), "--listen 127.0.0.1:0 --db " + dir.str() + "/tessera.db");
  EXPECT_NE(text.find("in use by another process"), std::string::npos) << text;
  EXPECT_EQ(first.client(kAdminToken).get("/healthz").status, 200);
  // A server killed outright leaves no lock behind: the next one starts.
  first.kill(SIGKILL);
  ServerProcess next(dir.str(), {"--virtual-gpus", "1"});
  EXPECT_TRUE(next.up()) << next.log();
}

}  // namespace
}  // namespace tessera
