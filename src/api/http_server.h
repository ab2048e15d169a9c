// The HTTP + JSON API of `tessera serve` (docs/openapi.yaml) over a Service.
//
// Every request under /v1 carries `Authorization: Bearer TOKEN`: the admin's token, or a
// tenant's (a tenant sees and cancels only its own jobs). /metrics takes the admin token or
// the metrics token; /healthz takes none. Errors are JSON
// {"error": ..., "field": ...} with 400 (bad request, naming the field), 401, 403, 404, 409,
// 413 (body over the size limit) or 422 (a valid job that can never run on this cluster),
// 503 (the database refuses writes). Connections and requests are bounded before any handler
// runs (GuardedHttpServer: 408, 411, 429, 431, 503).
// Every mutating request, refused ones included, is written to the audit log.
#pragma once

#include <cstddef>
#include <memory>
#include <regex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/extra_listeners.h"
#include "api/guarded_http_server.h"
#include "control/serve/service.h"

namespace tessera {

struct ApiOptions {
  // Connection and request limits; http.framing.max_body_bytes bounds a request body (413).
  HttpLimits http;
  // Besides the admin token, this one (if set) may read /metrics and nothing else: what a
  // Prometheus scrape config holds.
  std::string metrics_token;
  TlsConfig tls;  // HTTPS when set
  // The dashboard's files from this folder (its dashboard/ subfolder) instead of those built
  // in: for working on the dashboard without rebuilding. Empty = the built-in ones.
  std::string ui_dir;
};

class ApiServer {
 public:
  ApiServer(Service& service, ApiOptions opt = {});
  ~ApiServer();
  ApiServer(const ApiServer&) = delete;
  ApiServer& operator=(const ApiServer&) = delete;

  // Binds host:port (port 0 = any free port); returns the port, or throws std::runtime_error
  // naming the address.
  int bind(const std::string& host, int port);
  // Serves until stop() (blocks).
  void run();
  void stop();
  // The response to a request's raw bytes, without a connection (GuardedHttpServer::respond).
  std::string respond(std::string_view raw);
  // Serves the connections of a listening socket besides its own (one inside a job's network
  // namespace: Service::JobListeners), until stop_listener.
  void serve_listener(int fd);
  void stop_listener(int fd);

 private:
  void routes();
  Service& service_;
  ApiOptions opt_;
  std::unique_ptr<GuardedHttpServer> http_;
  std::unique_ptr<ExtraListeners> extra_;  // destroyed first: its thread hands to http_
  std::vector<std::pair<std::regex, std::string>> routes_;  // pattern, method
};

}  // namespace tessera
