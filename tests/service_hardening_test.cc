// `tessera serve` against what a hostile tenant sends: each test reproduces a
// finding against the real binary and checks the server answers it and stays up.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <algorithm>
#include <chrono>

#include <sys/mount.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cli_util.h"
#include "model/json_depth.h"
#include "raw_socket.h"
#include "service_test_util.h"
#include "store/sqlite_db.h"

namespace tessera {
namespace {

using testing::create_tenant;
using testing::eventually;
using testing::get_job;
using testing::job_in;
using testing::json_of;
using testing::kAdminToken;
using testing::RawSocket;
using testing::rss_mib;
using testing::ServerProcess;
using testing::submit;
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

// Findings 5 and 15: a job replaced its log with a FIFO (64 log requests then blocked every
// worker forever) or with a symbolic link (the server served /etc/shadow). A hard link and a
// linked attempt directory are the same attack by other means.
TEST(ServeHardening, ALogAJobReplacedIsRefusedAndNeverBlocksTheServer) {
  TempDir dir("logs");
  const std::string secret = dir.file("secret");
  std::ofstream(secret) << "the-other-tenants-secret\n";
  std::filesystem::create_directories(dir.file("decoy"));
  std::ofstream(dir.file("decoy/rank-0.log")) << "the-other-tenants-secret\n";
  // Jobs of the server's own uid, which can reach their logs: the reader must defend itself.
  // (Run as their tenant's uid, the jobs could not even try: see the sandbox test.)
  ServerProcess server(dir.str(), {"--virtual-gpus", "4", "--job-user", "server"});
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

// Finding 3: 70 slowloris connections, or 500 idle keep-alive connections, stopped /healthz
// answering (64 worker threads, each held by a connection; listen backlog 5).
TEST(ServeHardening, SlowAndIdleConnectionsDoNotStopTheServer) {
  TempDir dir("slowloris");
  ServerProcess server(dir.str(), {"--virtual-gpus", "1"});
  ASSERT_TRUE(server.up()) << server.log();
  ApiClient admin = server.client(kAdminToken);
  const std::string token = create_tenant(admin, "team-a");
  // From five addresses, under the per-client limit: every connection is accepted.
  std::vector<RawSocket> idle, slow;
  for (int i = 0; i < 500; ++i) {
    idle.emplace_back(server.addr(), "127.0.0." + std::to_string(2 + i % 5));
    ASSERT_TRUE(idle.back().send("GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n"));
  }
  for (RawSocket& s : idle)
    ASSERT_EQ(testing::status_of(s.receive(std::chrono::seconds(5), "ok\n")), 200);
  for (int i = 0; i < 70; ++i) {
    slow.emplace_back(server.addr(), "127.0.0." + std::to_string(2 + i % 5));
    ASSERT_TRUE(slow.back().send("GET /healthz HTTP/1.1\r\nX-Slow: "));
  }
  for (int round = 0; round < 3; ++round) {
    for (RawSocket& s : slow) s.send("a");
    EXPECT_EQ(admin.get("/healthz").status, 200);
    ApiClient a = server.client(token);
    EXPECT_EQ(a.get("/v1/jobs").status, 200);
  }
  // One client cannot take every place: past its limit it is refused, others are not.
  std::vector<RawSocket> greedy;
  for (int i = 0; i < 200; ++i) {
    greedy.emplace_back(server.addr(), "127.0.0.9");
  }
  // Counted by the server as it refuses them (the refusals themselves may still be on their
  // way to this side).
  const std::string want =
      "tessera_http_refused_total{reason=\"client_limit\"} " + std::to_string(200 - 128) + "\n";
  EXPECT_TRUE(
      eventually([&] { return admin.get("/metrics").body.find(want) != std::string::npos; }, 10))
      << admin.get("/metrics").body;

  EXPECT_EQ(admin.get("/healthz").status, 200);
}

// Finding 4: chunked bodies bypassed the 1 MiB limit (a 300 MiB anonymous body was buffered
// whole), and 212 MB of request headers were read (RSS 100 -> 820 MB).
TEST(ServeHardening, ChunkedBodiesAndEndlessHeadersAreRefusedUnread) {
  TempDir dir("chunked");
  ServerProcess server(dir.str(), {"--virtual-gpus", "1"});
  ASSERT_TRUE(server.up()) << server.log();
  ApiClient admin = server.client(kAdminToken);
  const std::string token = create_tenant(admin, "team-a");
  const int64_t before = rss_mib(server.pid());
  {
    RawSocket s(server.addr());
    const std::string chunk(1 << 20, 'x');
    std::string head = "POST /v1/jobs HTTP/1.1\r\nAuthorization: Bearer " + token +
                       "\r\nContent-Type: application/yaml\r\nTransfer-Encoding: chunked\r\n\r\n";
    s.send(head);
    for (int i = 0; i < 300; ++i) {
      if (!s.send("100000\r\n" + chunk + "\r\n")) break;  // refused: the server closed
    }
    EXPECT_EQ(testing::status_of(s.receive(std::chrono::seconds(2))), 411);
  }
  {
    RawSocket s(server.addr());
    s.send("GET /healthz HTTP/1.1\r\n");
    const std::string header = "X-Filler: " + std::string(8000, 'h') + "\r\n";
    for (int i = 0; i < 25000; ++i) {  // 200 MB
      if (!s.send(header)) break;
    }
    EXPECT_EQ(testing::status_of(s.receive(std::chrono::seconds(2))), 431);
  }
  EXPECT_LT(rss_mib(server.pid()) - before, 32);
  EXPECT_EQ(admin.get("/healthz").status, 200);
}

// Finding 13: a truncated (0-byte) database started as a new one, and new jobs took the old
// job ids and their directories: a tenant read another's old secret output.
TEST(ServeHardening, ATruncatedDatabaseBesideOldJobsRefusesToStart) {
  TempDir dir("truncated");
  {
    ServerProcess server(dir.str(), {"--virtual-gpus", "1"});
    ASSERT_TRUE(server.up()) << server.log();
    ApiClient admin = server.client(kAdminToken);
    ApiClient a = server.client(create_tenant(admin, "team-a"));
    const int64_t id = submit(a, "name: secret\ncommand: [\"sh\", \"-c\", \"echo s3cret\"]\n");
    ASSERT_TRUE(eventually([&] { return job_in(a, id, "succeeded"); }, 10));
    server.kill(SIGTERM);
  }
  std::filesystem::resize_file(dir.file("tessera.db"), 0);
  std::filesystem::remove(dir.file("tessera.db-wal"));
  std::filesystem::remove(dir.file("tessera.db-shm"));
  const std::string text =
      refused_start(dir.str(), "--listen 127.0.0.1:0 --db " + dir.file("tessera.db"));
  EXPECT_NE(text.find("new, empty database"), std::string::npos) << text;
  EXPECT_NE(text.find("tessera.db.jobs/jobs holds the files of 1 earlier jobs"), std::string::npos)
      << text;
  // Refused again at the next try: the refusal wrote nothing.
  EXPECT_EQ(std::filesystem::file_size(dir.file("tessera.db")), 0u);
  refused_start(dir.str(), "--listen 127.0.0.1:0 --db " + dir.file("tessera.db"));
  // Moved away, the server starts afresh.
  std::filesystem::rename(dir.file("tessera.db.jobs"), dir.file("old.jobs"));
  ServerProcess fresh(dir.str(), {"--virtual-gpus", "1"});
  EXPECT_TRUE(fresh.up()) << fresh.log();
}

// Finding 18: a corrupt `allocation` row gave a parse error naming neither the database nor
// the job.
TEST(ServeHardening, ACorruptRowIsNamedWithItsDatabaseAndJob) {
  TempDir dir("corrupt");
  {
    ServerProcess server(dir.str(), {"--virtual-gpus", "1"});
    ASSERT_TRUE(server.up()) << server.log();
    ApiClient admin = server.client(kAdminToken);
    ApiClient a = server.client(create_tenant(admin, "team-a"));
    const int64_t id = submit(a, "name: r\ncommand: [\"sleep\", \"5\"]\n");
    ASSERT_TRUE(eventually([&] { return job_in(a, id, "running"); }, 10));
    server.kill(SIGKILL);
  }
  {
    Db db(dir.file("tessera.db"));
    db.exec("UPDATE jobs SET allocation = '{\"gpus_per_member\": [' WHERE id = 1");
  }
  const std::string text =
      refused_start(dir.str(), "--listen 127.0.0.1:0 --db " + dir.file("tessera.db"));
  EXPECT_NE(text.find(dir.file("tessera.db") + ": job 1: its stored processes or allocation"),
            std::string::npos)
      << text;
}

// Finding 16: any tenant saw every tenant's name and load through /v1/queues, and /metrics
// needed no token.
TEST(ServeHardening, ATenantSeesOnlyItsOwnQueueAndMetricsTakeAToken) {
  TempDir dir("queues");
  ServerProcess server(dir.str(), {"--virtual-gpus", "2", "--metrics-token", "scrape-me"});
  ASSERT_TRUE(server.up()) << server.log();
  ApiClient admin = server.client(kAdminToken);
  ApiClient a = server.client(create_tenant(admin, "team-a"));
  ApiClient b = server.client(create_tenant(admin, "secret-project-b"));
  submit(b, "name: x\ncommand: [\"sleep\", \"2\"]\n");
  const HttpResult qa = a.get("/v1/queues");
  ASSERT_EQ(qa.status, 200);
  EXPECT_EQ(qa.body.find("secret-project-b"), std::string::npos) << qa.body;
  ASSERT_EQ(json_of(qa)["queues"].size(), 1u) << qa.body;
  EXPECT_EQ(json_of(qa)["queues"][0]["path"], "team-a") << qa.body;
  EXPECT_NE(admin.get("/v1/queues").body.find("secret-project-b"), std::string::npos);
  EXPECT_EQ(server.client("").get("/metrics").status, 401);
  EXPECT_EQ(a.get("/metrics").status, 403);
  const HttpResult scraped = server.client("scrape-me").get("/metrics");
  EXPECT_EQ(scraped.status, 200);
  EXPECT_NE(scraped.body.find("tessera_queue_depth"), std::string::npos);
  EXPECT_EQ(server.client("scrape-me").get("/v1/jobs").status, 401);  // metrics only
  EXPECT_EQ(admin.get("/metrics").status, 200);
}

// A raw request on its own connection (made `Connection: close`); the whole response.
std::string raw_request(const std::string& addr, std::string request) {
  request.insert(request.find("\r\n") + 2, "Connection: close\r\n");
  RawSocket s(addr);
  s.send(request);
  return s.receive(std::chrono::seconds(5));
}

std::string body_of(const std::string& response) {
  const size_t at = response.find("\r\n\r\n");
  return at == std::string::npos ? "" : response.substr(at + 4);
}

// Finding 17: invalid UTF-8 anywhere gave `500 request refused` and no audit entry, and a YAML
// string with bad bytes leaked a library's exception text; 413s, 400s and 404s of mutating
// calls were not audited. Finding 18: 404 instead of 405; a query value holding '=' was cut.
TEST(ServeHardening, BadBytesAndRefusedCallsGetClearAnswersAndAreAudited) {
  TempDir dir("utf8");
  ServerProcess server(dir.str(), {"--virtual-gpus", "1"});
  ASSERT_TRUE(server.up()) << server.log();
  ApiClient admin = server.client(kAdminToken);
  const std::string token = create_tenant(admin, "team-a");
  ApiClient a = server.client(token);
  for (const std::string body :
       {"name: \xff\xfe\ncommand: [\"true\"]\n", "\xffname: x\ncommand: [\"true\"]\n",
        "{\"name\": \"\xc0\xaf\", \"command\": [\"true\"]}"}) {
    const HttpResult r = a.post("/v1/jobs", body, "application/yaml");
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_NE(r.body.find("the request body is not valid UTF-8"), std::string::npos) << r.body;
    EXPECT_EQ(r.body.find("exception"), std::string::npos) << r.body;
  }
  const std::string auth = "Authorization: Bearer " + token + "\r\n";
  for (const std::string target : {"/v1/jobs/%FF", "/v1/jobs?state=%C3%28"}) {
    const std::string response =
        raw_request(server.addr(), "GET " + target + " HTTP/1.1\r\n" + auth + "\r\n");
    EXPECT_EQ(testing::status_of(response), 400) << response;
    EXPECT_NE(body_of(response).find("not valid UTF-8"), std::string::npos) << response;
  }
  // A value holding '=' is the whole value.
  const HttpResult cut = a.get("/v1/jobs?state=pending%3Dx");
  EXPECT_NE(cut.body.find("got 'pending=x'"), std::string::npos) << cut.body;
  const std::string raw =
      raw_request(server.addr(), "GET /v1/jobs?state=pending=x HTTP/1.1\r\n" + auth + "\r\n");
  EXPECT_NE(raw.find("got 'pending=x'"), std::string::npos) << raw;
  // 405 with Allow, not 404.
  const std::string wrong =
      raw_request(server.addr(), "GET /v1/jobs/1/cancel HTTP/1.1\r\n" + auth + "\r\n");
  EXPECT_EQ(testing::status_of(wrong), 405) << wrong;
  EXPECT_NE(wrong.find("Allow: POST"), std::string::npos) << wrong;
  // Refused mutating calls, wherever they are refused, are audited: a 404, a 413 refused
  // from its headers, a request path with bad bytes.
  EXPECT_EQ(a.post("/v1/no-such-thing", "{}", "application/json").status, 404);
  const std::string big = raw_request(
      server.addr(), "POST /v1/jobs HTTP/1.1\r\n" + auth + "Content-Length: 5000000\r\n\r\n");
  EXPECT_EQ(testing::status_of(big), 413) << big;
  raw_request(server.addr(),
              "POST /v1/jobs/%FF/cancel HTTP/1.1\r\n" + auth + "Content-Length: 0\r\n\r\n");
  const HttpResult audit = admin.get("/v1/audit?limit=100");
  ASSERT_EQ(audit.status, 200) << audit.body;  // valid JSON though a path held bad bytes
  std::map<int, int> by_status;
  const nlohmann::json entries = json_of(audit)["entries"];
  for (const auto& e : entries) {
    if (e["actor"] == "team-a") ++by_status[e["status"].get<int>()];
  }
  EXPECT_EQ(by_status[400], 4) << audit.body;  // three bodies, one path
  EXPECT_EQ(by_status[404], 1) << audit.body;
  EXPECT_EQ(by_status[413], 1) << audit.body;
}

// Finding 8: no per-tenant limits: 50,000 pending jobs were accepted, and a 100,000-member
// CPU gang was accepted and launched at once.
TEST(ServeHardening, ATenantsJobsAreLimited) {
  TempDir dir("limits");
  ServerProcess server(dir.str(), {"--virtual-gpus", "8", "--max-pending-per-tenant", "3",
                                   "--max-gang-size", "4", "--max-processes-per-tenant", "3"});
  ASSERT_TRUE(server.up()) << server.log();
  ApiClient admin = server.client(kAdminToken);
  ApiClient a = server.client(create_tenant(admin, "team-a"));
  ApiClient b = server.client(create_tenant(admin, "team-b"));
  auto post = [](ApiClient& c, const std::string& yaml) {
    return c.post("/v1/jobs", yaml, "application/yaml");
  };
  // Gang size.
  HttpResult r = post(a, "name: huge\ngang: {min: 5, max: 5}\ncommand: [\"true\"]\n");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("gang.max"), std::string::npos) << r.body;
  // Processes: a 2-member gang runs; a second would take team-a to 4 > 3, so it waits, named.
  const int64_t first =
      submit(a, "name: g1\ngang: {min: 2, max: 2}\ncommand: [\"sleep\", \"5\"]\n");
  const int64_t second = submit(a, "name: g2\ngang: {min: 2, max: 2}\ncommand: [\"true\"]\n");
  ASSERT_TRUE(eventually([&] { return job_in(a, first, "running"); }, 10));
  ASSERT_TRUE(eventually(
      [&] {
        return get_job(a, second)
                   .value("pending_reason", nlohmann::json(""))
                   .dump()
                   .find("--max-processes-per-tenant") != std::string::npos;
      },
      10))
      << get_job(a, second).dump();
  // Another tenant is not held by team-a's processes.
  const int64_t other = submit(b, "name: b\ngang: {min: 2, max: 2}\ncommand: [\"true\"]\n");
  EXPECT_TRUE(eventually([&] { return job_in(b, other, "succeeded"); }, 10));
  // Waiting jobs: team-a has 1 waiting; two more fit, the next is refused.
  submit(a, "name: w1\ncommand: [\"true\"]\ngang: {min: 3, max: 3}\n");
  submit(a, "name: w2\ncommand: [\"true\"]\ngang: {min: 3, max: 3}\n");
  r = post(a, "name: w3\ncommand: [\"true\"]\n");
  EXPECT_EQ(r.status, 429) << r.body;
  EXPECT_NE(r.body.find("--max-pending-per-tenant"), std::string::npos) << r.body;
}

// Finding 8 asks for limits per queue too: a queue's tenant_limits apply to the tenants under
// it, in place of the server's.
TEST(ServeHardening, AQueuesTenantLimitsApplyToItsTenants) {
  TempDir dir("queue-limits");
  std::ofstream(dir.file("queues.yaml")) << R"(queues:
  - name: strict
    tenant_limits: {max_pending_jobs: 1, max_gang_size: 2}
  - name: loose
)";
  ServerProcess server(dir.str(), {"--virtual-gpus", "1", "--queues", dir.file("queues.yaml")});
  ASSERT_TRUE(server.up()) << server.log();
  ApiClient admin = server.client(kAdminToken);
  ApiClient strict = server.client(create_tenant(admin, "strict"));
  ApiClient loose = server.client(create_tenant(admin, "loose"));
  auto post = [](ApiClient& c, const std::string& yaml) {
    return c.post("/v1/jobs", yaml, "application/yaml").status;
  };
  const std::string gang3 =
      "name: g\ngang: {min: 3, max: 3}\nresources: {gpus: 0}\ncommand: [\"true\"]\n";
  EXPECT_EQ(post(strict, gang3), 400);
  EXPECT_EQ(post(loose, gang3), 201);
  // One GPU, held (and seen running before strict submits, or fair share could start strict's
  // job first and leave it nothing pending): what strict submits next waits, and one waiting
  // job is its limit.
  const std::string hold = "name: h\ncommand: [\"sleep\", \"30\"]\n";
  const int64_t held = submit(loose, hold);
  ASSERT_TRUE(eventually([&] { return job_in(loose, held, "running"); }));
  EXPECT_EQ(post(strict, hold), 201);
  EXPECT_EQ(post(strict, hold), 429);
  EXPECT_EQ(post(loose, hold), 201);
}

TEST(ServeHardening, ATenantsSubmissionRateIsLimitedButNotTheAdmins) {
  TempDir dir("rate");
  ServerProcess server(dir.str(), {"--virtual-gpus", "1", "--max-submissions-per-second", "0.5",
                                   "--submission-burst", "3"});
  ASSERT_TRUE(server.up()) << server.log();
  ApiClient admin = server.client(kAdminToken);
  ApiClient a = server.client(create_tenant(admin, "team-a"));
  for (int i = 0; i < 3; ++i) submit(a, "name: j" + std::to_string(i) + "\ncommand: [\"true\"]\n");
  const HttpResult r = a.post("/v1/jobs", "name: more\ncommand: [\"true\"]\n", "application/yaml");
  EXPECT_EQ(r.status, 429) << r.body;
  EXPECT_NE(r.body.find("--max-submissions-per-second"), std::string::npos) << r.body;
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(admin
                  .post("/v1/jobs",
                        "name: op" + std::to_string(i) + "\ntenant: team-a\ncommand: [\"true\"]\n",
                        "application/yaml")
                  .status,
              201);
  }
}

// Finding 14: jobs ran as the server's user with its environment: a job read the admin token
// from the server's command line, another tenant's logs and secret environment from the
// database's files, and killed another tenant's job. A server running as root runs each
// tenant's jobs under a uid of the tenant's own, with an environment of its own.
TEST(ServeHardening, ATenantsJobCannotReachTheServerOrAnotherTenant) {
  if (::geteuid() != 0) GTEST_SKIP() << "switching uids needs root";
  TempDir dir("sandbox");
  ::chmod(dir.str().c_str(), 0755);  // as a data directory usually is: others may pass
  ::setenv("TESSERA_TEST_SECRET", "env-secret-of-the-server", 1);
  ServerProcess server(dir.str(), {"--virtual-gpus", "2"});
  ::unsetenv("TESSERA_TEST_SECRET");
  ASSERT_TRUE(server.up()) << server.log();
  ApiClient admin = server.client(kAdminToken);
  ApiClient a = server.client(create_tenant(admin, "team-a"));
  ApiClient b = server.client(create_tenant(admin, "team-b"));
  auto post = [](ApiClient& c, const std::string& name, const std::string& script) {
    const nlohmann::json spec{{"name", name},
                              {"command", {"sh", "-c", script}},
                              {"env", {{"MY_SECRET", "b-secret-env"}}}};
    const HttpResult r = c.post("/v1/jobs", spec.dump(), "application/json");
    EXPECT_EQ(r.status, 201) << r.body;
    return json_of(r).value("id", int64_t{-1});
  };
  const int64_t victim = post(b, "victim", "id -u; echo b-secret-output; sleep 20");
  ASSERT_TRUE(eventually(
      [&] {
        return b.get("/v1/jobs/" + std::to_string(victim) + "/logs").body.find("b-secret-output") !=
               std::string::npos;
      },
      10));
  const std::string attempt = dir.file("tessera.db.jobs/jobs/" + std::to_string(victim) + "/1");
  std::ifstream pid_in(attempt + "/rank-0.pid");
  int victim_pid = 0;
  pid_in >> victim_pid;
  ASSERT_GT(victim_pid, 1);
  const std::string db = dir.file("tessera.db");
  const std::string script =
      "id -u; "
      "cat " +
      db + " " + db +
      "-wal >/dev/null 2>&1 && echo READ-DB || echo no-db; "
      "grep -q b-secret " +
      attempt +
      "/rank-0.log 2>/dev/null && echo READ-LOG || echo no-log; "
      "tr '\\0' ' ' < /proc/" +
      std::to_string(server.pid()) +
      "/cmdline | "
      "grep -q " +
      kAdminToken +
      " && echo READ-CMDLINE || echo no-cmdline; "
      "env | grep -q -e env-secret -e " +
      kAdminToken +
      " && echo READ-ENV || echo no-env; "
      "kill -0 " +
      std::to_string(victim_pid) +
      " 2>/dev/null && echo CAN-SIGNAL || echo no-signal; "
      "echo mine > \"$HOME/file\" && echo HOME-OK; "
      "echo attack-done";
  const int64_t attacker = post(a, "attacker", script);
  std::string out;
  ASSERT_TRUE(eventually(
      [&] {
        out = a.get("/v1/jobs/" + std::to_string(attacker) + "/logs").body;
        return out.find("attack-done") != std::string::npos;
      },
      10))
      << out << server.log();
  // Its own directory, by name, is its to write.
  EXPECT_NE(out.find("HOME-OK"), std::string::npos) << out;
  for (const char* denied : {"no-db", "no-log", "no-cmdline", "no-env", "no-signal"}) {
    EXPECT_NE(out.find(denied), std::string::npos) << denied << " missing from:\n" << out;
  }
  // Each tenant has its uid, neither root nor the other's.
  const std::string victim_log = b.get("/v1/jobs/" + std::to_string(victim) + "/logs").body;
  const long uid_a = std::stol(out), uid_b = std::stol(victim_log);
  EXPECT_GE(uid_a, 900000000) << out;
  EXPECT_GE(uid_b, 900000000) << victim_log;
  EXPECT_NE(uid_a, uid_b);
  // The victim still runs, and, where the host has cgroups, in a group of its own.
  EXPECT_TRUE(job_in(b, victim, "running"));
  if (server.log().find("cgroups: cgroup v") != std::string::npos) {
    std::ifstream groups("/proc/" + std::to_string(victim_pid) + "/cgroup");
    const std::string text((std::istreambuf_iterator<char>(groups)), {});
    // Named after the server's database too (two servers on one host never share a group).
    EXPECT_NE(text.find("tessera/"), std::string::npos) << text;
    EXPECT_NE(text.find("-" + std::to_string(victim) + "-1-r0\n"), std::string::npos) << text;
  }
  EXPECT_EQ(a.post("/v1/jobs/" + std::to_string(victim) + "/cancel", "", "application/json").status,
            403);  // another tenant's
}

// TLS: the API over HTTPS with a certificate pair; clients verify it (TESSERA_CA),
// and one that cannot verify it, or speaks plain HTTP, gets nothing.
TEST(ServeHardening, TheApiServesHttpsThatClientsVerify) {
  TempDir dir("tls");
  const std::string cert = dir.file("cert.pem"), key = dir.file("key.pem");
  const std::string gen =
      "openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=127.0.0.1 "
      "-addext subjectAltName=IP:127.0.0.1 -keyout " +
      key + " -out " + cert + " >/dev/null 2>&1";
  ASSERT_EQ(std::system(gen.c_str()), 0) << "needs the openssl command (scripts/setup.sh)";
  ServerProcess server(dir.str(), {"--virtual-gpus", "1", "--tls-cert", cert, "--tls-key", key});
  ASSERT_TRUE(server.up()) << server.log();
  EXPECT_NE(server.log().find("listening on https://"), std::string::npos) << server.log();
  ClientOptions o;
  o.addr = "https://" + server.addr();
  o.token = kAdminToken;
  o.ca_file = cert;
  o.attempts = 1;
  ApiClient admin(o);
  EXPECT_EQ(admin.get("/healthz").status, 200);
  const HttpResult t =
      admin.post("/v1/tenants", nlohmann::json{{"name", "team-a"}}.dump(), "application/json");
  ASSERT_EQ(t.status, 201) << t.body << t.error;
  ClientOptions tenant = o;
  tenant.token = json_of(t)["token"];
  ApiClient a(tenant);
  const HttpResult job =
      a.post("/v1/jobs", "name: x\ncommand: [\"echo\", \"over-tls\"]\n", "application/yaml");
  ASSERT_EQ(job.status, 201) << job.body;
  const int64_t id = json_of(job)["id"];
  ASSERT_TRUE(eventually([&] { return job_in(a, id, "succeeded"); }, 10));
  EXPECT_NE(a.get("/v1/jobs/" + std::to_string(id) + "/logs").body.find("over-tls"),
            std::string::npos);
  // Without the CA the certificate cannot be verified: no answer.
  ClientOptions untrusting = o;
  untrusting.ca_file = "";
  EXPECT_EQ(ApiClient(untrusting).get("/healthz").status, 0);
  // Plain HTTP to the TLS port: no answer either, and the server goes on.
  ClientOptions plain = o;
  plain.addr = server.addr();
  EXPECT_NE(ApiClient(plain).get("/healthz").status, 200);
  EXPECT_EQ(admin.get("/healthz").status, 200);
  // The CLI, with TESSERA_CA.
  const std::string cli = "TESSERA_CA=" + cert + " " + TESSERA_BINARY + " jobs --addr https://" +
                          server.addr() + " --token " + kAdminToken + " >/dev/null 2>&1";
  EXPECT_EQ(std::system(cli.c_str()), 0);
}

// Finding 6: a cancelled job that ignores SIGTERM kept its GPUs for its whole grace, and a
// second cancel got 409. A second cancel is answered, and `force` kills it now.
TEST(ServeHardening, AForcedCancelKillsAJobThatIgnoresSigterm) {
  TempDir dir("force");
  ServerProcess server(dir.str(), {"--virtual-gpus", "1", "--checkpoint-grace", "3600"});
  ASSERT_TRUE(server.up()) << server.log();
  ApiClient admin = server.client(kAdminToken);
  ApiClient a = server.client(create_tenant(admin, "team-a"));
  const int64_t id = submit(a, R"(name: stubborn
command: ["sh", "-c", "trap '' TERM; echo ready; while true; do sleep 0.1; done"]
)");
  ASSERT_TRUE(eventually(
      [&] {
        return a.get("/v1/jobs/" + std::to_string(id) + "/logs").body.find("ready") !=
               std::string::npos;
      },
      10));
  const int64_t next = submit(a, "name: next\ncommand: [\"true\"]\n");
  const std::string cancel = "/v1/jobs/" + std::to_string(id) + "/cancel";
  ASSERT_EQ(a.post(cancel, "", "application/json").status, 200);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_TRUE(job_in(a, next, "pending")) << "the stubborn job still holds the GPU";
  const HttpResult again = a.post(cancel, "", "application/json");
  EXPECT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(a.post(cancel + "?force=maybe", "", "application/json").status, 400);
  const HttpResult forced = a.post(cancel + "?force=true", "", "application/json");
  EXPECT_EQ(forced.status, 200) << forced.body;
  ASSERT_TRUE(eventually([&] { return job_in(a, next, "succeeded"); }, 10)) << server.log();
  EXPECT_EQ(json_of(a.get("/v1/jobs/" + std::to_string(id)))["state"], "cancelled");
  // Once its processes are gone, there is nothing left to cancel.
  EXPECT_EQ(a.post(cancel + "?force=true", "", "application/json").status, 409);
}

// Finding 2 (its cause): 2,000 refused calls without a token each wrote an audit row, enough
// to fill a disk. They write a bounded number; the rest are counted.
TEST(ServeHardening, RefusedAnonymousCallsWriteABoundedAuditLog) {
  TempDir dir("anon");
  ServerProcess server(dir.str(), {"--virtual-gpus", "1"});
  ASSERT_TRUE(server.up()) << server.log();
  ApiClient anonymous = server.client("");
  for (int k = 0; k < 2000; ++k) {
    ASSERT_EQ(anonymous.post("/v1/jobs", "{}", "application/json").status, 401);
  }
  const nlohmann::json audit = json_of(server.client(kAdminToken).get("/v1/audit?limit=10000"));
  size_t rows = 0;
  for (const auto& e : audit["entries"]) rows += e["actor"] == "anonymous" ? 1 : 0;
  EXPECT_LE(rows, 200u);
  EXPECT_GE(rows, 60u);
  const std::string metrics = server.client(kAdminToken).get("/metrics").body;
  EXPECT_NE(metrics.find("tessera_audit_suppressed_total"), std::string::npos);
  EXPECT_EQ(metrics.find("tessera_audit_suppressed_total 0\n"), std::string::npos) << metrics;
}

}  // namespace
}  // namespace tessera
