#include "api/http_util.h"

#include <httplib.h>

#include <charconv>

#include "model/json_depth.h"
#include "store/job_request.h"

namespace tessera {

void send_error(httplib::Response& res, int status, const std::string& message,
                const std::string& field) {
  nlohmann::json j{{"error", message}};
  if (!field.empty()) j["field"] = field;
  res.status = status;
  res.set_content(j.dump(), kJson);
}

int status_of(ServiceError::Kind k) {
  switch (k) {
    case ServiceError::kInvalid:
      return 400;
    case ServiceError::kUnauthorized:
      return 401;
    case ServiceError::kForbidden:
      return 403;
    case ServiceError::kNotFound:
      return 404;
    case ServiceError::kConflict:
      return 409;
    case ServiceError::kInfeasible:
      return 422;
    case ServiceError::kUnavailable:
      return 503;
  }
  return 500;
}

std::string bearer(const httplib::Request& req) {
  const std::string h = req.get_header_value("Authorization");
  constexpr std::string_view kPrefix = "Bearer ";
  if (h.size() <= kPrefix.size() || h.compare(0, kPrefix.size(), kPrefix) != 0) return "";
  return h.substr(kPrefix.size());
}

int64_t int_param(const httplib::Request& req, const char* name, int64_t def, int64_t lo,
                  int64_t hi) {
  if (!req.has_param(name)) return def;
  const std::string v = req.get_param_value(name);
  int64_t out = 0;
  const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (ec != std::errc() || p != v.data() + v.size() || out < lo || out > hi) {
    throw ServiceError(ServiceError::kInvalid, name,
                       std::string(name) + " must be an integer in " + std::to_string(lo) + ".." +
                           std::to_string(hi) + ", got '" + v + "'");
  }
  return out;
}

bool bool_param(const httplib::Request& req, const char* name) {
  if (!req.has_param(name)) return false;
  const std::string v = req.get_param_value(name);
  if (v == "true" || v == "1" || v.empty()) return true;  // "?force" alone means true
  if (v == "false" || v == "0") return false;
  throw ServiceError(ServiceError::kInvalid, name,
                     std::string(name) + " must be true or false, got '" + v + "'");
}

nlohmann::json json_body(const httplib::Request& req) {
  if (json_nesting_exceeds(req.body)) {
    throw FieldError("", "body nests arrays/objects more than " + std::to_string(kMaxJsonDepth) +
                             " levels deep");
  }
  try {
    return nlohmann::json::parse(req.body);
  } catch (const nlohmann::json::parse_error& e) {
    throw FieldError("", std::string("body is not valid JSON: ") + e.what());
  }
}

int64_t path_id(const httplib::Request& req) {
  int64_t id = 0;
  const std::string s = req.matches[1];
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), id);
  if (ec != std::errc() || p != s.data() + s.size()) {
    throw ServiceError(ServiceError::kNotFound, "", "job " + s + " not found");
  }
  return id;
}

int bind_server(httplib::Server& http, const std::string& host, int port) {
  // httplib's default sets SO_REUSEPORT, which lets a second server bind the same address and
  // take half of its requests. SO_REUSEADDR alone still allows a quick restart (TIME_WAIT) but
  // refuses an address that a live server listens on.
  http.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  int bound = 0;
  if (port == 0) {
    bound = http.bind_to_any_port(host);
  } else if (http.bind_to_port(host, port)) {
    bound = port;
  }
  if (bound <= 0) {
    throw std::runtime_error("cannot listen on " + host + ":" + std::to_string(port) +
                             " (address in use, or not an address of this host?)");
  }
  return bound;
}

JobFilter job_filter(const httplib::Request& req) {
  JobFilter f;
  if (req.has_param("state")) {
    JobState s;
    const std::string v = req.get_param_value("state");
    if (!parse_job_state(v, s)) {
      throw ServiceError(ServiceError::kInvalid, "state",
                         "state must be pending, running, succeeded, failed, cancelled or "
                         "preempted, got '" +
                             v + "'");
    }
    f.state = s;
  }
  f.tenant = req.get_param_value("tenant");
  f.limit = static_cast<size_t>(int_param(req, "limit", 500, 1, 10000));
  f.after = int_param(req, "after", 0, 0, INT64_MAX);
  return f;
}

}  // namespace tessera
