#include "api/client.h"

#include <httplib.h>

#include <chrono>
#include <cstdlib>
#include <thread>

namespace tessera {

ClientOptions client_options_from_env(std::string addr, std::string token) {
  ClientOptions o;
  if (addr.empty()) {
    const char* e = std::getenv("TESSERA_ADDR");
    addr = e != nullptr && *e != '\0' ? e : o.addr;
  }
  if (token.empty()) {
    const char* e = std::getenv("TESSERA_TOKEN");
    token = e != nullptr ? e : "";
  }
  o.addr = std::move(addr);
  o.token = std::move(token);
  if (const char* ca = std::getenv("TESSERA_CA"); ca != nullptr) o.ca_file = ca;
  return o;
}

ApiClient::ApiClient(ClientOptions opt) : opt_(std::move(opt)) {
  std::string base = opt_.addr;
  if (base.find("://") == std::string::npos) base = "http://" + base;
  http_ = std::make_unique<httplib::Client>(base);
  const auto secs = static_cast<time_t>(opt_.timeout_seconds);
  http_->set_connection_timeout(5, 0);
  http_->set_read_timeout(secs, 0);
  http_->set_write_timeout(secs, 0);
  http_->set_keep_alive(true);
  http_->set_tcp_nodelay(true);
  if (!opt_.token.empty()) http_->set_bearer_token_auth(opt_.token);
  // A server's certificate is always verified: an https:// address without a trusted CA fails
  // rather than talk to whoever answers.
  if (!opt_.ca_file.empty()) http_->set_ca_cert_path(opt_.ca_file);
  http_->enable_server_certificate_verification(true);
}

ApiClient::~ApiClient() = default;

namespace {

template <typename F>
HttpResult with_retries(int attempts, F call) {
  HttpResult r;
  for (int i = 0; i < std::max(1, attempts); ++i) {
    if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(200 << std::min(i, 4)));
    auto res = call();
    if (res) {
      r.status = res->status;
      r.body = res->body;
      r.error.clear();
      return r;
    }
    r.error = httplib::to_string(res.error());
  }
  return r;
}

}  // namespace

HttpResult ApiClient::get(const std::string& path) {
  return with_retries(opt_.attempts, [&] { return http_->Get(path); });
}

HttpResult ApiClient::post(const std::string& path, const std::string& body,
                           const std::string& content_type,
                           const std::vector<std::pair<std::string, std::string>>& headers) {
  httplib::Headers h;
  for (const auto& [k, v] : headers) h.emplace(k, v);
  return with_retries(opt_.attempts, [&] { return http_->Post(path, h, body, content_type); });
}

HttpResult ApiClient::del(const std::string& path) {
  // Revoking twice leaves the same state, so a retry is safe.
  return with_retries(opt_.attempts, [&] { return http_->Delete(path); });
}

HttpResult ApiClient::patch(const std::string& path, const std::string& body,
                            const std::string& content_type) {
  // An update sets values (it is idempotent), so a retry after a lost answer is safe.
  return with_retries(opt_.attempts, [&] { return http_->Patch(path, body, content_type); });
}

}  // namespace tessera
