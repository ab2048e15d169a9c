// TLS: a CA, a server certificate for 127.0.0.1 (and DNS "kubernetes") and a client certificate
// are made with the openssl CLI; the server requires a client certificate from that CA.
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "backend/kube/kube_client.h"
#include "backend/kube/kube_config.h"
#include "kube_client/test_server.h"

namespace tessera::kube {
namespace {

using testing::read_text;
using testing::TempDir;
using testing::TestServer;

class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    std::string d = dir_->path().string();
    const std::string key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    std::string script =
        "set -e; cd '" + d + "'\n" + "openssl req -x509 " + key +
        " -keyout ca.key -out ca.crt -days 2 -subj /CN=test-ca\n" + "openssl req -x509 " + key +
        " -keyout ca2.key -out ca2.crt -days 2 -subj /CN=other-ca\n" + "openssl req " + key +
        " -keyout server.key -out server.csr -subj /CN=127.0.0.1\n" +
        "printf 'subjectAltName=IP:127.0.0.1,DNS:kubernetes\\nextendedKeyUsage=serverAuth\\n' > "
        "server.ext\n"
        "openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out "
        "server.crt -days 2 -extfile server.ext\n" +
        "openssl req " + key +
        " -keyout client.key -out client.csr -subj "
        "/O=system:masters/CN=tessera\n" +
        "printf 'extendedKeyUsage=clientAuth\\n' > client.ext\n"
        "openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out "
        "client.crt -days 2 -extfile client.ext\n";
    dir_->write("gen.sh", script);
    ASSERT_EQ(std::system(("sh '" + dir_->file("gen.sh") + "' >/dev/null 2>&1").c_str()), 0);
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }

  void SetUp() override {
    auto svr = std::make_unique<httplib::SSLServer>(dir_->file("server.crt").c_str(),
                                                    dir_->file("server.key").c_str(),
                                                    dir_->file("ca.crt").c_str());
    ASSERT_TRUE(svr->is_valid());
    server_ = std::make_unique<TestServer>(std::move(svr));
    server_->svr().Get(
        "/api/v1/nodes", [this](const httplib::Request& req, httplib::Response& res) {
          if (req.ssl != nullptr) {
            if (X509* peer = SSL_get1_peer_certificate(req.ssl)) {
              char cn[256] = {0};
              X509_NAME_get_text_by_NID(X509_get_subject_name(peer), NID_commonName, cn, sizeof cn);
              peer_cn_ = cn;
              X509_free(peer);
            }
          }
          auth_ = req.get_header_value("Authorization");
          res.set_content(R"({"kind":"NodeList","items":[]})", "application/json");
        });
    server_->svr().Get("/api/v1/pods", [](const httplib::Request&, httplib::Response& res) {
      res.set_chunked_content_provider("application/json", [](size_t, httplib::DataSink& sink) {
        std::string ev = R"({"type":"ADDED","object":{"metadata":{"name":"a"}}})"
                         "\n";
        sink.write(ev.data(), ev.size());
        sink.done();
        return true;
      });
    });
    server_->start();
  }

  KubeConfig good() const {
    KubeConfig cfg;
    cfg.server = server_->https_url();
    cfg.ca_pem = read_text(dir_->file("ca.crt"));
    cfg.client_cert_pem = read_text(dir_->file("client.crt"));
    cfg.client_key_pem = read_text(dir_->file("client.key"));
    return cfg;
  }

  static TempDir* dir_;
  std::unique_ptr<TestServer> server_;
  std::string peer_cn_, auth_;
};

TempDir* TlsTest::dir_ = nullptr;

bool mentions_tls(const std::string& e) {
  ::testing::Test::RecordProperty("error", e);
  return e.find("TLS") != std::string::npos || e.find("certificate") != std::string::npos;
}

TEST_F(TlsTest, RightCaAndClientCert) {
  Client c(good());
  for (int i = 0; i < 3; ++i) {
    Response r = c.get("/api/v1/nodes");
    ASSERT_EQ(r.status, 200) << r.error;
  }
  EXPECT_EQ(peer_cn_, "tessera");
}

TEST_F(TlsTest, WrongCaFails) {
  KubeConfig cfg = good();
  cfg.ca_pem = read_text(dir_->file("ca2.crt"));
  Client c(cfg);
  Response r = c.get("/api/v1/nodes");
  EXPECT_EQ(r.status, 0);
  EXPECT_TRUE(mentions_tls(r.error)) << r.error;
  EXPECT_NE(r.error.find("certificate"), std::string::npos) << r.error;
}

TEST_F(TlsTest, NoClientCertFails) {
  KubeConfig cfg = good();
  cfg.client_cert_pem.clear();
  cfg.client_key_pem.clear();
  Client c(cfg);
  Response r = c.get("/api/v1/nodes");
  EXPECT_EQ(r.status, 0);
  EXPECT_TRUE(mentions_tls(r.error)) << r.error;
}

TEST_F(TlsTest, InsecureSkipVerify) {
  KubeConfig cfg = good();
  cfg.ca_pem = read_text(dir_->file("ca2.crt"));
  cfg.insecure_skip_tls_verify = true;
  Client c(cfg);
  Response r = c.get("/api/v1/nodes");
  EXPECT_EQ(r.status, 200) << r.error;
}

TEST_F(TlsTest, TlsServerName) {
  KubeConfig cfg = good();
  cfg.tls_server_name = "kubernetes";
  {
    Client c(cfg);
    Response r = c.get("/api/v1/nodes");
    EXPECT_EQ(r.status, 200) << r.error;
  }
  cfg.tls_server_name = "not-the-server";
  Client c(cfg);
  Response r = c.get("/api/v1/nodes");
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.error.find("mismatch"), std::string::npos) << r.error;
}

TEST_F(TlsTest, HostnameIsVerified) {
  KubeConfig cfg = good();
  cfg.server = "https://localhost:" + std::to_string(server_->port());  // not in the SANs
  Client c(cfg);
  Response r = c.get("/api/v1/nodes");
  EXPECT_EQ(r.status, 0);
  EXPECT_TRUE(mentions_tls(r.error)) << r.error;
}

TEST_F(TlsTest, KubeconfigEndToEndWithWatch) {
  auto b64file = [&](const std::string& name) {
    std::string out = dir_->file(name + ".b64");
    EXPECT_EQ(std::system(("base64 -w0 '" + dir_->file(name) + "' > '" + out + "'").c_str()), 0);
    return read_text(out);
  };
  std::string kc =
      "current-context: t\n"
      "clusters:\n- name: c\n  cluster:\n    server: " +
      server_->https_url() + "\n    certificate-authority-data: " + b64file("ca.crt") +
      "\nusers:\n- name: u\n  user:\n    token: tok\n"
      "    client-certificate: client.crt\n"
      "    client-key-data: " +
      b64file("client.key") + "\ncontexts:\n- name: t\n  context: {cluster: c, user: u}\n";
  std::string path = dir_->write("kc.yaml", kc);
  Client c(load_kubeconfig(path));
  Response r = c.get("/api/v1/nodes");
  ASSERT_EQ(r.status, 200) << r.error;
  EXPECT_EQ(auth_, "Bearer tok");
  std::atomic<bool> stop{false};
  std::vector<std::string> names;
  WatchEnd end = c.watch(
      "/api/v1/pods?watch=1",
      [&](const WatchEvent& ev) {
        names.push_back(ev.object["metadata"]["name"]);
        return true;
      },
      stop);
  EXPECT_EQ(end.status, 200);
  EXPECT_EQ(end.error, "");
  EXPECT_EQ(names, std::vector<std::string>{"a"});
}

TEST(TlsConfig, BadPemIsRejected) {
  KubeConfig cfg;
  cfg.server = "https://127.0.0.1:1";
  cfg.ca_pem = "-----BEGIN CERTIFICATE-----\nnope\n-----END CERTIFICATE-----\n";
  EXPECT_THROW(Client c(cfg), KubeConfigError);
  cfg.ca_pem.clear();
  cfg.client_cert_pem = "junk";
  cfg.client_key_pem = "junk";
  EXPECT_THROW(Client c(cfg), KubeConfigError);
}

}  // namespace
}  // namespace tessera::kube
