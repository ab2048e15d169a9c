// `tessera serve` against a hostile tenant and a careless operator, second round: each test
// reproduces a finding against the real binary (a tenant reaching root through its job's
// environment, processes outliving their job, a dataset name leaving the cache, unbounded
// values and refusals that kept a connection open) and checks what a user would notice.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cli_util.h"
#include "raw_socket.h"
#include "service_test_util.h"

namespace tessera {
namespace {

using testing::create_tenant;
using testing::eventually;
using testing::get_job;
using testing::job_in;
using testing::json_of;
using testing::kAdminToken;
using testing::process_gone;
using testing::RawSocket;
using testing::ServerProcess;
using testing::submit;
using testing::TempDir;

// `tessera serve ARGS` that is expected to refuse to start, bounded: a server that started
// instead would serve until killed.
testing::CmdResult serve_briefly(const std::string& args) {
  return testing::run_tessera_cmd("timeout 20 " + std::string(TESSERA_BINARY) + " serve " + args +
                                  " 2>&1");
}

HttpResult post_json(ApiClient& c, const nlohmann::json& spec) {
  return c.post("/v1/jobs", spec.dump(), "application/json");
}

// Finding 1: a job's LD_PRELOAD reached the privileged helper that drops to the tenant's
// uid, which ran the tenant's library as root. Loader variables are refused by name;
// LD_LIBRARY_PATH, which jobs need, is not.
TEST(ServeIsolation, LoaderVariablesAreRefusedByName) {
  TempDir dir("preload");
  ServerProcess server(dir.str(), {"--virtual-gpus", "1"});
  ASSERT_TRUE(server.up()) << server.log();
  ApiClient admin = server.client(kAdminToken);
  ApiClient a = server.client(create_tenant(admin, "team-a"));
  for (const char* name : {"LD_PRELOAD", "LD_AUDIT", "GCONV_PATH", "GLIBC_TUNABLES"}) {
    const HttpResult r = post_json(
        a, {{"name", "x"}, {"command", {"true"}}, {"env", {{name, dir.file("evil.so")}}}});
    EXPECT_EQ(r.status, 400) << name << ": " << r.body;
    EXPECT_NE(r.body.find(std::string("env.") + name), std::string::npos) << r.body;
  }
  const HttpResult ok = post_json(
      a, {{"name", "y"}, {"command", {"true"}}, {"env", {{"LD_LIBRARY_PATH", "/opt/lib"}}}});
  EXPECT_EQ(ok.status, 201) << ok.body;
}

// Finding 2: `setsid sh -c "sleep 97" &` left a process running after its job succeeded, and
// after a cancel. A job's end kills every process in its members' cgroups; the run is not
// over until they are gone. Needs cgroups (a root server).
TEST(ServeIsolation, NothingAJobStartedOutlivesItsEndOrItsCancel) {
  if (::geteuid() != 0) GTEST_SKIP() << "cgroups need root";
  TempDir dir("escape");
  ::chmod(dir.str().c_str(), 0755);
  ServerProcess server(dir.str(), {"--virtual-gpus", "2"});
  ASSERT_TRUE(server.up()) << server.log();
  if (server.log().find("cgroups: cgroup v") == std::string::npos) {
    GTEST_SKIP() << "no cgroups on this host: " << server.log();
  }
  ApiClient admin = server.client(kAdminToken);
  ApiClient a = server.client(create_tenant(admin, "team-a"));
  // The escapee writes its pid where the test can read it (the job's HOME is its own).
  auto escape = [&](const std::string& name, const std::string& then) {
    const std::string script =
        "setsid sh -c 'echo $$ > \"$HOME/escapee\"; exec sleep 97' </dev/null >/dev/null 2>&1 & "
        "while [ ! -s \"$HOME/escapee\" ]; do sleep 0.05; done; cat \"$HOME/escapee\"; " +
        then;
    const HttpResult r = post_json(a, {{"name", name}, {"command", {"sh", "-c", script}}});
    EXPECT_EQ(r.status, 201) << r.body;
    return json_of(r).value("id", int64_t{-1});
  };
  auto escapee_of = [&](int64_t id) {
    int64_t pid = 0;
    eventually(
        [&] {
          const std::string log = a.get("/v1/jobs/" + std::to_string(id) + "/logs").body;
          pid = std::atoll(log.c_str());
          return pid > 1;
        },
        10);
    return pid;
  };

  const int64_t ends = escape("ends", "exit 0");
  const int64_t pid1 = escapee_of(ends);
  ASSERT_GT(pid1, 1);
  ASSERT_TRUE(eventually([&] { return job_in(a, ends, "succeeded"); }, 15))
      << get_job(a, ends).dump();
  EXPECT_TRUE(process_gone(pid1)) << "pid " << pid1 << " outlived job " << ends;

  const int64_t cancelled = escape("cancelled", "sleep 60");
  const int64_t pid2 = escapee_of(cancelled);
  ASSERT_GT(pid2, 1);
  EXPECT_FALSE(process_gone(pid2));
  EXPECT_EQ(
      a.post("/v1/jobs/" + std::to_string(cancelled) + "/cancel?force=true", "", "application/json")
          .status,
      200);
  ASSERT_TRUE(eventually([&] { return job_in(a, cancelled, "cancelled"); }, 15));
  ASSERT_TRUE(eventually([&] { return process_gone(pid2); }, 5))
      << "pid " << pid2 << " outlived cancelled job " << cancelled;
}

// Finding 8: a dataset named ".." was staged into the cache's parent and then evicted with
// everything in it; "." wiped the cache. Names are single path components.
TEST(ServeIsolation, ADatasetNameNeverLeavesTheCache) {
  TempDir dir("dataset-names");
  const std::string cache = dir.file("cache/datasets");
  std::filesystem::create_directories(dir.file("cache"));
  std::ofstream(dir.file("cache/operator-file.txt")) << "keep me\n";
  ServerProcess server(dir.str(), {"--virtual-gpus", "1", "--dataset-dir", cache, "--stage-command",
                                   "echo staged > $TESSERA_DATASET_DIR/data"});
  ASSERT_TRUE(server.up()) << server.log();
  ApiClient admin = server.client(kAdminToken);
  ApiClient a = server.client(create_tenant(admin, "team-a"));
  for (const char* bad : {"..", ".", "../x", "a/../..", ".hidden", "a b", "x;id"}) {
    const HttpResult r =
        post_json(a, {{"name", "d"}, {"command", {"true"}}, {"dataset", {{"name", bad}}}});
    EXPECT_EQ(r.status, 400) << bad << ": " << r.body;
    EXPECT_NE(r.body.find("dataset.name"), std::string::npos) << r.body;
  }
  const HttpResult bare = post_json(a, {{"name", "d"}, {"command", {"true"}}, {"dataset", ".."}});
  EXPECT_EQ(bare.status, 400) << bare.body;
  const HttpResult good =
      post_json(a, {{"name", "d"}, {"command", {"true"}}, {"dataset", "imagenet-1k"}});
  ASSERT_EQ(good.status, 201) << good.body;
  const int64_t id = json_of(good).value("id", int64_t{-1});
  EXPECT_TRUE(eventually([&] { return job_in(a, id, "succeeded"); }, 15))
      << get_job(a, id).dump() << server.log();
  std::ifstream kept(dir.file("cache/operator-file.txt"));
  std::string line;
  std::getline(kept, line);
  EXPECT_EQ(line, "keep me");
}

// Findings 13 and 14: a time limit of 1e308 was accepted (and shown as a negative number);
// a 100,000-character value came back whole in the error.
TEST(ServeIsolation, DurationsAreRangeCheckedAndErrorsQuoteAShortPrefix) {
  TempDir dir("values");
  ServerProcess server(dir.str(), {"--virtual-gpus", "1"});
  ASSERT_TRUE(server.up()) << server.log();
  ApiClient admin = server.client(kAdminToken);
  ApiClient a = server.client(create_tenant(admin, "team-a"));
  for (const nlohmann::json& limit :
       {nlohmann::json(1e308), nlohmann::json("1e308s"), nlohmann::json("9999999999d")}) {
    const HttpResult r =
        post_json(a, {{"name", "t"}, {"command", {"true"}}, {"time_limit", limit}});
    EXPECT_EQ(r.status, 400) << limit << ": " << r.body;
    EXPECT_NE(r.body.find("time_limit"), std::string::npos) << r.body;
  }
  const std::string huge(100000, 'Q');
  for (const nlohmann::json& spec :
       {nlohmann::json{
            {"name", "g"}, {"command", {"true"}}, {"resources", {{"gpu_types", {huge}}}}},
        nlohmann::json{{"name", "g"}, {"command", {"true"}}, {huge, 1}},
        nlohmann::json{{"name", "g"}, {"command", {"true"}}, {"env", {{huge, "v"}}}},
        nlohmann::json{{"name", "g"}, {"command", {"true"}}, {"dataset", huge}}}) {
    const HttpResult r = post_json(a, spec);
    EXPECT_GE(r.status, 400) << r.body.substr(0, 200);
    EXPECT_LT(r.body.size(), 1000u) << r.body.substr(0, 200);
  }
}

// Finding 15: a bare-LF request and CONNECT got 400 and the connection then served the next
// request; every refusal closes it.
TEST(ServeIsolation, EveryRefusalClosesTheConnection) {
  TempDir dir("framing");
  ServerProcess server(dir.str(), {"--virtual-gpus", "1"});
  ASSERT_TRUE(server.up()) << server.log();
  for (const std::string& request :
       {std::string("GET /healthz HTTP/1.1\nHost: x\n\n"),
        std::string("CONNECT 127.0.0.1:22 HTTP/1.1\r\nHost: x\r\n\r\n")}) {
    RawSocket s(server.addr());
    ASSERT_TRUE(s.ok());
    ASSERT_TRUE(s.send(request));
    const std::string answer = s.receive(std::chrono::seconds(2), "\r\n\r\n");
    const int status = testing::status_of(answer);
    EXPECT_TRUE(status == 400 || status == 501) << answer;
    EXPECT_NE(answer.find("Connection: close"), std::string::npos) << answer;
    EXPECT_TRUE(s.closed_by_peer(std::chrono::seconds(2))) << request;
  }
}

// Finding 16: a TLS key every user could read was accepted silently, and a suite without
// forward secrecy (AES128-SHA) was offered.
TEST(ServeIsolation, TlsRefusesAWorldReadableKeyAndOffersOnlyForwardSecrecy) {
  TempDir dir("tls-keys");
  const std::string cert = dir.file("cert.pem"), key = dir.file("key.pem");
  const std::string gen =
      "openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=127.0.0.1 "
      "-addext subjectAltName=IP:127.0.0.1 -keyout " +
      key + " -out " + cert + " >/dev/null 2>&1";
  ASSERT_EQ(std::system(gen.c_str()), 0) << "needs the openssl command (scripts/setup.sh)";
  ::chmod(key.c_str(), 0644);
  const testing::CmdResult refused =
      serve_briefly("--listen 127.0.0.1:0 --virtual-gpus 1 --db " + dir.file("a.db") +
                    " --tls-cert " + cert + " --tls-key " + key);
  EXPECT_EQ(refused.status, 2) << refused.output;
  EXPECT_NE(refused.output.find("readable by every user"), std::string::npos) << refused.output;

  ::chmod(key.c_str(), 0600);
  ServerProcess server(dir.str(), {"--virtual-gpus", "1", "--tls-cert", cert, "--tls-key", key});
  ASSERT_TRUE(server.up()) << server.log();
  auto handshake = [&](const std::string& args) {
    const std::string cmd = "echo | timeout 10 openssl s_client -connect " + server.addr() + " " +
                            args + " >/dev/null 2>&1";
    return std::system(cmd.c_str()) == 0;
  };
  EXPECT_TRUE(handshake("-tls1_2 -cipher ECDHE-RSA-AES128-GCM-SHA256"));
  EXPECT_TRUE(handshake("-tls1_3"));
  EXPECT_FALSE(handshake("-tls1_2 -cipher AES128-SHA"));
  EXPECT_FALSE(handshake("-tls1_2 -cipher AES256-GCM-SHA384"));  // RSA key exchange
}

// Finding 11: a 10,000-task array cost as much as one submission and every task copied the
// whole index list. An array costs its size in submissions; one larger than the burst is a
// request to change.
TEST(ServeIsolation, AnArrayCostsItsTasksInSubmissions) {
  TempDir dir("arrays");
  ServerProcess server(dir.str(), {"--virtual-gpus", "1", "--submission-burst", "100",
                                   "--max-submissions-per-second", "1"});
  ASSERT_TRUE(server.up()) << server.log();
  ApiClient admin = server.client(kAdminToken);
  ApiClient a = server.client(create_tenant(admin, "team-a"));
  const HttpResult big = post_json(a, {{"name", "big"}, {"command", {"true"}}, {"array", "0-999"}});
  EXPECT_EQ(big.status, 400) << big.body;
  EXPECT_NE(big.body.find("--submission-burst"), std::string::npos) << big.body;
  const HttpResult fits =
      post_json(a, {{"name", "fits"}, {"command", {"sleep", "30"}}, {"array", "0-89"}});
  EXPECT_EQ(fits.status, 201) << fits.body;
  // 90 of the 100 taken: a second array of 20 must wait.
  const HttpResult more =
      post_json(a, {{"name", "more"}, {"command", {"true"}}, {"array", "0-19"}});
  EXPECT_EQ(more.status, 429) << more.body;
}

// Finding 4: two servers on one host gave different tenants the same uid (one's tenant killed
// the other's job) and shared cgroups of jobs with the same id. Each server's uids come from a
// range claimed on the host, its cgroups are named after its database, and a server whose
// chosen range another running server holds refuses to start.
TEST(ServeIsolation, TwoServersOnOneHostShareNeitherUidsNorCgroups) {
  if (::geteuid() != 0) GTEST_SKIP() << "tenant uids need root";
  TempDir one("server-one"), two("server-two");
  ::chmod(one.str().c_str(), 0755);
  ::chmod(two.str().c_str(), 0755);
  ServerProcess first(one.str(), {"--virtual-gpus", "1"});
  ServerProcess second(two.str(), {"--virtual-gpus", "1"});
  ASSERT_TRUE(first.up()) << first.log();
  ASSERT_TRUE(second.up()) << second.log();
  struct Seen {
    long uid = 0;
    std::string cgroup;
  };
  auto run_one = [&](ServerProcess& server) {
    ApiClient admin = server.client(kAdminToken);
    ApiClient a = server.client(create_tenant(admin, "team-a"));
    const HttpResult r = post_json(
        a, {{"name", "who"}, {"command", {"sh", "-c", "id -u; grep pids /proc/self/cgroup"}}});
    EXPECT_EQ(r.status, 201) << r.body;
    const int64_t id = json_of(r).value("id", int64_t{-1});
    EXPECT_EQ(id, 1);  // both servers' first job: the ids that collided
    EXPECT_TRUE(eventually([&] { return job_in(a, id, "succeeded"); }, 15)) << server.log();
    const std::string log = a.get("/v1/jobs/" + std::to_string(id) + "/logs").body;
    return Seen{std::atol(log.c_str()), log.substr(std::min(log.size(), log.find('\n') + 1))};
  };
  const Seen a = run_one(first), b = run_one(second);
  EXPECT_GE(a.uid, 900000000);
  EXPECT_GE(b.uid, 900000000);
  EXPECT_NE(a.uid, b.uid) << "two servers gave their first tenants one uid";
  if (!a.cgroup.empty() && first.log().find("cgroups: cgroup v") != std::string::npos) {
    EXPECT_NE(a.cgroup, b.cgroup);
  }
  // A third server told to use the first's range refuses, naming the other server.
  TempDir three("server-three");
  const testing::CmdResult refused =
      serve_briefly("--listen 127.0.0.1:0 --virtual-gpus 1 --db " + three.file("tessera.db") +
                    " --tenant-uid-base " + std::to_string(a.uid + 10));
  EXPECT_EQ(refused.status, 2) << refused.output;
  EXPECT_NE(refused.output.find("overlap those of another server"), std::string::npos)
      << refused.output;
}

// Finding 10: dataset folders were 0700 root, so a tenant's job could not read its own
// dataset. Shared datasets (NAME) are readable by every job; private ones (TENANT/NAME) by
// that tenant's jobs alone, and no other tenant may name them.
TEST(ServeIsolation, SharedDatasetsAreReadByEveryJobAndPrivateOnesByTheirTenantAlone) {
  if (::geteuid() != 0) GTEST_SKIP() << "tenant uids need root";
  TempDir dir("dataset-readers");
  ::chmod(dir.str().c_str(), 0755);
  const std::string cache = dir.file("datasets");
  ServerProcess server(dir.str(), {"--virtual-gpus", "2", "--dataset-dir", cache, "--stage-command",
                                   "echo staged-$TESSERA_DATASET > $TESSERA_DATASET_DIR/data"});
  ASSERT_TRUE(server.up()) << server.log();
  ApiClient admin = server.client(kAdminToken);
  ApiClient a = server.client(create_tenant(admin, "team-a"));
  ApiClient b = server.client(create_tenant(admin, "team-b"));
  auto run = [&](ApiClient& c, const std::string& dataset, const std::string& script) {
    const HttpResult r =
        post_json(c, {{"name", "reader"}, {"command", {"sh", "-c", script}}, {"dataset", dataset}});
    EXPECT_EQ(r.status, 201) << r.body;
    const int64_t id = json_of(r).value("id", int64_t{-1});
    EXPECT_TRUE(eventually(
        [&] {
          const std::string st = get_job(c, id).value("state", "");
          return st == "succeeded" || st == "failed";
        },
        15))
        << get_job(c, id).dump() << server.log();
    return c.get("/v1/jobs/" + std::to_string(id) + "/logs").body;
  };
  EXPECT_NE(run(a, "shared-set", "cat \"$TESSERA_DATASET_DIR/data\"").find("staged-shared-set"),
            std::string::npos);
  EXPECT_NE(run(b, "shared-set", "cat \"$TESSERA_DATASET_DIR/data\"").find("staged-shared-set"),
            std::string::npos);
  const std::string mine = run(a, "team-a/secret", "cat \"$TESSERA_DATASET_DIR/data\"");
  EXPECT_NE(mine.find("staged-team-a/secret"), std::string::npos) << mine;
  // Team-b may not name it, nor read it by its path.
  const HttpResult theirs =
      post_json(b, {{"name", "thief"}, {"command", {"true"}}, {"dataset", "team-a/secret"}});
  EXPECT_EQ(theirs.status, 400) << theirs.body;
  EXPECT_NE(theirs.body.find("private to tenant team-a"), std::string::npos) << theirs.body;
  const std::string stolen =
      run(b, "shared-set",
          "cat " + cache +
              "/.private/team-a/secret/data 2>/dev/null && echo READ || echo denied; "
              "ls " +
              cache + " >/dev/null 2>&1 && echo LISTED || echo unlisted");
  EXPECT_NE(stolen.find("denied"), std::string::npos) << stolen;
  EXPECT_NE(stolen.find("unlisted"), std::string::npos) << stolen;
}

// Finding 3: Alice's job found Bob's rank-0 listener in /proc/net/tcp and sent it data. Each
// gang has a network namespace of its own (the default as root): its members reach each other
// on loopback, another tenant's listener is not there, and the job still reaches its
// TESSERA_REPORT_URL. Under --job-network host, the same attack still works (what the docs
// say remains there).
TEST(ServeIsolation, AGangReachesItsOwnMembersButNotAnotherTenantsListener) {
  if (::geteuid() != 0) GTEST_SKIP() << "network namespaces need root";
  const std::string listen =
      "import socket,sys\n"
      "s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
      "s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen(4); print('listening', flush=True)\n"
      "s.settimeout(20)\n"
      "try:\n  c,_=s.accept(); print('GOT', c.recv(64).decode(), flush=True)\n"
      "except Exception as e: print('no-one', e, flush=True)\n";
  const std::string connect =
      "import socket,sys,time\n"
      "for i in range(50):\n"
      "  try:\n"
      "    c=socket.create_connection(('127.0.0.1', int(sys.argv[1])), 1); c.sendall(b'secret')\n"
      "    print('CONNECTED', flush=True); break\n"
      "  except OSError: time.sleep(0.1)\n"
      "else: print('refused', flush=True)\n";
  const int port = 20000 + ::getpid() % 20000;
  for (const std::string mode : {"isolated", "host"}) {
    TempDir dir("network-" + mode);
    ::chmod(dir.str().c_str(), 0755);
    ServerProcess server(dir.str(), {"--virtual-gpus", "4", "--job-network", mode});
    ASSERT_TRUE(server.up()) << server.log();
    ApiClient admin = server.client(kAdminToken);
    ApiClient alice = server.client(create_tenant(admin, "alice"));
    ApiClient bob = server.client(create_tenant(admin, "bob"));
    auto post = [&](ApiClient& c, const nlohmann::json& spec) {
      const HttpResult r = post_json(c, spec);
      EXPECT_EQ(r.status, 201) << r.body;
      return json_of(r).value("id", int64_t{-1});
    };
    auto log_of = [&](ApiClient& c, int64_t id) {
      return c.get("/v1/jobs/" + std::to_string(id) + "/logs").body;
    };
    const int64_t victim = post(
        bob, {{"name", "rank0"}, {"command", {"python3", "-c", listen, std::to_string(port)}}});
    ASSERT_TRUE(
        eventually([&] { return log_of(bob, victim).find("listening") != std::string::npos; }, 15))
        << log_of(bob, victim) << server.log();
    const int64_t attacker = post(
        alice, {{"name", "probe"}, {"command", {"python3", "-c", connect, std::to_string(port)}}});
    ASSERT_TRUE(eventually([&] { return job_in(alice, attacker, "succeeded"); }, 20))
        << get_job(alice, attacker).dump() << log_of(alice, attacker);
    // A gang of two: rank 1 reaches rank 0 on the gang's port.
    const std::string gang_script =
        "if [ \"$RANK\" = 0 ]; then python3 -c \"$LISTEN\" $MASTER_PORT; "
        "else python3 -c \"$CONNECT\" $MASTER_PORT; fi";
    const int64_t gang = post(alice, {{"name", "gang"},
                                      {"gang", 2},
                                      {"command", {"sh", "-c", gang_script}},
                                      {"env", {{"LISTEN", listen}, {"CONNECT", connect}}}});
    ASSERT_TRUE(eventually([&] { return job_in(alice, gang, "succeeded"); }, 30))
        << get_job(alice, gang).dump();
    const std::string gang_log = alice.get("/v1/jobs/" + std::to_string(gang) + "/logs").body;
    EXPECT_NE(gang_log.find("GOT secret"), std::string::npos) << mode << ": " << gang_log;
    const std::string probe = log_of(alice, attacker);
    if (mode == "isolated") {
      EXPECT_NE(probe.find("refused"), std::string::npos) << probe;
      EXPECT_NE(server.log().find("network: isolated"), std::string::npos) << server.log();
    } else {
      EXPECT_NE(probe.find("CONNECTED"), std::string::npos) << probe;
    }
  }
}

}  // namespace
}  // namespace tessera
