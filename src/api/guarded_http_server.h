// An httplib::Server that a hostile client cannot starve, hang or balloon.
//
// httplib gives each connection a worker thread from accept to close, and a worker reads the
// request itself: 70 connections that send their headers a byte at a time, or 500 idle
// keep-alive connections, held every worker and /healthz stopped answering; a chunked body or
// endless header lines were read without limit. Here a worker sees a request only once it has
// arrived whole:
//
//   accept ─► per-client and total connection limits (429 / 503 and close)
//          ─► one event thread (epoll) reads every connection without blocking, frames each
//             request (request_framing.h: header and body limits, 411 for chunked bodies),
//             and drops those too slow (408: header section and whole request deadlines;
//             idle keep-alive connections simply closed)
//          ─► a complete request goes to a worker, which runs httplib's parsing and routing
//             over the buffered bytes and writes the response (with a write timeout), then
//             hands a keep-alive connection back to the event thread.
//
// Idle and slow connections therefore cost a file descriptor and a buffer, never a worker.
// Handlers, routing, error handlers and content providers are httplib's, unchanged.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "api/request_framing.h"

struct ssl_ctx_st;

namespace tessera {

struct HttpLimits {
  int workers = 16;                                   // threads that run handlers
  int max_connections = 1024;                         // open at once, all clients together
  int max_connections_per_client = 128;               // from one IP address
  std::chrono::milliseconds header_timeout{10'000};   // first byte to the end of the headers
  std::chrono::milliseconds request_timeout{30'000};  // first byte to the end of the body
  std::chrono::milliseconds idle_timeout{15'000};     // keep-alive wait for the next request
  std::chrono::milliseconds write_timeout{10'000};    // a response write making no progress
  int keep_alive_max_requests = 1000;
  int listen_backlog = 1024;
  FramingLimits framing;
};

// TLS for every connection (both files PEM): the certificate chain and its private key. Empty:
// plain HTTP.
struct TlsConfig {
  std::string cert_file;
  std::string key_file;
  bool enabled() const { return !cert_file.empty(); }
};

// What the front end refused or dropped, for /metrics.
struct HttpFrontStats {
  int64_t open_connections = 0;
  int64_t refused_busy = 0;        // 503: max_connections reached
  int64_t refused_per_client = 0;  // 429: max_connections_per_client reached
  int64_t refused_framing = 0;     // 400 / 411 / 413 / 431 / 505 before any handler
  int64_t timed_out = 0;           // 408: too slow to send a request
  int64_t idle_closed = 0;         // keep-alive connections closed for idleness
};

class GuardedHttpServer : public httplib::Server {
 public:
  // Throws std::runtime_error naming the file when the TLS certificate or key cannot be used.
  explicit GuardedHttpServer(HttpLimits limits = {}, TlsConfig tls = {});
  ~GuardedHttpServer() override;
  GuardedHttpServer(const GuardedHttpServer&) = delete;
  GuardedHttpServer& operator=(const GuardedHttpServer&) = delete;

  // httplib's, after widening the listen backlog from httplib's 5 (a burst of connections
  // otherwise waits for SYN retransmits, a second each) to limits.listen_backlog. Hides the
  // base's (non-virtual) function: call it on a GuardedHttpServer.
  bool listen_after_bind();

  // stop() ends the accept loop (httplib's); this also closes every connection and joins the
  // threads, letting requests in workers finish. Idempotent; the destructor calls it.
  void shutdown();
  HttpFrontStats stats() const;

  // The response to `raw`, the bytes a client sends, framed and served as on a connection but
  // without one (fuzzing, tests): the front end's refusal, the handlers' response to the first
  // request, or "" when `raw` is not a whole request yet.
  std::string respond(std::string_view raw);

  // Called on the event thread for each request refused before any handler ran, once its
  // request line was read (method, target, Authorization as sent; status). Set it before
  // listening, and keep it quick: the event thread serves every connection.
  std::function<void(const Framing& refused)> on_refused;

  // Serves a connection accepted elsewhere (ExtraListeners) as one of its own.
  void adopt(int fd) { process_and_close_socket(fd); }

 private:
  struct Conn;
  struct Work {
    std::unique_ptr<Conn> conn;
    std::string request;
  };
  using Clock = std::chrono::steady_clock;

  // Called by httplib's accept loop for each new socket (its task queue runs it inline).
  bool process_and_close_socket(socket_t sock) override;

  void event_loop();
  void worker_loop();
  // Reads what `c` has sent; false when it is to be closed.
  bool read_some(Conn& c);
  // Advances a TLS handshake: false when the connection is to be closed.
  bool handshake(Conn& c);
  // Waits for readable only, or also for writable (a TLS handshake that must write).
  void arm(int fd, bool writable);
  void refuse(Conn& c, int status, const std::string& message);
  // Frames what `c` buffered: dispatches a complete request, refuses a bad one, or waits.
  // Returns false when `c` is to be closed (refused), true otherwise; `dispatched` tells
  // whether it went to a worker.
  bool advance(std::unique_ptr<Conn>& c, bool& dispatched);
  void serve(Work w);
  void hand_back(std::unique_ptr<Conn> c);  // worker -> event thread
  void close_conn(std::unique_ptr<Conn> c);
  void wake();

  HttpLimits limits_;
  std::shared_ptr<ssl_ctx_st> tls_;  // SSL_CTX; null without TLS
  int epoll_fd_ = -1;
  int wake_fd_ = -1;  // eventfd: the inbox has connections, or shutdown
  std::atomic<bool> stopping_{false};
  bool shut_down_ = false;
  std::mutex shutdown_mu_;

  std::mutex inbox_mu_;
  std::vector<std::unique_ptr<Conn>> inbox_;  // new or handed back, for the event thread

  std::mutex work_mu_;
  std::condition_variable work_cv_;
  std::deque<Work> work_;

  mutable std::mutex clients_mu_;
  std::map<std::string, int> per_client_;  // open connections by peer address
  HttpFrontStats stats_;                   // under clients_mu_

  std::thread event_thread_;
  std::vector<std::thread> workers_;
};

}  // namespace tessera
