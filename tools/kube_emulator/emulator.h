// kube_emulator::Emulator: a Kubernetes API server emulator with a KWOK-style fake kubelet,
// for tests, benchmarks and demos of a Kubernetes scheduler. It serves the core/v1, apps,
// batch, coordination, events, policy, rbac, scheduling, apiextensions and PodGroup APIs
// over HTTP or HTTPS, with the real server's discovery, watch, paging, selector, patch and
// Status semantics (docs/kube-emulator.md says what is and is not emulated).
//
//   kube_emulator::Options opt;
//   opt.nodes = {{.count = 16, .gpus = 8}};
//   kube_emulator::Emulator emu(opt);
//   emu.start();                       // emu.port(), emu.url(), emu.kubeconfig()
//   auto r = emu.request("GET", "/api/v1/nodes");   // in-process, no socket
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kube_emulator/cluster.h"
#include "kube_emulator/kubelet.h"
#include "kube_emulator/nodes.h"
#include "kube_emulator/tls.h"

namespace kube_emulator {

struct Options {
  std::string host = "127.0.0.1";
  int port = 0;  // 0: any free port
  // HTTPS from PEM files, or from certificates generated in-process (generate_tls).
  std::string tls_cert_file, tls_key_file;
  std::string client_ca_file;  // accept client certificates signed by this CA
  bool generate_tls = false;   // CA + server + client certificate (client certs accepted)
  // Bearer tokens. When tokens are set, or client certificates are accepted, requests need a
  // valid token or a verified client certificate (else 401), except /healthz, /livez,
  // /readyz, /version and the /emulator/ hooks.
  std::vector<std::string> tokens;
  size_t history = 10000;  // change events per resource that watches can resume from
  std::chrono::milliseconds bookmark_interval{60000};
  std::chrono::seconds watch_timeout{0};  // 0: 30-60 min, jittered (min-request-timeout)
  // A watch from a too-old resourceVersion: in-stream ERROR 410 (the watch cache, default)
  // or an HTTP 410 answer (the etcd path).
  bool watch_expired_as_http_410 = false;
  KubeletOptions kubelet;
  std::vector<NodePool> nodes;  // created at start unless the state file has nodes
  NodeLayout layout;
  std::string state_file;  // load at start; save when dirty every state_interval and at stop
  std::chrono::milliseconds state_interval{5000};
  std::string binding_log_file;  // JSONL, appended
  uint64_t seed = 1;
  int threads = 256;  // HTTP worker threads: each open watch or keep-alive connection holds one
};

// An answer of Emulator::request.
struct Reply {
  int status = 0;
  std::string content_type;
  std::string body;
  json json_body() const { return json::parse(body, nullptr, false); }
};

class Router;

class Emulator {
 public:
  explicit Emulator(Options opt);
  ~Emulator();
  Emulator(const Emulator&) = delete;
  Emulator& operator=(const Emulator&) = delete;

  void start();  // throws std::runtime_error when the address cannot be bound
  void stop();   // idempotent; saves the state file
  int port() const { return port_; }
  bool tls() const { return tls_; }
  std::string url() const;  // http(s)://host:port
  // A kubeconfig (YAML) for this server: the generated CA and client certificate when
  // generate_tls, the first token when there is one; insecure-skip-tls-verify for TLS from
  // files without a CA.
  std::string kubeconfig() const;
  const Pki* pki() const { return pki_ ? pki_.get() : nullptr; }

  // --- test-facing API (in-process; no authentication) ---
  Reply request(const std::string& method, const std::string& path_and_query,
                const std::string& body = "", const std::string& content_type = "application/json",
                const std::string& accept = "application/json");
  void add_nodes(const std::vector<NodePool>& pools);  // numbered after the existing ones
  bool set_node_ready(const std::string& node, const std::string& status);  // True|False|Unknown
  std::vector<BindRecord> bindings() const { return cluster_->bindings(); }
  void add_bind_fault(const BindFault& f) { cluster_->add_bind_fault(f); }
  void drop_watches();
  void compact();
  uint64_t resource_version();
  json stats() const { return cluster_->stats(); }
  int open_watches() const { return open_watches_.load(); }
  void save_state();
  Cluster& cluster() { return *cluster_; }

 private:
  void serve_http();
  void persist_loop();

  Options opt_;
  std::unique_ptr<Cluster> cluster_;
  std::unique_ptr<Kubelet> kubelet_;
  std::unique_ptr<Router> router_;
  std::unique_ptr<Pki> pki_;
  struct Http;
  std::unique_ptr<Http> http_;
  bool tls_ = false;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> open_watches_{0};
  bool started_ = false;
  std::thread listen_thread_, persist_thread_;
  std::mutex persist_mu_;
  std::condition_variable persist_cv_;
  int node_count_ = 0;
};

}  // namespace kube_emulator
