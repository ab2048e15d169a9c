// The read API of `tessera kube` (--listen, --read-auth kubernetes) on a real kube-apiserver:
// callers bring ServiceAccount tokens from `kubectl create token`, the API server says whose
// they are (TokenReview) and RBAC says what each may see (SubjectAccessReview), the scheduler
// asking with the shipped ServiceAccount and RBAC alone, and serving over HTTPS (--tls-cert). The
// audit log is the judge of what the scheduler asked.
#include <httplib.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "kube/real_server_fixture.h"
#include "kube/support/process.h"

namespace tessera::kube {
namespace {

using nlohmann::json;
using testing::Process;

class KubeReadApi : public KubeRealServer {
 protected:
  // GET `path` as the holder of `token` ("" = none), over HTTPS verified with the test's CA.
  httplib::Result get(const std::string& path, const std::string& token) {
    httplib::SSLClient c("127.0.0.1", port_);
    c.set_ca_cert_path(cert_);
    c.enable_server_certificate_verification(true);
    c.set_read_timeout(30, 0);
    httplib::Headers h;
    if (!token.empty()) h.emplace("Authorization", "Bearer " + token);
    return c.Get(path, h);
  }
  // The job names a caller sees in GET /v1/jobs.
  std::set<std::string> jobs_seen(const std::string& token) {
    auto r = get("/v1/jobs", token);
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
    std::set<std::string> out;
    if (!r || r->status != 200) return out;
    const json body = json::parse(r->body);
    for (const json& j : body["jobs"]) out.insert(j.value("name", ""));
    return out;
  }
  int status(const std::string& path, const std::string& token) {
    auto r = get(path, token);
    return r ? r->status : 0;
  }
  int port_ = 0;
  std::string cert_;
};

TEST_F(KubeReadApi, TokensAreCheckedByTheApiServerAndEachCallerSeesWhatRbacAllows) {
  start_cluster(2);  // 16 GPUs
  const std::string kubeconfig = service_account_kubeconfig();
  for (const std::string ns : {"team-a", "team-b"}) create_namespace(ns);
  // alice may view team-a; bob nothing; ops views every namespace and the cluster-wide views;
  // prom (Prometheus) the cluster-wide views only (the shipped ClusterRole tessera-viewer).
  kubectl_ok("create serviceaccount alice -n team-a");
  kubectl_ok(
      "create rolebinding alice-view --clusterrole=view --serviceaccount=team-a:alice "
      "-n team-a");
  kubectl_ok("create serviceaccount bob -n team-b");
  for (const std::string sa : {"ops", "prom"}) {
    kubectl_ok("create serviceaccount " + sa + " -n tessera-system");
    kubectl_ok("create clusterrolebinding " + sa +
               "-viewer --clusterrole=tessera-viewer --serviceaccount=tessera-system:" + sa);
  }
  kubectl_ok(
      "create clusterrolebinding ops-view --clusterrole=view "
      "--serviceaccount=tessera-system:ops");
  // The built-in view role gets its rules from kube-controller-manager's aggregation
  // controller, a moment after the cluster starts.
  ASSERT_TRUE(wait_for(
      [&] {
        std::string out;
        cluster_->kubectl("auth can-i list pods -A --as=system:serviceaccount:tessera-system:ops",
                          &out);
        return out.rfind("yes", 0) == 0;
      },
      30));
  const std::string alice = token_of("team-a", "alice"), bob = token_of("team-b", "bob"),
                    ops = token_of("tessera-system", "ops"),
                    prom = token_of("tessera-system", "prom");

  cert_ = (dir_ / "tls.crt").string();
  const std::string key = (dir_ / "tls.key").string();
  const std::string gen =
      "openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=127.0.0.1 "
      "-addext subjectAltName=IP:127.0.0.1 -keyout " +
      key + " -out " + cert_ + " >/dev/null 2>&1";
  ASSERT_EQ(std::system(gen.c_str()), 0) << "needs the openssl command (scripts/setup.sh)";
  const std::string log = (dir_ / "kube.log").string(), addr = (dir_ / "addr").string();
  Process sched({"kube", "--kubeconfig", kubeconfig, "--listen", "127.0.0.1:0", "--addr-file", addr,
                 "--read-auth", "kubernetes", "--tls-cert", cert_, "--tls-key", key},
                log);
  ASSERT_TRUE(wait_for([&] { return std::filesystem::exists(addr); }, 30)) << log;
  std::string where;
  std::ifstream(addr) >> where;
  port_ = std::stoi(where.substr(where.rfind(':') + 1));
  create_group("team-a", "train", 2);
  for (int i = 0; i < 2; ++i) create_pod("team-a", "train-" + std::to_string(i), 4, "train");
  create_group("team-b", "tune", 1);
  create_pod("team-b", "tune-0", 2, "tune");
  ASSERT_TRUE(wait_for([&] { return binds_by_pod().size() == 3; }, 60)) << log;
  {
    std::ifstream in(log);
    const std::string said((std::istreambuf_iterator<char>(in)), {});
    EXPECT_NE(said.find("read API on https://"), std::string::npos) << said;
    EXPECT_NE(said.find("(Kubernetes tokens and RBAC)"), std::string::npos) << said;
  }
  // Plain HTTP to the TLS port gets nothing.
  EXPECT_FALSE(httplib::Client("127.0.0.1", port_).Get("/healthz"));

  // The probes and what the dashboard asks first stay open; the rest wants a token.
  EXPECT_EQ(status("/healthz", ""), 200);
  EXPECT_EQ(status("/readyz", ""), 200);
  auto info = get("/v1/info", "");
  ASSERT_TRUE(info && info->status == 200);
  EXPECT_TRUE(json::parse(info->body).value("token_required", false)) << info->body;
  for (const char* path : {"/v1/jobs", "/v1/queues", "/metrics", "/v1/whoami"}) {
    auto r = get(path, "");
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 401) << path << ": " << r->body;
    EXPECT_NE(r->get_header_value("WWW-Authenticate").find("Bearer"), std::string::npos) << path;
    EXPECT_NE(r->body.find("kubectl create token"), std::string::npos) << r->body;
  }
  // A token the API server never issued, or one cut short, is refused.
  EXPECT_EQ(status("/v1/jobs", "not-a-token"), 401);
  EXPECT_EQ(status("/v1/jobs", ops.substr(0, ops.size() - 4)), 401);

  // Jobs: each caller sees the namespaces whose pods it may list.
  EXPECT_EQ(jobs_seen(alice), (std::set<std::string>{"team-a/train"}));
  EXPECT_EQ(jobs_seen(bob), std::set<std::string>{});
  EXPECT_EQ(jobs_seen(prom), std::set<std::string>{});
  EXPECT_EQ(jobs_seen(ops), (std::set<std::string>{"team-a/train", "team-b/tune"}));
  // Another namespace's job is not found (its id is no secret; its existence is).
  int64_t tune_id = 0;
  const json all = json::parse(get("/v1/jobs", ops)->body);
  for (const json& j : all["jobs"]) {
    if (j["name"] == "team-b/tune") tune_id = j["id"];
  }
  ASSERT_GT(tune_id, 0);
  const std::string tune = "/v1/jobs/" + std::to_string(tune_id);
  EXPECT_EQ(status(tune, alice), 404);
  EXPECT_EQ(status(tune, ops), 200);
  // The cluster-wide views: tessera-viewer's holders only, and the refusal says what to grant.
  for (const char* path : {"/metrics", "/v1/queues", "/v1/nodes", "/v1/history"}) {
    EXPECT_EQ(status(path, prom), 200) << path;
    EXPECT_EQ(status(path, ops), 200) << path;
    auto r = get(path, alice);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 403) << path << ": " << r->body;
    EXPECT_NE(r->body.find("tessera-viewer"), std::string::npos) << r->body;
  }
  auto me = get("/v1/whoami", ops);
  ASSERT_TRUE(me && me->status == 200);
  EXPECT_EQ(json::parse(me->body)["user"], "system:serviceaccount:tessera-system:ops");
  EXPECT_TRUE(json::parse(me->body)["admin"].get<bool>());
  EXPECT_FALSE(json::parse(get("/v1/whoami", alice)->body)["admin"].get<bool>());

  // The command line, with alice's token: her namespace's job only.
  const std::string out = (dir_ / "jobs.json").string();
  const std::string cli = "TESSERA_CA=" + cert_ + " " + TESSERA_BINARY +
                          " jobs --json --addr https://" + where + " --token " + alice + " > " +
                          out + " 2>&1";
  const int rc = std::system(cli.c_str());
  std::ifstream in(out);
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  ASSERT_EQ(rc, 0) << text;
  const json listed = json::parse(text, nullptr, false);
  ASSERT_TRUE(listed.is_array() && listed.size() == 1) << text;
  EXPECT_EQ(listed[0]["name"], "team-a/train");

  // What the scheduler asked, as the audit log has it: with its own ServiceAccount, never
  // refused, and each token reviewed once (the answers are cached; the refused ones for
  // seconds, the rest for minutes).
  const std::string sa = "system:serviceaccount:tessera-system:tessera-scheduler";
  int token_reviews = 0, access_reviews = 0;
  for (const json& e : real_->audit()) {
    if (e["user"].value("username", "") != sa) continue;
    const std::string resource = e.value("objectRef", json::object()).value("resource", "");
    if (resource != "tokenreviews" && resource != "subjectaccessreviews") continue;
    EXPECT_EQ(e["responseStatus"].value("code", 0), 201) << e.dump();
    ++(resource == "tokenreviews" ? token_reviews : access_reviews);
  }
  // alice (twice: the CLI too), bob, ops, prom and the two bad tokens: one review each.
  EXPECT_EQ(token_reviews, 6);
  EXPECT_GT(access_reviews, 0);
}

}  // namespace
}  // namespace tessera::kube
