// `tessera serve` against what a hostile tenant sends (issue 14): each test reproduces a
// finding against the real binary and checks the server answers it and stays up.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <algorithm>
#include <chrono>

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "cli_util.h"
#include "model/json_depth.h"
#include "service_test_util.h"

namespace tessera {
namespace {

using testing::create_tenant;
using testing::eventually;
using testing::job_in;
using testing::json_of;
using testing::kAdminToken;
using testing::ServerProcess;
using testing::submit;
using testing::TempDir;

// Resident memory of a process, in MiB (VmRSS of /proc/PID/status).
int64_t rss_mib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string key;
  int64_t kib = 0;
  while (in >> key) {
    if (key == "VmRSS:") {
      in >> kib;
      break;
    }
  }
  return kib / 1024;
}

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

// Findings 5 and 15: a job replaced its log with a FIFO (64 log requests then blocked every
// worker forever) or with a symbolic link (the server served /etc/shadow). A hard link and a
// linked attempt directory are the same attack by other means.
TEST(ServeHardening, ALogAJobReplacedIsRefusedAndNeverBlocksTheServer) {
  TempDir dir("logs");
  const std::string secret = dir.file("secret");
  std::ofstream(secret) << "the-other-tenants-secret\n";
  std::filesystem::create_directories(dir.file("decoy"));
  std::ofstream(dir.file("decoy/rank-0.log")) << "the-other-tenants-secret\n";
  ServerProcess server(dir.str(), {"--virtual-gpus", "4"});
  ASSERT_TRUE(server.up()) << server.log();
  ApiClient admin = server.client(kAdminToken);
  const std::string token = create_tenant(admin, "team-a");
  ApiClient a = server.client(token);
  // Each job works in its attempt directory, where its log lies, then idles.
  const std::vector<std::pair<std::string, std::string>> attacks = {
      {"fifo", "rm rank-0.log; mkfifo rank-0.log"},
      {"symlink", "rm rank-0.log; ln -s " + secret + " rank-0.log"},
      {"hardlink", "rm rank-0.log; ln " + secret + " rank-0.log"},
      {"linked-dir", "mv ../1 ../1.moved && ln -s " + dir.file("decoy") + " ../1"},
  };
  std::vector<int64_t> ids;
  for (const auto& [name, script] : attacks) {
    ids.push_back(submit(a, "name: " + name + "\ncommand: [\"sh\", \"-c\", \"" + script +
                                "; touch done; sleep 60\"]\n"));
  }
  const std::string jobs = dir.file("tessera.db.jobs/jobs/");
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string done = jobs + std::to_string(ids[i]) +
                             (attacks[i].first == "linked-dir" ? "/1.moved/done" : "/1/done");
    ASSERT_TRUE(eventually([&] { return std::filesystem::exists(done); }, 10)) << attacks[i].first;
  }
  // 80 requests at once, more than the server has workers: each is refused, none waits.
  std::vector<std::future<HttpResult>> reads;
  for (int k = 0; k < 80; ++k) {
    const int64_t id = ids[static_cast<size_t>(k) % ids.size()];
    reads.push_back(std::async(std::launch::async, [&server, &token, id] {
      ApiClient c = server.client(token);
      return c.get("/v1/jobs/" + std::to_string(id) + "/logs?tail_bytes=0");
    }));
  }
  for (size_t k = 0; k < reads.size(); ++k) {
    const HttpResult r = reads[k].get();
    EXPECT_EQ(r.status, 403) << attacks[k % attacks.size()].first << ": " << r.body << r.error;
    EXPECT_EQ(r.body.find("secret"), std::string::npos) << r.body;
  }
  EXPECT_EQ(admin.get("/healthz").status, 200);
}

// Finding 7: `logs?tail_bytes=0` read a whole 200 MB log into memory; six in parallel took
// the server to 2.3 GB. Logs are streamed from the file in pieces.
TEST(ServeHardening, AHugeLogIsStreamedWithoutHoldingItInMemory) {
  TempDir dir("biglog");
  ServerProcess server(dir.str(), {"--virtual-gpus", "1"});
  ASSERT_TRUE(server.up()) << server.log();
  ApiClient admin = server.client(kAdminToken);
  const std::string token = create_tenant(admin, "team-a");
  ApiClient a = server.client(token);
  constexpr int64_t kLogBytes = 96LL << 20;
  const int64_t id = submit(a,
                            "name: chatty\ncommand: [\"sh\", \"-c\", \"yes 0123456789abcdef"
                            " | head -c " +
                                std::to_string(kLogBytes) + "\"]\n");
  ASSERT_TRUE(eventually([&] { return job_in(a, id, "succeeded"); }, 30));
  const int64_t before = rss_mib(server.pid());
  std::vector<std::future<HttpResult>> reads;
  for (int k = 0; k < 4; ++k) {
    reads.push_back(std::async(std::launch::async, [&server, &token, id] {
      ApiClient c = server.client(token);
      return c.get("/v1/jobs/" + std::to_string(id) + "/logs?tail_bytes=0");
    }));
  }
  // Sampled while the four responses are in flight and after.
  int64_t peak = before;
  while (!std::all_of(reads.begin(), reads.end(), [](auto& f) {
    return f.wait_for(std::chrono::milliseconds(0)) == std::future_status::ready;
  })) {
    peak = std::max(peak, rss_mib(server.pid()));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (auto& f : reads) {
    const HttpResult r = f.get();
    ASSERT_EQ(r.status, 200) << r.error;
    ASSERT_EQ(static_cast<int64_t>(r.body.size()), kLogBytes);
    EXPECT_EQ(r.body.substr(0, 17), "0123456789abcdef\n");
  }
  // Whole copies would be 4 x 96 MiB; pieces are 64 KiB each.
  EXPECT_LT(peak - before, 64) << "RSS " << before << " MiB -> peak " << peak << " MiB";
  // The tail is still the tail.
  const HttpResult tail = a.get("/v1/jobs/" + std::to_string(id) + "/logs?tail_bytes=17");
  EXPECT_EQ(tail.body.size(), 17u);
}

}  // namespace
}  // namespace tessera
