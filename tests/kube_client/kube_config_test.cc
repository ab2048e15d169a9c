#include "backend/kube/kube_config.h"

#include <cstdlib>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "kube_client/test_server.h"

namespace tessera::kube {
namespace {

using testing::TempDir;

const char* kPem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
const char* kKeyPem = "-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----\n";

std::string b64(const std::string& s) {
  static const char* t = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < s.size(); i += 3) {
    unsigned v = (static_cast<unsigned char>(s[i]) << 16) |
                 (static_cast<unsigned char>(s[i + 1]) << 8) | static_cast<unsigned char>(s[i + 2]);
    out += {t[(v >> 18) & 63], t[(v >> 12) & 63], t[(v >> 6) & 63], t[v & 63]};
  }
  if (i + 1 == s.size()) {
    unsigned v = static_cast<unsigned char>(s[i]) << 16;
    out += {t[(v >> 18) & 63], t[(v >> 12) & 63], '=', '='};
  } else if (i + 2 == s.size()) {
    unsigned v =
        (static_cast<unsigned char>(s[i]) << 16) | (static_cast<unsigned char>(s[i + 1]) << 8);
    out += {t[(v >> 18) & 63], t[(v >> 12) & 63], t[(v >> 6) & 63], '='};
  }
  return out;
}

std::string error_of(const std::string& path, const std::string& context = "") {
  try {
    load_kubeconfig(path, context);
  } catch (const KubeConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

std::string two_contexts(const TempDir& dir) {
  dir.write("ca.crt", kPem);
  dir.write("certs/client.crt", kPem);
  dir.write("certs/client.key", kKeyPem);
  dir.write("tok", "file-token\n");
  return "apiVersion: v1\n"
         "kind: Config\n"
         "current-context: a\n"
         "clusters:\n"
         "- name: c1\n"
         "  cluster:\n"
         "    server: https://10.0.0.1:6443/k8s/clusters/c1\n"
         "    certificate-authority-data: " +
         b64(kPem) +
         "\n"
         "    tls-server-name: kubernetes\n"
         "- name: c2\n"
         "  cluster:\n"
         "    server: https://c2.example:443\n"
         "    certificate-authority: ca.crt\n"
         "    insecure-skip-tls-verify: true\n"
         "users:\n"
         "- name: u1\n"
         "  user:\n"
         "    token: abc123\n"
         "    client-certificate-data: " +
         b64(kPem) +
         "\n"
         "    client-key-data: " +
         b64(kKeyPem) +
         "\n"
         "- name: u2\n"
         "  user:\n"
         "    tokenFile: tok\n"
         "    client-certificate: certs/client.crt\n"
         "    client-key: certs/client.key\n"
         "contexts:\n"
         "- name: a\n"
         "  context:\n"
         "    cluster: c1\n"
         "    user: u1\n"
         "    namespace: ml\n"
         "- name: b\n"
         "  context:\n"
         "    cluster: c2\n"
         "    user: u2\n";
}

TEST(KubeConfig, CurrentContextAllDataFields) {
  TempDir dir;
  std::string path = dir.write("kc.yaml", two_contexts(dir));
  KubeConfig cfg = load_kubeconfig(path);
  EXPECT_EQ(cfg.server, "https://10.0.0.1:6443/k8s/clusters/c1");
  EXPECT_EQ(cfg.ca_pem, kPem);
  EXPECT_EQ(cfg.tls_server_name, "kubernetes");
  EXPECT_FALSE(cfg.insecure_skip_tls_verify);
  ASSERT_TRUE(cfg.token);
  EXPECT_EQ(cfg.token->token(), "abc123");
  EXPECT_EQ(cfg.client_cert_pem, kPem);
  EXPECT_EQ(cfg.client_key_pem, kKeyPem);
  EXPECT_EQ(cfg.namespace_name, "ml");
  EXPECT_NE(cfg.source.find("context a"), std::string::npos);
}

TEST(KubeConfig, NamedContextRelativeFiles) {
  TempDir dir;
  std::string path = dir.write("kc.yaml", two_contexts(dir));
  KubeConfig cfg = load_kubeconfig(path, "b");
  EXPECT_EQ(cfg.server, "https://c2.example:443");
  EXPECT_EQ(cfg.ca_pem, kPem);
  EXPECT_TRUE(cfg.insecure_skip_tls_verify);
  EXPECT_EQ(cfg.tls_server_name, "");
  ASSERT_TRUE(cfg.token);
  EXPECT_EQ(cfg.token->token(), "file-token");  // trailing newline trimmed
  EXPECT_EQ(cfg.client_cert_pem, kPem);
  EXPECT_EQ(cfg.client_key_pem, kKeyPem);
  EXPECT_EQ(cfg.namespace_name, "default");
}

TEST(KubeConfig, NoUserMeansNoAuth) {
  TempDir dir;
  std::string path = dir.write("kc.yaml",
                               "current-context: x\n"
                               "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:8080'}}]\n"
                               "contexts: [{name: x, context: {cluster: c}}]\n");
  KubeConfig cfg = load_kubeconfig(path);
  EXPECT_EQ(cfg.server, "http://127.0.0.1:8080");
  EXPECT_FALSE(cfg.token);
  EXPECT_TRUE(cfg.client_cert_pem.empty());
}

TEST(KubeConfig, Errors) {
  TempDir dir;
  std::string path = dir.write("kc.yaml", two_contexts(dir));
  EXPECT_EQ(error_of(path, "foo"), path + ": contexts: no context \"foo\" (have: a, b)");

  std::string base = two_contexts(dir);
  auto variant = [&](const std::string& from, const std::string& to) {
    std::string text = base;
    auto at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
    return dir.write("v.yaml", text);
  };
  std::string v = variant("    user: u1\n", "    user: nobody\n");
  EXPECT_EQ(error_of(v), v + ": users: no user \"nobody\" (have: u1, u2)");
  v = variant("    cluster: c1\n", "    cluster: gone\n");
  EXPECT_EQ(error_of(v), v + ": clusters: no cluster \"gone\" (have: c1, c2)");
  v = variant("    client-key-data: ", "    client-key-data: '@@not base64'\n    x: ");
  EXPECT_EQ(error_of(v), v + ": users[0].user.client-key-data: not valid base64");
  v = variant("    certificate-authority-data: ",
              "    certificate-authority-data: aGVsbG8=\n    x: ");
  EXPECT_EQ(error_of(v), v + ": clusters[0].cluster.certificate-authority-data: not PEM data");
  v = variant("    certificate-authority: ca.crt\n", "    certificate-authority: missing.crt\n");
  std::string e = error_of(v, "b");
  EXPECT_EQ(e.find(v + ": clusters[1].cluster.certificate-authority: cannot read \""), 0u) << e;
  EXPECT_NE(e.find("missing.crt"), std::string::npos) << e;
  v = variant("    tokenFile: tok\n", "    tokenFile: nofile\n");
  e = error_of(v, "b");
  EXPECT_EQ(e.find(v + ": users[1].user.tokenFile: "), 0u) << e;
  EXPECT_NE(e.find("nofile"), std::string::npos) << e;
  v = variant("    token: abc123\n", "    exec:\n      command: aws\n");
  e = error_of(v);
  EXPECT_EQ(e.find(v + ": users[0].user.exec: exec credential plugins are not supported"), 0u) << e;
  v = variant("    token: abc123\n", "    auth-provider:\n      name: gcp\n");
  e = error_of(v);
  EXPECT_EQ(e.find(v + ": users[0].user.auth-provider: "), 0u) << e;
  EXPECT_NE(e.find("not supported"), std::string::npos) << e;
  v = variant("    server: https://10.0.0.1:6443/k8s/clusters/c1\n", "");
  EXPECT_EQ(error_of(v), v + ": clusters[0].cluster.server: missing");
  v = variant("current-context: a\n", "");
  EXPECT_EQ(error_of(v), v + ": current-context: not set and no context was named");
  v = variant("    client-certificate: certs/client.crt\n", "");
  EXPECT_EQ(error_of(v, "b"), v + ": users[1].user.client-certificate: missing (a client "
                                  "certificate needs both certificate and key)");

  std::string bad = dir.write("bad.yaml", "clusters: [\n");
  EXPECT_EQ(error_of(bad).find(bad + ": invalid YAML"), 0u);
  EXPECT_EQ(error_of(dir.file("none.yaml")).find(dir.file("none.yaml") + ": cannot read"), 0u);
}

class EnvGuard {
 public:
  EnvGuard(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    if (value) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~EnvGuard() {
    if (had_) {
      setenv(name_.c_str(), old_.c_str(), 1);
    } else {
      unsetenv(name_.c_str());
    }
  }

 private:
  std::string name_, old_;
  bool had_ = false;
};

TEST(InClusterConfig, ReadsServiceAccount) {
  TempDir dir;
  dir.write("sa/token", "tok-1\n");
  dir.write("sa/ca.crt", kPem);
  dir.write("sa/namespace", "tessera-system\n");
  EnvGuard h("KUBERNETES_SERVICE_HOST", "10.96.0.1");
  EnvGuard p("KUBERNETES_SERVICE_PORT", "443");
  KubeConfig cfg = in_cluster_config(dir.file("sa"));
  EXPECT_EQ(cfg.server, "https://10.96.0.1:443");
  EXPECT_EQ(cfg.ca_pem, kPem);
  EXPECT_EQ(cfg.namespace_name, "tessera-system");
  ASSERT_TRUE(cfg.token);
  EXPECT_EQ(cfg.token->token(), "tok-1");
  EXPECT_EQ(cfg.source, "in-cluster");
}

TEST(InClusterConfig, Ipv6HostAndDefaults) {
  TempDir dir;
  dir.write("sa/token", "t");
  dir.write("sa/ca.crt", kPem);
  EnvGuard h("KUBERNETES_SERVICE_HOST", "fd00::1");
  EnvGuard p("KUBERNETES_SERVICE_PORT", "6443");
  KubeConfig cfg = in_cluster_config(dir.file("sa"));
  EXPECT_EQ(cfg.server, "https://[fd00::1]:6443");
  EXPECT_EQ(cfg.namespace_name, "default");
}

TEST(InClusterConfig, ErrorsNameWhatIsMissing) {
  TempDir dir;
  auto err = [&] {
    try {
      in_cluster_config(dir.file("sa"));
    } catch (const KubeConfigError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  {
    EnvGuard h("KUBERNETES_SERVICE_HOST", nullptr);
    EnvGuard p("KUBERNETES_SERVICE_PORT", "443");
    EXPECT_NE(err().find("KUBERNETES_SERVICE_HOST"), std::string::npos);
  }
  EnvGuard h("KUBERNETES_SERVICE_HOST", "10.0.0.1");
  EnvGuard p("KUBERNETES_SERVICE_PORT", "443");
  EXPECT_NE(err().find(dir.file("sa/token")), std::string::npos) << err();
  dir.write("sa/token", "t");
  EXPECT_NE(err().find(dir.file("sa/ca.crt")), std::string::npos) << err();
}

TEST(TokenSource, FileIsReReadAfterRefresh) {
  TempDir dir;
  std::string path = dir.write("token", "first\n");
  auto every_time = TokenSource::file(path, std::chrono::seconds(0));
  auto hourly = TokenSource::file(path, std::chrono::seconds(3600));
  EXPECT_EQ(every_time->token(), "first");
  EXPECT_EQ(hourly->token(), "first");
  dir.write("token", "second");
  EXPECT_EQ(every_time->token(), "second");
  EXPECT_EQ(hourly->token(), "first");  // cached until the refresh period passes
  std::filesystem::remove(path);
  EXPECT_EQ(every_time->token(), "second");  // keeps the last good token
  EXPECT_THROW(TokenSource::file(dir.file("absent"))->token(), KubeConfigError);
  EXPECT_EQ(TokenSource::fixed("x")->token(), "x");
}

}  // namespace
}  // namespace tessera::kube
