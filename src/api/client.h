// A client of the service API, for the `tessera submit|jobs|job|cancel|queues|nodes|logs|
// tenant` commands and the tests. Retries requests that could not reach the server (it may be
// restarting), so submissions carry an Idempotency-Key: a retried submission finds the job
// its first try created instead of creating a second.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace httplib {
class Client;
}

namespace tessera {

struct ClientOptions {
  std::string addr = "127.0.0.1:8080";  // host:port, or http://host:port
  std::string token;
  double timeout_seconds = 30;
  int attempts = 5;  // tries for a request that cannot reach the server
  // https://: the CA certificate (PEM) the server's certificate must chain to; empty: the
  // system's. TESSERA_CA when the flag leaves it empty.
  std::string ca_file;
};

// Reads TESSERA_ADDR, TESSERA_TOKEN and TESSERA_CA where the flags left them empty.
ClientOptions client_options_from_env(std::string addr, std::string token);

struct HttpResult {
  int status = 0;  // 0: no answer (the error says why)
  std::string body;
  std::string error;
};

class ApiClient {
 public:
  explicit ApiClient(ClientOptions opt);
  ~ApiClient();
  ApiClient(const ApiClient&) = delete;
  ApiClient& operator=(const ApiClient&) = delete;

  HttpResult get(const std::string& path);
  // `headers`: extra name/value pairs (e.g. Idempotency-Key).
  HttpResult post(const std::string& path, const std::string& body, const std::string& content_type,
                  const std::vector<std::pair<std::string, std::string>>& headers = {});
  HttpResult patch(const std::string& path, const std::string& body,
                   const std::string& content_type);
  HttpResult del(const std::string& path);

 private:
  ClientOptions opt_;
  std::unique_ptr<httplib::Client> http_;
};

}  // namespace tessera
