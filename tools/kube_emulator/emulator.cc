#include "kube_emulator/emulator.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <httplib.h>
#include <netinet/in.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>

#include <csignal>
#include <cstdlib>
#include <stdexcept>

#include "kube_emulator/persistence.h"
#include "kube_emulator/pods.h"
#include "kube_emulator/router.h"

namespace kube_emulator {

namespace {

// httplib keeps the listening socket protected; the backlog it uses (5) is too small for
// benchmarks that open many connections at once, so it is raised after bind.
template <class Base>
struct Listener : Base {
  using Base::Base;
  int listen_fd() const { return static_cast<int>(this->svr_sock_.load()); }
};

int port_of(const sockaddr_storage& a) {
  if (a.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(a).sin_port);
  if (a.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6&>(a).sin6_port);
  return -1;
}

bool ports_of(int fd, int& local, int& remote) {
  sockaddr_storage a{}, b{};
  socklen_t la = sizeof a, lb = sizeof b;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&a), &la) != 0) return false;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&b), &lb) != 0) return false;
  local = port_of(a);
  remote = port_of(b);
  return true;
}

// The accepted sockets of this server: httplib does not expose them, so they are found by
// their ports among the process's descriptors.
std::vector<int> server_sockets(int local_port, int remote_port) {
  std::vector<int> out;
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    const int fd = std::atoi(e->d_name);
    int l = 0, r = 0;
    if (ports_of(fd, l, r) && l == local_port && (remote_port < 0 || r == remote_port)) {
      out.push_back(fd);
    }
  }
  closedir(d);
  return out;
}

bool socket_alive(int fd, int local_port, int remote_port) {
  int l = 0, r = 0;
  if (!ports_of(fd, l, r) || l != local_port || r != remote_port) return false;
  pollfd p{fd, POLLRDHUP, 0};
  if (poll(&p, 1, 0) < 0) return true;
  return (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) == 0;
}

std::string url_decode(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      out += static_cast<char>(std::strtol(s.substr(i + 1, 2).c_str(), nullptr, 16));
      i += 2;
    } else if (s[i] == '+') {
      out += ' ';
    } else {
      out += s[i];
    }
  }
  return out;
}

void use_pem(SSL_CTX& ctx, const PemPair& pair) {
  BIO* cb = BIO_new_mem_buf(pair.cert.data(), static_cast<int>(pair.cert.size()));
  X509* cert = PEM_read_bio_X509(cb, nullptr, nullptr, nullptr);
  BIO_free(cb);
  BIO* kb = BIO_new_mem_buf(pair.key.data(), static_cast<int>(pair.key.size()));
  EVP_PKEY* key = PEM_read_bio_PrivateKey(kb, nullptr, nullptr, nullptr);
  BIO_free(kb);
  SSL_CTX_use_certificate(&ctx, cert);
  SSL_CTX_use_PrivateKey(&ctx, key);
  X509_free(cert);
  EVP_PKEY_free(key);
}

}  // namespace

struct Emulator::Http {
  std::unique_ptr<httplib::Server> server;
  std::function<int()> listen_fd;
};

Emulator::Emulator(Options opt) : opt_(std::move(opt)) {
  ClusterOptions co;
  co.history = opt_.history;
  co.seed = opt_.seed;
  co.binding_log_file = opt_.binding_log_file;
  cluster_ = std::make_unique<Cluster>(co);
  kubelet_ = std::make_unique<Kubelet>(*cluster_, opt_.kubelet);
  RouterOptions ro;
  ro.bookmark_interval = opt_.bookmark_interval;
  ro.watch_timeout = opt_.watch_timeout;
  ro.watch_expired_as_http_410 = opt_.watch_expired_as_http_410;
  router_ = std::make_unique<Router>(*cluster_, ro, opt_.seed);
  router_->hooks = [this](const ApiRequest& req) -> ApiResponse {
    const std::string& p = req.path;
    const json body = req.body.empty() ? json::object() : json::parse(req.body, nullptr, false);
    if (req.method == "GET" && p == "/emulator/bindings") {
      json out = json::array();
      for (const auto& b : bindings()) out.push_back(b.to_json());
      return json_response(200, out);
    }
    if (req.method == "GET" && p == "/emulator/stats") {
      json s = stats();
      s["openWatches"] = open_watches();
      return json_response(200, s);
    }
    if (req.method != "POST" || body.is_discarded()) {
      return json_response(404, status_failure(404, "NotFound", "no such emulator hook"));
    }
    if (p == "/emulator/drop-watches") {
      drop_watches();
      return json_response(200, status_success());
    }
    if (p == "/emulator/compact") {
      compact();
      return json_response(200, status_success());
    }
    if (p == "/emulator/save") {
      save_state();
      return json_response(200, status_success());
    }
    if (p == "/emulator/bind-faults") {
      BindFault f;
      f.pod = body.value("pod", "");
      f.node = body.value("node", "");
      f.count = body.value("count", 1);
      f.code = body.value("code", 500);
      f.message = body.value("message", "");
      add_bind_fault(f);
      return json_response(200, status_success());
    }
    if (p == "/emulator/nodes") {
      NodePool pool;
      pool.count = body.value("count", 1);
      pool.gpus = body.value("gpus", pool.gpus);
      pool.product = body.value("product", pool.product);
      pool.cpu = body.value("cpu", pool.cpu);
      pool.memory = body.value("memory", pool.memory);
      add_nodes({pool});
      return json_response(200, status_success());
    }
    const std::string prefix = "/emulator/nodes/";
    if (starts_with(p, prefix) && p.size() > prefix.size() + 6 && p.ends_with("/ready")) {
      const std::string node = p.substr(prefix.size(), p.size() - prefix.size() - 6);
      std::string status = req.param("status");
      if (status.empty()) status = body.value("status", "True");
      if (status != "True" && status != "False" && status != "Unknown") {
        return json_response(
            400, status_failure(400, "BadRequest", "status must be True, False or Unknown"));
      }
      if (!set_node_ready(node, status)) {
        return json_response(
            404,
            status_failure(404, "NotFound", "nodes \"" + node + "\" not found", node, "nodes"));
      }
      return json_response(200, status_success());
    }
    return json_response(404, status_failure(404, "NotFound", "no such emulator hook"));
  };
}

Emulator::~Emulator() {
  stop();
}

std::string Emulator::url() const {
  return std::string(tls_ ? "https://" : "http://") + opt_.host + ":" + std::to_string(port_);
}

void Emulator::start() {
  if (started_) return;
  std::signal(SIGPIPE, SIG_IGN);
  stopping_ = false;
  bool loaded = false;
  if (!opt_.state_file.empty()) loaded = load_state(*cluster_, opt_.state_file);
  {
    std::lock_guard<std::mutex> lock(cluster_->store().mutex());
    node_count_ = static_cast<int>(cluster_->store().collection("/nodes").items.size());
  }
  if (!loaded || node_count_ == 0) add_nodes(opt_.nodes);
  kubelet_->start();

  tls_ = opt_.generate_tls || !opt_.tls_cert_file.empty();
  if (opt_.generate_tls && !pki_) pki_ = std::make_unique<Pki>(generate_pki());
  http_ = std::make_unique<Http>();
  if (tls_) {
    auto s = std::make_unique<Listener<httplib::SSLServer>>([this](SSL_CTX& ctx) {
      SSL_CTX_set_min_proto_version(&ctx, TLS1_2_VERSION);
      if (pki_) {
        use_pem(ctx, pki_->server);
        X509_STORE* store = SSL_CTX_get_cert_store(&ctx);
        BIO* b = BIO_new_mem_buf(pki_->ca.cert.data(), static_cast<int>(pki_->ca.cert.size()));
        X509* ca = PEM_read_bio_X509(b, nullptr, nullptr, nullptr);
        BIO_free(b);
        X509_STORE_add_cert(store, ca);
        SSL_CTX_add_client_CA(&ctx, ca);
        X509_free(ca);
        SSL_CTX_set_verify(&ctx, SSL_VERIFY_PEER, nullptr);
      } else {
        if (SSL_CTX_use_certificate_chain_file(&ctx, opt_.tls_cert_file.c_str()) != 1 ||
            SSL_CTX_use_PrivateKey_file(&ctx, opt_.tls_key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
          return false;
        }
      }
      if (!opt_.client_ca_file.empty()) {
        if (SSL_CTX_load_verify_locations(&ctx, opt_.client_ca_file.c_str(), nullptr) != 1) {
          return false;
        }
        SSL_CTX_set_client_CA_list(&ctx, SSL_load_client_CA_file(opt_.client_ca_file.c_str()));
        SSL_CTX_set_verify(&ctx, SSL_VERIFY_PEER, nullptr);
      }
      return true;
    });
    if (!s->is_valid())
      throw std::runtime_error("kube-emulator: cannot set up TLS (certificate or key)");
    auto* raw = s.get();
    http_->listen_fd = [raw] { return raw->listen_fd(); };
    http_->server = std::move(s);
  } else {
    auto s = std::make_unique<Listener<httplib::Server>>();
    auto* raw = s.get();
    http_->listen_fd = [raw] { return raw->listen_fd(); };
    http_->server = std::move(s);
  }
  serve_http();
  started_ = true;
  if (!opt_.state_file.empty()) {
    persist_thread_ = std::thread([this] { persist_loop(); });
  }
}

void Emulator::serve_http() {
  httplib::Server& svr = *http_->server;
  const int threads = std::max(4, opt_.threads);
  svr.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  svr.set_keep_alive_max_count(1000000);
  svr.set_keep_alive_timeout(30);
  svr.set_read_timeout(60);
  svr.set_write_timeout(30);
  svr.set_tcp_nodelay(true);
  svr.set_payload_max_length(size_t{256} << 20);
  const bool auth = !opt_.tokens.empty() || !opt_.client_ca_file.empty() || opt_.generate_tls;
  const auto handler = [this, auth](const httplib::Request& req, httplib::Response& res) {
    if (auth && req.path != "/healthz" && req.path != "/livez" && req.path != "/readyz" &&
        req.path != "/version" && !starts_with(req.path, "/emulator/")) {
      bool ok = false;
      const std::string h = req.get_header_value("Authorization");
      if (starts_with(h, "Bearer ")) {
        const std::string token = h.substr(7);
        for (const auto& t : opt_.tokens) ok = ok || t == token;
      }
      if (!ok && tls_) ok = !peer_common_name(req.ssl).empty();
      if (!ok) {
        res.status = 401;
        res.set_content(status_failure(401, "Unauthorized", "Unauthorized").dump(),
                        "application/json");
        return;
      }
    }
    ApiRequest ar;
    ar.method = req.method;
    ar.path = req.path;
    ar.params.insert(req.params.begin(), req.params.end());
    ar.content_type = req.get_header_value("Content-Type");
    ar.accept = req.get_header_value("Accept");
    ar.body = req.body;
    ApiResponse out = router_->handle(ar);
    if (!out.watch) {
      res.status = out.code;
      res.set_content(std::move(out.body), out.content_type);
      return;
    }
    // The real server does not compress watch streams; a gzip stream would hold events back.
    auto& mreq = const_cast<httplib::Request&>(req);
    for (auto it = mreq.headers.begin(); it != mreq.headers.end();) {
      it = (it->first == "Accept-Encoding" || it->first == "accept-encoding")
               ? mreq.headers.erase(it)
               : std::next(it);
    }
    int fd = -1;
    if (req.ssl != nullptr) fd = SSL_get_fd(req.ssl);
    if (fd < 0) {
      const auto fds = server_sockets(port_, req.remote_port);
      if (fds.size() == 1) fd = fds.front();
    }
    const int local = port_, remote = req.remote_port;
    auto plan = std::make_shared<WatchPlan>(std::move(*out.watch));
    res.status = 200;
    res.set_header("Cache-Control", "no-cache, private");
    res.set_chunked_content_provider(
        "application/json", [this, plan, fd, local, remote](size_t, httplib::DataSink& sink) {
          ++open_watches_;
          router_->run_watch(
              *plan, [&sink](const std::string& s) { return sink.write(s.data(), s.size()); },
              [fd, local, remote] { return fd < 0 || socket_alive(fd, local, remote); }, stopping_);
          --open_watches_;
          sink.done();
          return true;
        });
  };
  svr.Get(".*", handler);
  svr.Post(".*", handler);
  svr.Put(".*", handler);
  svr.Patch(".*", handler);
  svr.Delete(".*", handler);
  svr.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "internal error";
        try {
          if (ep) std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        }
        res.status = 500;
        res.set_content(status_failure(500, "InternalError", what).dump(), "application/json");
      });
  // Not httplib's SO_REUSEPORT: a second emulator on a busy port must fail, not share it.
  svr.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  port_ = opt_.port == 0 ? svr.bind_to_any_port(opt_.host)
                         : (svr.bind_to_port(opt_.host, opt_.port) ? opt_.port : -1);
  if (port_ <= 0) {
    throw std::runtime_error("kube-emulator: cannot listen on " + opt_.host + ":" +
                             std::to_string(opt_.port));
  }
  ::listen(http_->listen_fd(), 1024);
  router_->set_server_address(opt_.host + ":" + std::to_string(port_));
  listen_thread_ = std::thread([this] { http_->server->listen_after_bind(); });
  while (!http_->server->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

void Emulator::persist_loop() {
  std::unique_lock<std::mutex> lock(persist_mu_);
  while (!stopping_) {
    persist_cv_.wait_for(lock, opt_.state_interval);
    if (stopping_) break;
    if (cluster_->dirty()) {
      try {
        save_state();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "kube-emulator: %s\n", e.what());
      }
    }
  }
}

void Emulator::stop() {
  if (!started_) return;
  started_ = false;
  stopping_ = true;
  {
    std::lock_guard<std::mutex> lock(cluster_->store().mutex());
    cluster_->store().notify_all();
  }
  http_->server->stop();
  // Idle keep-alive connections would hold the worker pool until their timeout.
  for (const int fd : server_sockets(port_, -1)) ::shutdown(fd, SHUT_RDWR);
  if (listen_thread_.joinable()) listen_thread_.join();
  {
    std::lock_guard<std::mutex> lock(persist_mu_);
    persist_cv_.notify_all();
  }
  if (persist_thread_.joinable()) persist_thread_.join();
  kubelet_->stop();
  if (!opt_.state_file.empty()) save_state();
}

void Emulator::save_state() {
  if (!opt_.state_file.empty()) kube_emulator::save_state(*cluster_, opt_.state_file);
}

std::string Emulator::kubeconfig() const {
  std::string y = "apiVersion: v1\nkind: Config\nclusters:\n- name: tessera-emulator\n  cluster:\n";
  y += "    server: " + url() + "\n";
  if (pki_) {
    y += "    certificate-authority-data: " + base64_encode(pki_->ca.cert) + "\n";
  } else if (tls_) {
    y += "    insecure-skip-tls-verify: true\n";
  }
  y += "users:\n- name: tessera-admin\n  user:";
  std::string user;
  if (pki_) {
    user += "    client-certificate-data: " + base64_encode(pki_->client.cert) + "\n";
    user += "    client-key-data: " + base64_encode(pki_->client.key) + "\n";
  }
  if (!opt_.tokens.empty()) user += "    token: " + opt_.tokens.front() + "\n";
  y += user.empty() ? " {}\n" : "\n" + user;
  y += "contexts:\n- name: tessera-emulator\n  context:\n    cluster: tessera-emulator\n"
       "    user: tessera-admin\n    namespace: default\ncurrent-context: tessera-emulator\n";
  return y;
}

Reply Emulator::request(const std::string& method, const std::string& path_and_query,
                        const std::string& body, const std::string& content_type,
                        const std::string& accept) {
  ApiRequest ar;
  ar.method = method;
  const auto q = path_and_query.find('?');
  ar.path = path_and_query.substr(0, q);
  if (q != std::string::npos) {
    std::string query = path_and_query.substr(q + 1);
    size_t start = 0;
    while (start <= query.size()) {
      const auto amp = query.find('&', start);
      const std::string kv = query.substr(start, amp - start);
      if (!kv.empty()) {
        const auto eq = kv.find('=');
        ar.params.emplace(url_decode(kv.substr(0, eq)),
                          eq == std::string::npos ? "" : url_decode(kv.substr(eq + 1)));
      }
      if (amp == std::string::npos) break;
      start = amp + 1;
    }
  }
  ar.content_type = content_type;
  ar.accept = accept;
  ar.body = body;
  ApiResponse out = router_->handle(ar);
  if (out.watch) {
    return Reply{400, "application/json",
                 status_failure(400, "BadRequest", "watches are served over HTTP only").dump()};
  }
  return Reply{out.code, out.content_type, std::move(out.body)};
}

void Emulator::add_nodes(const std::vector<NodePool>& pools) {
  const ResourceInfo* nodes = cluster_->registry().find("", "v1", "nodes");
  for (json& n : make_nodes(pools, opt_.layout, node_count_)) {
    const Result r = cluster_->create(*nodes, "", std::move(n));
    if (!r.ok()) throw std::runtime_error("kube-emulator: cannot create a node: " + r.body.dump());
    ++node_count_;
  }
}

bool Emulator::set_node_ready(const std::string& node, const std::string& status) {
  const ResourceInfo* nodes = cluster_->registry().find("", "v1", "nodes");
  const Result cur = cluster_->get(*nodes, "", node);
  if (!cur.ok()) return false;
  json nw = cur.obj->j();
  const std::string reason = status == "True"    ? "KubeletReady"
                             : status == "False" ? "KubeletNotReady"
                                                 : "NodeStatusUnknown";
  const std::string message = status == "True"    ? "kubelet is posting ready status"
                              : status == "False" ? "container runtime network not ready"
                                                  : "Kubelet stopped posting node status.";
  set_condition(nw, "Ready", status, reason, message);
  nw["metadata"].erase("resourceVersion");
  return cluster_->update(*nodes, "", node, nw, true).ok();
}

void Emulator::drop_watches() {
  std::lock_guard<std::mutex> lock(cluster_->store().mutex());
  cluster_->store().drop_watches();
}

void Emulator::compact() {
  std::lock_guard<std::mutex> lock(cluster_->store().mutex());
  cluster_->store().compact();
}

uint64_t Emulator::resource_version() {
  std::lock_guard<std::mutex> lock(cluster_->store().mutex());
  return cluster_->store().rv();
}

}  // namespace kube_emulator
