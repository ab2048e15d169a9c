// Bearer tokens (401 without), TLS with generated certificates and client-certificate
// authentication, and the state file across a restart.
#include <unistd.h>

#include <fstream>
#include <set>

#include "kube_emulator/emulator_test_util.h"

namespace kube_emulator::testing {
namespace {

std::string write_temp(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name + "." + std::to_string(getpid());
  std::ofstream(path) << text;
  return path;
}

TEST(SecurityTest, TokensAreRequiredWhenConfigured) {
  Options o = small_options(1);
  o.tokens = {"s3cret"};
  Emulator emu(o);
  emu.start();
  httplib::Client c("127.0.0.1", emu.port());
  auto anon = c.Get("/api/v1/pods");
  ASSERT_TRUE(anon);
  EXPECT_EQ(anon->status, 401);
  EXPECT_EQ(json::parse(anon->body)["reason"], "Unauthorized");
  auto wrong = c.Get("/api/v1/pods", {{"Authorization", "Bearer nope"}});
  EXPECT_EQ(wrong->status, 401);
  auto ok = c.Get("/api/v1/pods", {{"Authorization", "Bearer s3cret"}});
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(c.Get("/version")->status, 200);
  EXPECT_NE(emu.kubeconfig().find("token: s3cret"), std::string::npos);
}

TEST(SecurityTest, TlsWithGeneratedCertificatesAndClientCertificates) {
  Options o = small_options(1);
  o.generate_tls = true;
  Emulator emu(o);
  emu.start();
  ASSERT_TRUE(emu.tls());
  ASSERT_NE(emu.pki(), nullptr);
  const std::string ca = write_temp("emu_ca.pem", emu.pki()->ca.cert);
  const std::string cert = write_temp("emu_client.pem", emu.pki()->client.cert);
  const std::string key = write_temp("emu_client.key", emu.pki()->client.key);
  {
    httplib::SSLClient c("127.0.0.1", emu.port(), cert, key);
    c.set_ca_cert_path(ca.c_str());
    c.enable_server_certificate_verification(true);
    auto r = c.Get("/api/v1/nodes");
    ASSERT_TRUE(r) << httplib::to_string(r.error());
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(json::parse(r->body)["items"].size(), 1u);
  }
  {
    httplib::SSLClient c("127.0.0.1", emu.port());  // no client certificate, no token
    c.set_ca_cert_path(ca.c_str());
    c.enable_server_certificate_verification(true);
    auto r = c.Get("/api/v1/nodes");
    ASSERT_TRUE(r) << httplib::to_string(r.error());
    EXPECT_EQ(r->status, 401);
  }
  const std::string kc = emu.kubeconfig();
  EXPECT_NE(kc.find("certificate-authority-data: "), std::string::npos);
  EXPECT_NE(kc.find("client-certificate-data: "), std::string::npos);
  EXPECT_NE(kc.find("client-key-data: "), std::string::npos);
  EXPECT_NE(kc.find("server: https://127.0.0.1:"), std::string::npos);
}

TEST(SecurityTest, StateSurvivesARestartAndOldResourceVersionsExpire) {
  const std::string state =
      ::testing::TempDir() + "emu_state_" + std::to_string(getpid()) + ".json";
  std::remove(state.c_str());
  Options o = small_options(2);
  o.state_file = state;
  std::string rv_before, uid;
  {
    Emulator emu(o);
    emu.start();
    Http http(emu.port());
    auto p = http.post("/api/v1/namespaces/default/pods", pod_json("keep", "2"));
    ASSERT_EQ(p.status, 201);
    uid = p.body["metadata"]["uid"];
    ASSERT_EQ(http.post("/api/v1/namespaces/default/pods/keep/binding",
                        binding_json("keep", "gpu-node-0001"))
                  .status,
              201);
    ASSERT_TRUE(eventually([&] {
      return http.get("/api/v1/namespaces/default/pods/keep").body["status"]["phase"] == "Running";
    }));
    rv_before = http.get("/api/v1/pods").body["metadata"]["resourceVersion"];
    emu.stop();
  }
  Emulator emu(o);
  emu.start();
  Http http(emu.port());
  auto p = http.get("/api/v1/namespaces/default/pods/keep");
  ASSERT_EQ(p.status, 200);
  EXPECT_EQ(p.body["metadata"]["uid"], uid);
  EXPECT_EQ(p.body["status"]["phase"], "Running");
  EXPECT_EQ(http.get("/api/v1/nodes").body["items"].size(), 2u);  // not created twice
  auto c = http.post("/api/v1/namespaces/default/configmaps", {{"metadata", {{"name", "c"}}}});
  EXPECT_GT(std::stoull(c.body["metadata"]["resourceVersion"].get<std::string>()),
            std::stoull(rv_before));
  WatchReader w(emu.port(), "/api/v1/pods?watch=1&resourceVersion=" +
                                std::to_string(std::stoull(rv_before) - 1));
  auto e = w.next();
  ASSERT_TRUE(e);
  EXPECT_EQ((*e)["type"], "ERROR");
  EXPECT_EQ((*e)["object"]["code"], 410);
  WatchReader fresh(emu.port(), "/api/v1/pods?watch=1&resourceVersion=" + rv_before);
  http.post("/api/v1/namespaces/default/pods", pod_json("new"));
  auto n = fresh.next_change();
  ASSERT_TRUE(n);
  EXPECT_EQ((*n)["type"], "ADDED");
  std::remove(state.c_str());
}

// Clients key their caches by uid: a restarted server (same seed, same state) must never hand
// out a uid that the earlier run gave to an object.
TEST(SecurityTest, ARestartedServerNeverReusesAUid) {
  const std::string state = ::testing::TempDir() + "emu_uids_" + std::to_string(getpid()) + ".json";
  std::remove(state.c_str());
  Options o = small_options(2);
  o.state_file = state;
  std::set<std::string> before;  // every uid of the first run
  {
    Emulator emu(o);
    emu.start();
    Http http(emu.port());
    for (int i = 0; i < 20; ++i) {
      auto p = http.post("/api/v1/namespaces/default/pods", pod_json("p" + std::to_string(i)));
      ASSERT_EQ(p.status, 201);
    }
    for (const char* kind : {"/api/v1/pods", "/api/v1/nodes", "/api/v1/namespaces"}) {
      const auto list = http.get(kind);
      for (const auto& item : list.body["items"]) before.insert(item["metadata"]["uid"]);
    }
    emu.stop();
  }
  ASSERT_GE(before.size(), 22u);
  Emulator emu(o);
  emu.start();
  Http http(emu.port());
  for (int i = 0; i < 20; ++i) {
    auto q = http.post("/api/v1/namespaces/default/pods", pod_json("q" + std::to_string(i)));
    ASSERT_EQ(q.status, 201);
    EXPECT_EQ(before.count(q.body["metadata"]["uid"]), 0u) << "q" << i;
  }
  emu.stop();
  std::remove(state.c_str());
}

// A second emulator on a port in use must fail to start, not share the port (httplib's
// default SO_REUSEPORT would let it, and requests would split between the two).
TEST(SecurityTest, ASecondServerOnAPortInUseDoesNotStart) {
  Emulator first(small_options(1));
  first.start();
  Options o = small_options(1);
  o.port = first.port();
  Emulator second(o);
  EXPECT_THROW(second.start(), std::runtime_error);
}

}  // namespace
}  // namespace kube_emulator::testing
