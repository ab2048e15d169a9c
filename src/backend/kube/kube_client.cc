#include "backend/kube/kube_client.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <signal.h>

#include <algorithm>
#include <cctype>
#include <condition_variable>
#include <mutex>
#include <thread>

#include <httplib.h>

namespace tessera::kube {
namespace {

struct ServerUrl {
  bool https = true;
  std::string host;  // without brackets
  int port = 443;
  std::string prefix;  // "" or "/k8s/clusters/c1" (no trailing slash)
};

ServerUrl parse_server(const std::string& server) {
  auto fail = [&](const std::string& why) -> ServerUrl {
    throw KubeConfigError("server \"" + server + "\": " + why);
  };
  ServerUrl u;
  std::string rest;
  if (server.rfind("https://", 0) == 0) {
    rest = server.substr(8);
  } else if (server.rfind("http://", 0) == 0) {
    u.https = false;
    u.port = 80;
    rest = server.substr(7);
  } else {
    return fail("not an http:// or https:// URL");
  }
  auto slash = rest.find('/');
  std::string hostport = rest.substr(0, slash);
  if (slash != std::string::npos) {
    u.prefix = rest.substr(slash);
    while (!u.prefix.empty() && u.prefix.back() == '/') u.prefix.pop_back();
    if (u.prefix.find_first_of("?#") != std::string::npos) return fail("query not allowed");
  }
  std::string port_text;
  if (!hostport.empty() && hostport[0] == '[') {
    auto close = hostport.find(']');
    if (close == std::string::npos) return fail("unterminated [IPv6] host");
    u.host = hostport.substr(1, close - 1);
    std::string after = hostport.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') return fail("bad host:port");
      port_text = after.substr(1);
    }
  } else {
    auto colon = hostport.rfind(':');
    u.host = hostport.substr(0, colon);
    if (colon != std::string::npos) port_text = hostport.substr(colon + 1);
  }
  if (u.host.empty()) return fail("no host");
  if (!port_text.empty()) {
    int p = 0;
    for (char c : port_text) {
      if (c < '0' || c > '9' || p > 65535) return fail("bad port");
      p = p * 10 + (c - '0');
    }
    if (p <= 0 || p > 65535) return fail("bad port");
    u.port = p;
  }
  return u;
}

bool is_ip_literal(const std::string& host) {
  unsigned char buf[sizeof(in6_addr)];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

// The first address of `host` as text (the host itself when it is an IP literal or unresolvable).
std::string resolve_numeric(const std::string& host) {
  if (is_ip_literal(host)) return host;
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || res == nullptr) return host;
  char text[INET6_ADDRSTRLEN] = {0};
  if (res->ai_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr, text, sizeof text);
  } else if (res->ai_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(res->ai_addr)->sin6_addr, text,
              sizeof text);
  }
  freeaddrinfo(res);
  return text[0] != '\0' ? std::string(text) : host;
}

// The reason of the last failed certificate check on this thread (handshakes run on the
// calling thread), for error messages.
thread_local std::string t_verify_error;

int verify_callback(int ok, X509_STORE_CTX* ctx) {
  if (ok == 0) {
    t_verify_error = X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx));
  }
  return ok;
}

std::string openssl_errors() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out;
}

std::string describe_error(httplib::Error err, bool https) {
  std::string s;
  switch (err) {
    case httplib::Error::Connection:
      s = "connection failed (refused or unreachable)";
      break;
    case httplib::Error::ConnectionTimeout:
      s = "connect timed out";
      break;
    case httplib::Error::Read:
      s = "no response (connection closed or read timed out)";
      break;
    case httplib::Error::Write:
      s = "sending the request failed";
      break;
    case httplib::Error::Canceled:
      s = "canceled";
      break;
    case httplib::Error::SSLConnection:
      s = "TLS handshake failed";
      break;
    case httplib::Error::SSLLoadingCerts:
      s = "TLS: loading certificates failed";
      break;
    case httplib::Error::SSLServerVerification:
      s = "TLS server certificate verification failed";
      break;
    default:
      s = "request failed (" + httplib::to_string(err) + ")";
  }
  if (!t_verify_error.empty()) s += ": certificate verify failed: " + t_verify_error;
  std::string ssl = openssl_errors();
  if (!ssl.empty()) s += std::string(https ? ": TLS: " : ": ") + ssl;
  return s;
}

template <typename T, void (*F)(T*)>
struct Deleter {
  void operator()(T* p) const { F(p); }
};

const char* content_type_of(PatchType t) {
  switch (t) {
    case PatchType::kMerge:
      return "application/merge-patch+json";
    case PatchType::kStrategicMerge:
      return "application/strategic-merge-patch+json";
    case PatchType::kJsonPatch:
      return "application/json-patch+json";
  }
  return "application/merge-patch+json";
}

// The value of `key` in the query of `path`, "" when absent.
std::string query_value(const std::string& path, const std::string& key) {
  auto q = path.find('?');
  if (q == std::string::npos) return "";
  size_t i = q + 1;
  while (i < path.size()) {
    size_t amp = path.find('&', i);
    if (amp == std::string::npos) amp = path.size();
    std::string_view kv(path.data() + i, amp - i);
    if (kv.size() > key.size() && kv.substr(0, key.size()) == key && kv[key.size()] == '=') {
      return std::string(kv.substr(key.size() + 1));
    }
    i = amp + 1;
  }
  return "";
}

}  // namespace

// ---- Response ----

nlohmann::json Response::json() const {
  return nlohmann::json::parse(body, nullptr, false);
}

std::string Response::describe() const {
  if (status == 0) return "no answer: " + error;
  std::string s = "HTTP " + std::to_string(status);
  auto j = json();
  if (j.is_object()) {
    auto reason = j.value("reason", std::string());
    auto message = j.value("message", std::string());
    if (!reason.empty()) s += " " + reason;
    if (!message.empty()) s += ": " + message;
  } else if (!body.empty()) {
    s += ": " + body.substr(0, 200);
  }
  return s;
}

// ---- connection pool ----

struct Client::Pool {
  ServerUrl url;
  std::unique_ptr<X509_STORE, Deleter<X509_STORE, X509_STORE_free>> store;
  std::unique_ptr<X509, Deleter<X509, X509_free>> cert;
  std::vector<std::unique_ptr<X509, Deleter<X509, X509_free>>> chain;
  std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY, EVP_PKEY_free>> key;
  bool insecure = false;
  std::string verify_name;  // the name (or IP) the server certificate must carry
  std::string sni_name;     // tls-server-name, when set
  httplib::Headers base_headers;

  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::unique_ptr<httplib::ClientImpl>> idle;
  int open = 0;  // connections created and not discarded (idle + borrowed)
  int limit = 1;

  std::unique_ptr<httplib::ClientImpl> make(std::chrono::milliseconds connect_timeout,
                                            std::chrono::milliseconds read_timeout,
                                            bool keep_alive) const {
    std::unique_ptr<httplib::ClientImpl> c;
    if (url.https) {
      const std::string& host = sni_name.empty() ? url.host : sni_name;
      std::unique_ptr<httplib::SSLClient> s;
      if (cert) {
        s = std::make_unique<httplib::SSLClient>(host, url.port, cert.get(), key.get());
      } else {
        s = std::make_unique<httplib::SSLClient>(host, url.port);
      }
      SSL_CTX* ctx = s->ssl_context();
      if (ctx == nullptr || !s->is_valid()) {
        throw KubeConfigError("TLS: cannot set up the client certificate/key: " + openssl_errors());
      }
      for (const auto& extra : chain) SSL_CTX_add1_chain_cert(ctx, extra.get());
      // httplib's own check is replaced by OpenSSL's (CA bundle from memory, hostname/IP via
      // the verify param), so that a failure is reported during the handshake with a reason.
      s->enable_server_certificate_verification(false);
      if (insecure) {
        SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);
      } else {
        if (store) {
          X509_STORE_up_ref(store.get());
          SSL_CTX_set_cert_store(ctx, store.get());
        } else {
          SSL_CTX_set_default_verify_paths(ctx);
        }
        X509_VERIFY_PARAM* param = SSL_CTX_get0_param(ctx);
        if (is_ip_literal(verify_name)) {
          X509_VERIFY_PARAM_set1_ip_asc(param, verify_name.c_str());
        } else {
          X509_VERIFY_PARAM_set1_host(param, verify_name.c_str(), 0);
        }
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, verify_callback);
      }
      if (!sni_name.empty()) s->set_hostname_addr_map({{sni_name, resolve_numeric(url.host)}});
      c = std::move(s);
    } else {
      c = std::make_unique<httplib::ClientImpl>(url.host, url.port);
    }
    c->set_keep_alive(keep_alive);
    c->set_tcp_nodelay(true);
    c->set_url_encode(false);
    c->set_decompress(false);
    c->set_follow_location(false);
    auto usec = [](std::chrono::milliseconds d) {
      auto us = std::chrono::duration_cast<std::chrono::microseconds>(d).count();
      return std::pair<time_t, time_t>(static_cast<time_t>(us / 1000000),
                                       static_cast<time_t>(us % 1000000));
    };
    auto [cs, cus] = usec(connect_timeout);
    auto [rs, rus] = usec(read_timeout);
    c->set_connection_timeout(cs, cus);
    c->set_read_timeout(rs, rus);
    c->set_write_timeout(cs, cus);
    return c;
  }

  // A connection: an idle one (the most recently used), a new one below the limit, or the
  // next one given back.
  std::unique_ptr<httplib::ClientImpl> borrow(const ClientOptions& opt) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return !idle.empty() || open < limit; });
    if (!idle.empty()) {
      auto c = std::move(idle.back());
      idle.pop_back();
      return c;
    }
    ++open;
    lock.unlock();
    try {
      return make(opt.timeout, opt.timeout, true);
    } catch (...) {
      discard();
      throw;
    }
  }
  void give_back(std::unique_ptr<httplib::ClientImpl> c) {
    {
      std::lock_guard<std::mutex> lock(mu);
      idle.push_back(std::move(c));
    }
    cv.notify_one();
  }
  // A borrowed connection was dropped (after an error): room for a new one.
  void discard() {
    {
      std::lock_guard<std::mutex> lock(mu);
      --open;
    }
    cv.notify_one();
  }
};

// ---- Client ----

Client::Client(KubeConfig config, ClientOptions opt)
    : config_(std::move(config)), opt_(std::move(opt)), pool_(std::make_unique<Pool>()) {
  // A peer that resets a TLS connection would otherwise kill the process with SIGPIPE
  // (OpenSSL writes with plain send()).
  struct sigaction old {};
  if (sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) {
    signal(SIGPIPE, SIG_IGN);
  }
  Pool& p = *pool_;
  p.url = parse_server(config_.server);
  p.limit = std::max(1, opt_.connections);
  p.insecure = config_.insecure_skip_tls_verify;
  p.sni_name = config_.tls_server_name;
  p.verify_name = config_.tls_server_name.empty() ? p.url.host : config_.tls_server_name;
  if (p.url.https) {
    if (!config_.ca_pem.empty() && !p.insecure) {
      std::unique_ptr<BIO, Deleter<BIO, BIO_free_all>> bio(
          BIO_new_mem_buf(config_.ca_pem.data(), static_cast<int>(config_.ca_pem.size())));
      STACK_OF(X509_INFO)* infos = PEM_X509_INFO_read_bio(bio.get(), nullptr, nullptr, nullptr);
      if (infos == nullptr) {
        throw KubeConfigError(config_.source +
                              ": CA: not a PEM certificate bundle: " + openssl_errors());
      }
      p.store.reset(X509_STORE_new());
      int n = 0;
      for (int i = 0; i < sk_X509_INFO_num(infos); ++i) {
        X509_INFO* info = sk_X509_INFO_value(infos, i);
        if (info->x509 != nullptr && X509_STORE_add_cert(p.store.get(), info->x509) == 1) ++n;
      }
      sk_X509_INFO_pop_free(infos, X509_INFO_free);
      if (n == 0) throw KubeConfigError(config_.source + ": CA: no certificate in the PEM data");
    }
    if (!config_.client_cert_pem.empty() || !config_.client_key_pem.empty()) {
      if (config_.client_cert_pem.empty() || config_.client_key_pem.empty()) {
        throw KubeConfigError(config_.source +
                              ": a client certificate needs both certificate and key");
      }
      std::unique_ptr<BIO, Deleter<BIO, BIO_free_all>> cb(BIO_new_mem_buf(
          config_.client_cert_pem.data(), static_cast<int>(config_.client_cert_pem.size())));
      p.cert.reset(PEM_read_bio_X509(cb.get(), nullptr, nullptr, nullptr));
      if (!p.cert) {
        throw KubeConfigError(config_.source +
                              ": client certificate: not PEM: " + openssl_errors());
      }
      while (X509* extra = PEM_read_bio_X509(cb.get(), nullptr, nullptr, nullptr)) {
        p.chain.emplace_back(extra);
      }
      ERR_clear_error();  // the end of the chain reads as an error
      std::unique_ptr<BIO, Deleter<BIO, BIO_free_all>> kb(BIO_new_mem_buf(
          config_.client_key_pem.data(), static_cast<int>(config_.client_key_pem.size())));
      p.key.reset(PEM_read_bio_PrivateKey(kb.get(), nullptr, nullptr, nullptr));
      if (!p.key) {
        throw KubeConfigError(config_.source +
                              ": client key: not a PEM private key: " + openssl_errors());
      }
      if (X509_check_private_key(p.cert.get(), p.key.get()) != 1) {
        ERR_clear_error();
        throw KubeConfigError(config_.source +
                              ": client key does not match the client certificate");
      }
    }
  }
  p.base_headers = {{"Accept", "application/json"}, {"User-Agent", opt_.user_agent}};
}

Client::~Client() = default;

namespace {

httplib::Headers request_headers(const httplib::Headers& base, const KubeConfig& cfg) {
  httplib::Headers h = base;
  if (cfg.token) {
    std::string t = cfg.token->token();
    if (!t.empty()) h.emplace("Authorization", "Bearer " + t);
  }
  return h;
}

}  // namespace

Response Client::send(const char* method, const std::string& path, const nlohmann::json* body,
                      const char* content_type) {
  Response out;
  httplib::Request req;
  req.method = method;
  req.path = pool_->url.prefix + path;
  try {
    req.headers = request_headers(pool_->base_headers, config_);
  } catch (const KubeConfigError& e) {
    out.error = e.what();
    return out;
  }
  if (body != nullptr) {
    req.body = body->dump();
    req.headers.emplace("Content-Type", content_type);
  }
  int waits = 0;
  for (int attempt = 0; attempt < 2; ++attempt) {
    std::unique_ptr<httplib::ClientImpl> conn;
    try {
      conn = pool_->borrow(opt_);
    } catch (const std::exception& e) {
      out.error = e.what();
      return out;
    }
    bool reused = conn->is_socket_open() != 0;
    t_verify_error.clear();
    ERR_clear_error();
    httplib::Response res;
    httplib::Error err = httplib::Error::Success;
    httplib::Request attempt_req = req;  // send() adds headers to the request it is given
    bool ok = conn->send(attempt_req, res, err);
    if (ok) {
      pool_->give_back(std::move(conn));
      // As client-go: a 429 (API Priority and Fairness rejected it unexecuted) or a 5xx that
      // says Retry-After in whole seconds is sent again after that wait, up to
      // retry_after_attempts times. A 429 without it (the Eviction API refusing for a
      // PodDisruptionBudget) is the caller's to handle.
      const std::string wait = res.get_header_value("Retry-After");
      const bool seconds_given = !wait.empty() && wait.size() < 6 &&
                                 std::all_of(wait.begin(), wait.end(),
                                             [](unsigned char c) { return std::isdigit(c) != 0; });
      if ((res.status == 429 || res.status >= 500) && seconds_given &&
          waits < opt_.retry_after_attempts) {
        const int seconds = std::stoi(wait);
        ++waits;
        ++throttled_;
        std::this_thread::sleep_for(std::min<std::chrono::milliseconds>(
            std::chrono::seconds(seconds), opt_.retry_after_cap));
        attempt = -1;  // a fresh exchange, not the stale-connection retry
        continue;
      }
      out.status = res.status;
      out.body = std::move(res.body);
      return out;
    }
    out.error = describe_error(err, pool_->url.https);
    if (pool_->url.https && !reused &&
        (err == httplib::Error::Read || err == httplib::Error::Write)) {
      // TLS 1.3 reports a rejected client certificate only after the handshake.
      out.error +=
          " (the server closed a new TLS connection: client certificate missing or "
          "rejected?)";
    }
    conn.reset();
    pool_->discard();
    // A kept-alive connection that the server had closed: the request could not be written,
    // so it was certainly not processed and may be sent again, once, on a new connection.
    // Any other failure (no answer after sending) is left to the caller.
    if (!(reused && err == httplib::Error::Write)) break;
  }
  return out;
}

Response Client::get(const std::string& path) {
  return send("GET", path, nullptr, nullptr);
}

Response Client::post(const std::string& path, const nlohmann::json& body) {
  return send("POST", path, &body, "application/json");
}

Response Client::put(const std::string& path, const nlohmann::json& body) {
  return send("PUT", path, &body, "application/json");
}

Response Client::patch(const std::string& path, const nlohmann::json& body, PatchType type) {
  return send("PATCH", path, &body, content_type_of(type));
}

Response Client::del(const std::string& path, const nlohmann::json& body) {
  return send("DELETE", path, body.is_null() ? nullptr : &body, "application/json");
}

WatchEnd Client::watch(const std::string& path,
                       const std::function<bool(const WatchEvent&)>& on_event,
                       const std::atomic<bool>& stop, const FieldMask* objects) {
  WatchEnd end;
  const FieldMask envelope = objects != nullptr ? objects->under("object") : FieldMask{};
  if (stop.load()) {
    end.stopped = true;
    return end;
  }
  httplib::Request req;
  req.method = "GET";
  req.path = pool_->url.prefix + path;
  try {
    req.headers = request_headers(pool_->base_headers, config_);
  } catch (const KubeConfigError& e) {
    end.error = e.what();
    return end;
  }
  // Idle limit: the server ends the stream after timeoutSeconds, so silence well past that
  // means a dead connection.
  std::chrono::milliseconds idle = opt_.watch_idle_timeout;
  if (idle.count() <= 0) {
    long secs = 1800;
    std::string ts = query_value(path, "timeoutSeconds");
    if (!ts.empty()) secs = std::strtol(ts.c_str(), nullptr, 10);
    idle = std::chrono::seconds(std::max(1L, secs) + 30);
  }
  std::unique_ptr<httplib::ClientImpl> conn;
  try {
    conn = pool_->make(opt_.timeout, idle, false);
  } catch (const std::exception& e) {
    end.error = e.what();
    return end;
  }

  int status = 0;
  std::string pending;  // bytes after the last complete line
  std::string error_body;
  std::string parse_error;
  bool handler_stopped = false;
  auto deliver = [&](std::string_view line) -> bool {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
    if (line.empty()) return true;
    auto j = objects != nullptr ? parse_masked(line, envelope)
                                : nlohmann::json::parse(line.begin(), line.end(), nullptr, false);
    if (objects != nullptr && j.is_object()) {
      // The mask is for the collection's objects; an ERROR's Status (its code) or a
      // BOOKMARK is read whole.
      const auto t = j.find("type");
      const bool change =
          t != j.end() && t->is_string() && (*t == "ADDED" || *t == "MODIFIED" || *t == "DELETED");
      if (!change) j = nlohmann::json::parse(line.begin(), line.end(), nullptr, false);
    }
    if (j.is_discarded() || !j.is_object()) {
      parse_error = "malformed watch event: " + std::string(line.substr(0, 200));
      return false;
    }
    WatchEvent ev;
    auto t = j.find("type");
    if (t != j.end() && t->is_string()) ev.type = t->get<std::string>();
    auto o = j.find("object");
    if (o != j.end()) ev.object = std::move(*o);
    if (!on_event(ev)) {
      handler_stopped = true;
      return false;
    }
    return true;
  };
  req.response_handler = [&](const httplib::Response& r) {
    status = r.status;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) -> bool {
    if (stop.load()) return false;
    if (status != 200) {
      if (error_body.size() < 65536) error_body.append(data, std::min<size_t>(n, 65536));
      return true;
    }
    pending.append(data, n);
    size_t start = 0;
    while (true) {
      size_t nl = pending.find('\n', start);
      if (nl == std::string::npos) break;
      if (!deliver(std::string_view(pending).substr(start, nl - start))) return false;
      start = nl + 1;
      if (stop.load()) return false;
    }
    pending.erase(0, start);
    return true;
  };

  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  // Ends a blocked read when `stop` becomes true: shutting the socket down wakes it.
  std::thread monitor([&] {
    std::unique_lock<std::mutex> lock(m);
    while (!done) {
      cv.wait_for(lock, std::chrono::milliseconds(100));
      if (!done && stop.load()) {
        lock.unlock();
        conn->stop();  // wakes the read; repeated until the request returns
        lock.lock();
      }
    }
  });
  auto end_monitor = [&] {
    {
      std::lock_guard<std::mutex> lock(m);
      done = true;
    }
    cv.notify_all();
    monitor.join();
  };
  t_verify_error.clear();
  ERR_clear_error();
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  bool ok = false;
  try {
    ok = conn->send(req, res, err);
  } catch (...) {  // from on_event
    end_monitor();
    throw;
  }
  end_monitor();

  end.status = status;
  if (stop.load() || handler_stopped) {
    end.stopped = true;
    return end;
  }
  if (!parse_error.empty()) {
    end.error = parse_error;
    return end;
  }
  if (status != 0 && status != 200) {
    end.error = error_body;
    return end;
  }
  if (!ok) {
    end.error = describe_error(err, pool_->url.https);
    return end;
  }
  // The server closed the stream: a last line without its newline still counts.
  size_t first = pending.find_first_not_of(" \r\n\t");
  if (first != std::string::npos) {
    auto j = nlohmann::json::parse(pending, nullptr, false);
    if (j.is_discarded()) {
      end.error = "watch stream ended inside an event";
    } else if (!deliver(pending)) {
      if (handler_stopped) end.stopped = true;
      if (!parse_error.empty()) end.error = parse_error;
    }
  }
  return end;
}

std::string escape_query(std::string_view value) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  out.reserve(value.size() + 8);
  for (char ch : value) {
    auto c = static_cast<unsigned char>(ch);
    bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '-' || c == '.' || c == '_' || c == '~';
    if (plain) {
      out.push_back(ch);
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

}  // namespace tessera::kube
