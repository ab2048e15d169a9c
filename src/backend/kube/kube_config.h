// Where the Kubernetes API server is and how to authenticate to it: from a kubeconfig file or
// from inside a pod (in-cluster config), as client-go does.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>

namespace tessera::kube {

// A bearer token, either fixed or read from a file and re-read every `refresh` (projected
// service-account tokens are rotated, so client-go re-reads the file instead of caching it).
class TokenSource {
 public:
  static std::shared_ptr<TokenSource> fixed(std::string token);
  static std::shared_ptr<TokenSource> file(std::string path,
                                           std::chrono::seconds refresh = std::chrono::seconds(60));
  // The current token ("" when none). Throws KubeConfigError naming the file when it cannot
  // be read the first time; keeps the last good token on a later read failure.
  std::string token();

 private:
  std::mutex mu_;
  std::string token_, path_;
  std::chrono::seconds refresh_{0};
  std::chrono::steady_clock::time_point read_at_{};
};

struct KubeConfig {
  std::string server;                  // "https://host:port" or "http://host:port"
  std::shared_ptr<TokenSource> token;  // null: no bearer token
  std::string ca_pem;                  // PEM bundle to verify the server; empty: system CAs
  bool insecure_skip_tls_verify = false;
  std::string client_cert_pem, client_key_pem;  // client certificate auth (both or neither)
  std::string tls_server_name;                  // SNI / name to verify, when not the host
  std::string namespace_name = "default";       // the context's namespace
  std::string source;  // where it came from ("kubeconfig FILE context C", "in-cluster")
};

struct KubeConfigError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Reads a kubeconfig (YAML). `context` empty: current-context. Supports cluster `server`,
// `certificate-authority` (file) / `certificate-authority-data` (base64),
// `insecure-skip-tls-verify`, `tls-server-name`; user `token`, `tokenFile`,
// `client-certificate(-data)`, `client-key(-data)`; context `namespace`. Relative file paths
// are relative to the kubeconfig's folder. Throws KubeConfigError naming the file and the
// field (e.g. "kc.yaml: users[0].user.client-key-data: not valid base64").
KubeConfig load_kubeconfig(const std::string& path, const std::string& context = "");

// In-cluster config: KUBERNETES_SERVICE_HOST / KUBERNETES_SERVICE_PORT, the service-account
// token (re-read from its file), ca.crt and namespace under `sa_dir`. Throws KubeConfigError
// naming what is missing.
KubeConfig in_cluster_config(
    const std::string& sa_dir = "/var/run/secrets/kubernetes.io/serviceaccount");

}  // namespace tessera::kube
