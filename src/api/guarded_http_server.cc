#include "api/guarded_http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <unordered_map>

namespace tessera {

// One client connection. Owned by exactly one thread at a time: the event thread while it
// waits for or reads a request, a worker while it serves one (moved between them by
// unique_ptr), so none of its fields needs a lock.
struct GuardedHttpServer::Conn {
  int fd = -1;
  std::string peer;
  int peer_port = 0;
  bool counted = false;  // holds a place in the connection limits (refused ones do not)
  std::string buf;       // received, not yet served: the start of the next request
  int requests = 0;      // served on this connection
  bool reading = false;  // the first byte of a request has arrived
  bool headers_done = false;
  bool closing = false;      // refused: draining what the client still sends, then closed
  SSL* ssl = nullptr;        // TLS: the session (freed before the socket is closed)
  bool handshaking = false;  // TLS: the handshake is not done yet
  bool peer_closed = false;  // the client shut its side: serve what it sent, then close
  Clock::time_point first_byte{};
  Clock::time_point deadline{};
  Conn() = default;
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;
  ~Conn() {
    if (ssl != nullptr) SSL_free(ssl);
    if (fd >= 0) ::close(fd);
  }
};

namespace {

// httplib's accept loop hands each socket to a task queue; this one runs the hand-off at once
// (process_and_close_socket only registers the socket), so no thread waits on a connection.
class InlineTaskQueue final : public httplib::TaskQueue {
 public:
  void enqueue(std::function<void()> fn) override { fn(); }
  void shutdown() override {}
};

const char* reason_phrase(int status) {
  switch (status) {
    case 400:
      return "Bad Request";
    case 408:
      return "Request Timeout";
    case 411:
      return "Length Required";
    case 413:
      return "Payload Too Large";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Error";
  }
}

// A refusal in the API's error shape, with Connection: close.
std::string refusal_response(int status, const std::string& message) {
  const std::string body = nlohmann::json{{"error", message}}.dump(
                               -1, ' ', false, nlohmann::json::error_handler_t::replace) +
                           "\n";
  return "HTTP/1.1 " + std::to_string(status) + " " + reason_phrase(status) +
         "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\nConnection: close\r\n\r\n" + body;
}

// Sent without blocking: it is small enough for any socket buffer, and a client that does not
// read it loses nothing it was owed.
void send_refusal(int fd, int status, const std::string& message) {
  const std::string all = refusal_response(status, message);
  (void)::send(fd, all.data(), all.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

// Copies up to `size` bytes of `request` from `pos` (advanced): the reads of a buffered
// request, which end with it.
ssize_t take(std::string_view request, size_t& pos, char* ptr, size_t size) {
  const size_t n = std::min(size, request.size() - pos);
  std::memcpy(ptr, request.data() + pos, n);
  pos += n;
  return static_cast<ssize_t>(n);
}

// A request held in memory, its response collected in memory (GuardedHttpServer::respond).
class MemoryStream final : public httplib::Stream {
 public:
  explicit MemoryStream(std::string_view request) : request_(request) {}
  bool is_readable() const override { return pos_ < request_.size(); }
  bool is_writable() const override { return true; }
  ssize_t read(char* ptr, size_t size) override { return take(request_, pos_, ptr, size); }
  ssize_t write(const char* ptr, size_t size) override {
    out_.append(ptr, size);
    return static_cast<ssize_t>(size);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = "127.0.0.1";
    port = 0;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    ip = "127.0.0.1";
    port = 0;
  }
  socket_t socket() const override { return INVALID_SOCKET; }
  std::string& out() { return out_; }

 private:
  std::string_view request_;
  size_t pos_ = 0;
  std::string out_;
};

// "1.2.3.4" / "::1" and the port of an IPv4 or IPv6 address; false for other families.
bool ip_and_port(const sockaddr_storage& addr, std::string& ip, int& port) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
    ::inet_ntop(AF_INET, &a->sin_addr, buf, sizeof(buf));
    port = ntohs(a->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
    ::inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof(buf));
    port = ntohs(a->sin6_port);
  } else {
    return false;
  }
  ip = buf;
  return true;
}

bool peer_of(int fd, std::string& ip, int& port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return false;
  return ip_and_port(addr, ip, port);
}

// One buffered request for httplib to parse and route; the response goes to the socket. Reads
// end with the request, so httplib can never wait on the client.
class RequestStream final : public httplib::Stream {
 public:
  RequestStream(int fd, SSL* ssl, const std::string& request, const std::string& peer,
                int peer_port, std::chrono::milliseconds write_timeout)
      : fd_(fd),
        ssl_(ssl),
        request_(request),
        peer_(peer),
        peer_port_(peer_port),
        write_timeout_ms_(static_cast<int>(write_timeout.count())) {}

  bool is_readable() const override { return pos_ < request_.size(); }

  bool is_writable() const override {
    pollfd p{fd_, POLLOUT, 0};
    int n = 0;
    while ((n = ::poll(&p, 1, write_timeout_ms_)) < 0 && errno == EINTR) {
    }
    return n > 0 && (p.revents & (POLLERR | POLLHUP)) == 0;
  }

  ssize_t read(char* ptr, size_t size) override { return take(request_, pos_, ptr, size); }

  // Writes all of it, waiting up to the write timeout each time the socket is full.
  ssize_t write(const char* ptr, size_t size) override {
    if (ssl_ != nullptr) return write_tls(ptr, size);
    size_t done = 0;
    while (done < size) {
      const ssize_t n = ::send(fd_, ptr + done, size - done, MSG_NOSIGNAL);
      if (n > 0) {
        done += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && is_writable()) continue;
      return -1;
    }
    return static_cast<ssize_t>(size);
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = peer_;
    port = peer_port_;
  }

  void get_local_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    ip.clear();
    port = 0;
    if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
      ip_and_port(addr, ip, port);
    }
  }

  socket_t socket() const override { return fd_; }

 private:
  bool wait_for(short events) const {
    pollfd p{fd_, events, 0};
    int n = 0;
    while ((n = ::poll(&p, 1, write_timeout_ms_)) < 0 && errno == EINTR) {
    }
    return n > 0 && (p.revents & (POLLERR | POLLHUP | POLLNVAL)) == 0;
  }
  ssize_t write_tls(const char* ptr, size_t size) {
    size_t done = 0;
    while (done < size) {
      const int n =
          SSL_write(ssl_, ptr + done, static_cast<int>(std::min<size_t>(size - done, 1 << 20)));
      if (n > 0) {
        done += static_cast<size_t>(n);
        continue;
      }
      const int err = SSL_get_error(ssl_, n);
      if ((err == SSL_ERROR_WANT_WRITE && wait_for(POLLOUT)) ||
          (err == SSL_ERROR_WANT_READ && wait_for(POLLIN))) {
        continue;
      }
      return -1;
    }
    return static_cast<ssize_t>(size);
  }

  int fd_;
  SSL* ssl_;
  const std::string& request_;
  size_t pos_ = 0;
  const std::string& peer_;
  int peer_port_;
  int write_timeout_ms_;
};

constexpr auto kTick = std::chrono::milliseconds(100);     // deadline granularity
constexpr auto kLinger = std::chrono::milliseconds(2000);  // drain time after a refusal

}  // namespace

namespace {

std::string openssl_error() {
  const unsigned long e = ERR_get_error();
  if (e == 0) return "unknown OpenSSL error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof(buf));
  return buf;
}

std::shared_ptr<SSL_CTX> make_tls_context(const TlsConfig& tls) {
  if (!tls.enabled()) return nullptr;
  if (tls.key_file.empty()) throw std::runtime_error("TLS: a certificate without a key file");
  std::shared_ptr<SSL_CTX> ctx(SSL_CTX_new(TLS_server_method()), SSL_CTX_free);
  if (!ctx) throw std::runtime_error("TLS: " + openssl_error());
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  // Forward secrecy only: ECDHE key exchange with an AEAD cipher on TLS 1.2 (every TLS 1.3
  // suite is ephemeral already). A recorded session stays secret after the key leaks.
  if (SSL_CTX_set_cipher_list(ctx.get(), "ECDHE+AESGCM:ECDHE+CHACHA20") != 1) {
    throw std::runtime_error("TLS: cannot set the cipher suites: " + openssl_error());
  }
  // A private key others may read is no longer private: refused, as ssh refuses one.
  struct stat key_st {};
  if (::stat(tls.key_file.c_str(), &key_st) == 0 && (key_st.st_mode & S_IROTH) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(key_st.st_mode & 07777));
    throw std::runtime_error("TLS: the key " + tls.key_file + " is readable by every user (mode " +
                             mode + "); chmod 600 " + tls.key_file);
  }
  if ((key_st.st_mode & S_IRGRP) != 0) {
    std::fprintf(stderr, "tessera: warning: the TLS key %s is readable by its group\n",
                 tls.key_file.c_str());
  }
  if (SSL_CTX_use_certificate_chain_file(ctx.get(), tls.cert_file.c_str()) != 1) {
    throw std::runtime_error("TLS: cannot use the certificate " + tls.cert_file + ": " +
                             openssl_error());
  }
  if (SSL_CTX_use_PrivateKey_file(ctx.get(), tls.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    throw std::runtime_error("TLS: cannot use the key " + tls.key_file + ": " + openssl_error());
  }
  if (SSL_CTX_check_private_key(ctx.get()) != 1) {
    throw std::runtime_error("TLS: the key " + tls.key_file + " does not match the certificate " +
                             tls.cert_file);
  }
  // Writes wait in RequestStream (with its timeout), so a partial write is retried there.
  SSL_CTX_set_mode(ctx.get(), SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  return ctx;
}

}  // namespace

GuardedHttpServer::GuardedHttpServer(HttpLimits limits, TlsConfig tls)
    : limits_(limits), tls_(make_tls_context(tls)) {
  new_task_queue = [] { return new InlineTaskQueue(); };
  // httplib only writes these into each response's Keep-Alive header (its own defaults say
  // max=5); the connection loop here enforces them.
  set_keep_alive_max_count(static_cast<size_t>(limits_.keep_alive_max_requests));
  set_keep_alive_timeout(
      std::chrono::duration_cast<std::chrono::seconds>(limits_.idle_timeout).count());
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (epoll_fd_ < 0 || wake_fd_ < 0) {
    throw std::runtime_error(std::string("http server: cannot create epoll/eventfd: ") +
                             std::strerror(errno));
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = wake_fd_;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
  event_thread_ = std::thread([this] { event_loop(); });
  for (int i = 0; i < std::max(1, limits_.workers); ++i) {
    workers_.emplace_back([this] { worker_loop(); });
  }
}

GuardedHttpServer::~GuardedHttpServer() {
  shutdown();
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void GuardedHttpServer::shutdown() {
  std::lock_guard lock(shutdown_mu_);
  if (shut_down_) return;
  shut_down_ = true;
  stop();  // httplib's accept loop, if it runs
  stopping_ = true;
  wake();
  work_cv_.notify_all();
  if (event_thread_.joinable()) event_thread_.join();
  for (std::thread& t : workers_) {
    if (t.joinable()) t.join();
  }
  // Connections a worker handed back after the event thread ended.
  std::lock_guard inbox(inbox_mu_);
  for (auto& c : inbox_) close_conn(std::move(c));
  inbox_.clear();
}

std::string GuardedHttpServer::respond(std::string_view raw) {
  raw.remove_prefix(leading_empty_lines(raw));
  const Framing f = frame_request(raw, limits_.framing);
  if (f.kind == Framing::kRefused) return refusal_response(f.status, f.reason);
  if (f.kind == Framing::kIncomplete) return "";
  std::string request(raw.substr(0, f.length));
  drop_brotli(request);
  MemoryStream strm(request);
  bool connection_closed = false;
  process_request(strm, true, connection_closed, nullptr);
  return std::move(strm.out());
}

bool GuardedHttpServer::listen_after_bind() {
  if (svr_sock_ != INVALID_SOCKET) ::listen(svr_sock_, limits_.listen_backlog);
  return httplib::Server::listen_after_bind();
}

HttpFrontStats GuardedHttpServer::stats() const {
  std::lock_guard lock(clients_mu_);
  return stats_;
}

void GuardedHttpServer::wake() {
  const uint64_t one = 1;
  (void)::write(wake_fd_, &one, sizeof(one));
}

bool GuardedHttpServer::process_and_close_socket(socket_t sock) {
  auto c = std::make_unique<Conn>();
  c->fd = sock;
  if (stopping_ || !peer_of(sock, c->peer, c->peer_port)) return true;  // closes it
  int status = 0;
  std::string why;
  {
    std::lock_guard lock(clients_mu_);
    if (stats_.open_connections >= limits_.max_connections) {
      ++stats_.refused_busy;
      status = 503;
      why = "the server has " + std::to_string(limits_.max_connections) +
            " connections open; retry later";
    } else if (auto it = per_client_.find(c->peer);
               it != per_client_.end() && it->second >= limits_.max_connections_per_client) {
      ++stats_.refused_per_client;
      status = 429;
      why = "too many connections from " + c->peer + " (at most " +
            std::to_string(limits_.max_connections_per_client) + ")";
    } else {
      ++per_client_[c->peer];
      ++stats_.open_connections;
      c->counted = true;
    }
  }
  const int flags = ::fcntl(sock, F_GETFL, 0);
  ::fcntl(sock, F_SETFL, flags | O_NONBLOCK);
  const auto now = Clock::now();
  if (status != 0) {
    if (tls_) return true;  // no HTTP before a handshake: closed (by ~Conn)
    send_refusal(sock, status, why);
    ::shutdown(sock, SHUT_WR);
    c->closing = true;
    c->deadline = now + kLinger;
  } else {
    // The handshake, then the first request's header section, within the header timeout.
    c->deadline = now + limits_.header_timeout;
    if (tls_) {
      c->ssl = SSL_new(tls_.get());
      if (c->ssl == nullptr || SSL_set_fd(c->ssl, sock) != 1) {
        close_conn(std::move(c));
        return true;
      }
      SSL_set_accept_state(c->ssl);
      c->handshaking = true;
    }
  }
  {
    std::lock_guard lock(inbox_mu_);
    inbox_.push_back(std::move(c));
  }
  wake();
  return true;
}

void GuardedHttpServer::close_conn(std::unique_ptr<Conn> c) {
  if (!c) return;
  if (c->counted) {
    std::lock_guard lock(clients_mu_);
    --stats_.open_connections;
    auto it = per_client_.find(c->peer);
    if (it != per_client_.end() && --it->second <= 0) per_client_.erase(it);
  }
  // ~Conn closes the socket.
}

void GuardedHttpServer::hand_back(std::unique_ptr<Conn> c) {
  {
    std::lock_guard lock(inbox_mu_);
    inbox_.push_back(std::move(c));
  }
  wake();
}

bool GuardedHttpServer::read_some(Conn& c) {
  // Enough to hold the largest request allowed and to see that the next one is too large.
  const size_t cap = limits_.framing.max_header_bytes + limits_.framing.max_body_bytes + 4096;
  char tmp[16384];
  if (c.ssl != nullptr && !c.closing) {
    for (;;) {
      if (c.buf.size() >= cap) return true;
      const int n = SSL_read(c.ssl, tmp, sizeof(tmp));
      if (n > 0) {
        c.buf.append(tmp, static_cast<size_t>(n));
        continue;
      }
      const int err = SSL_get_error(c.ssl, n);
      if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) return true;
      ERR_clear_error();
      if (err == SSL_ERROR_ZERO_RETURN || err == SSL_ERROR_SYSCALL) {
        c.peer_closed = true;
        return !c.buf.empty();
      }
      return false;
    }
  }
  for (;;) {
    if (!c.closing && c.buf.size() >= cap) return true;  // framing refuses it
    const ssize_t n = ::recv(c.fd, tmp, sizeof(tmp), 0);
    if (n > 0) {
      if (!c.closing) c.buf.append(tmp, static_cast<size_t>(n));
      continue;
    }
    if (n == 0) {  // the client shut its side; a request it sent whole is still served
      c.peer_closed = true;
      return !c.closing && !c.buf.empty();
    }
    if (errno == EINTR) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK;
  }
}

void GuardedHttpServer::arm(int fd, bool writable) {
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP | (writable ? EPOLLOUT : 0u);
  ev.data.fd = fd;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, fd, &ev);
}

bool GuardedHttpServer::handshake(Conn& c) {
  const int r = SSL_do_handshake(c.ssl);
  if (r == 1) {
    c.handshaking = false;
    arm(c.fd, false);
    return true;
  }
  const int err = SSL_get_error(c.ssl, r);
  if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
    arm(c.fd, err == SSL_ERROR_WANT_WRITE);
    return true;
  }
  ERR_clear_error();  // not TLS (plain HTTP to a TLS port), or a failed handshake
  return false;
}

void GuardedHttpServer::refuse(Conn& c, int status, const std::string& message) {
  if (c.ssl == nullptr) {
    send_refusal(c.fd, status, message);
  } else if (!c.handshaking) {
    // Best effort, as in plain text: a short answer fits the socket buffer.
    const std::string all = refusal_response(status, message);
    (void)SSL_write(c.ssl, all.data(), static_cast<int>(all.size()));
    (void)SSL_shutdown(c.ssl);
    ERR_clear_error();
  }
}

bool GuardedHttpServer::advance(std::unique_ptr<Conn>& c, bool& dispatched) {
  dispatched = false;
  if (c->closing) return true;
  const auto now = Clock::now();
  if (!c->reading) {
    c->buf.erase(0, leading_empty_lines(c->buf));
    if (c->buf.empty()) return true;
    c->reading = true;
    c->first_byte = now;
    c->deadline = now + limits_.header_timeout;
  }
  const Framing f = frame_request(c->buf, limits_.framing);
  if (f.kind == Framing::kRefused) {
    {
      std::lock_guard lock(clients_mu_);
      ++stats_.refused_framing;
    }
    refuse(*c, f.status, f.reason);
    if (on_refused && !f.method.empty()) on_refused(f);
    ::shutdown(c->fd, SHUT_WR);
    c->closing = true;
    c->buf.clear();
    c->deadline = now + kLinger;
    return true;
  }
  if (f.kind == Framing::kIncomplete) {
    if (f.headers_done && !c->headers_done) {
      c->headers_done = true;
      c->deadline = c->first_byte + limits_.request_timeout;
    }
    return true;
  }
  Work w;
  w.request = c->buf.substr(0, f.length);
  drop_brotli(w.request);
  c->buf.erase(0, f.length);
  c->reading = false;
  c->headers_done = false;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c->fd, nullptr);
  w.conn = std::move(c);
  {
    std::lock_guard lock(work_mu_);
    work_.push_back(std::move(w));
  }
  work_cv_.notify_one();
  dispatched = true;
  return true;
}

void GuardedHttpServer::event_loop() {
  std::unordered_map<int, std::unique_ptr<Conn>> conns;
  std::vector<epoll_event> events(128);
  auto last_scan = Clock::now();
  auto drop = [&](int fd) {
    auto it = conns.find(fd);
    if (it == conns.end()) return;
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
    close_conn(std::move(it->second));
    conns.erase(it);
  };
  // Frames what a connection holds; it leaves `conns` when dispatched.
  auto step = [&](int fd) {
    auto it = conns.find(fd);
    if (it == conns.end()) return;
    bool dispatched = false;
    advance(it->second, dispatched);
    if (dispatched) {
      conns.erase(it);
    } else if (it->second->peer_closed) {
      drop(fd);  // it will send no more, and what it sent is not a whole request
    }
  };
  while (!stopping_) {
    std::vector<std::unique_ptr<Conn>> arrived;
    {
      std::lock_guard lock(inbox_mu_);
      arrived.swap(inbox_);
    }
    for (auto& c : arrived) {
      const int fd = c->fd;
      if (!c->closing && !c->reading) {
        c->deadline =
            Clock::now() + (c->requests == 0 ? limits_.header_timeout : limits_.idle_timeout);
      }
      epoll_event ev{};
      ev.events = EPOLLIN | EPOLLRDHUP;
      ev.data.fd = fd;
      if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
        close_conn(std::move(c));
        continue;
      }
      conns[fd] = std::move(c);
      step(fd);  // a pipelined request may already be buffered
    }
    const int n = ::epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()),
                               static_cast<int>(kTick.count()));
    for (int i = 0; i < n; ++i) {
      const int fd = events[static_cast<size_t>(i)].data.fd;
      if (fd == wake_fd_) {
        uint64_t v = 0;
        (void)::read(wake_fd_, &v, sizeof(v));
        continue;
      }
      auto it = conns.find(fd);
      if (it == conns.end()) continue;
      Conn& c = *it->second;
      if (c.handshaking) {
        if (!handshake(c)) {
          drop(fd);
          continue;
        }
        if (c.handshaking) continue;  // more of it to come
      }
      if (!read_some(c)) {
        drop(fd);
        continue;
      }
      step(fd);
    }
    const auto now = Clock::now();
    if (now - last_scan < kTick) continue;
    last_scan = now;
    std::vector<int> expired;
    for (auto& [fd, c] : conns) {
      if (now < c->deadline) continue;
      if (c->closing) {
        expired.push_back(fd);
      } else if (c->reading) {
        {
          std::lock_guard lock(clients_mu_);
          ++stats_.timed_out;
        }
        refuse(*c, 408,
               c->headers_done ? "request body not received within " +
                                     std::to_string(limits_.request_timeout.count() / 1000) + " s"
                               : "request headers not received within " +
                                     std::to_string(limits_.header_timeout.count() / 1000) + " s");
        expired.push_back(fd);
      } else {
        std::lock_guard lock(clients_mu_);
        ++stats_.idle_closed;
        expired.push_back(fd);
      }
    }
    for (int fd : expired) drop(fd);
  }
  for (auto& [fd, c] : conns) close_conn(std::move(c));
}

void GuardedHttpServer::worker_loop() {
  for (;;) {
    Work w;
    {
      std::unique_lock lock(work_mu_);
      work_cv_.wait(lock, [&] { return stopping_.load() || !work_.empty(); });
      if (work_.empty()) return;  // stopping, nothing left
      w = std::move(work_.front());
      work_.pop_front();
    }
    serve(std::move(w));
  }
}

void GuardedHttpServer::serve(Work w) {
  Conn& c = *w.conn;
  RequestStream strm(c.fd, c.ssl, w.request, c.peer, c.peer_port, limits_.write_timeout);
  ++c.requests;
  const bool close_after =
      stopping_ || c.peer_closed || c.requests >= limits_.keep_alive_max_requests;
  bool connection_closed = false;
  const bool ok = process_request(strm, close_after, connection_closed, nullptr);
  if (!ok || connection_closed || close_after || stopping_) {
    close_conn(std::move(w.conn));
  } else {
    hand_back(std::move(w.conn));
  }
}

}  // namespace tessera
