#include "api/http_util.h"

#include <httplib.h>

#include <charconv>

#include "model/json_depth.h"
#include "model/utf8.h"
#include "store/job_request.h"
#include "store/strict_json.h"

namespace tessera {

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// application/x-www-form-urlencoded decoding: %XX and '+' for a space; a '%' not followed by
// two hex digits is kept as it is.
std::string form_decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%' && i + 2 < s.size() && hex_value(s[i + 1]) >= 0 &&
               hex_value(s[i + 2]) >= 0) {
      out += static_cast<char>(hex_value(s[i + 1]) * 16 + hex_value(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

}  // namespace

std::optional<std::string> query_param(const httplib::Request& req, std::string_view name) {
  const size_t q = req.target.find('?');
  if (q == std::string::npos) return std::nullopt;
  std::string_view query(req.target);
  query.remove_prefix(q + 1);
  std::optional<std::string> found;
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query.remove_prefix(amp == std::string_view::npos ? query.size() : amp + 1);
    // The first '=' ends the name: a value may hold more of them.
    const size_t eq = pair.find('=');
    if (form_decode(pair.substr(0, eq)) != name) continue;
    found = eq == std::string_view::npos ? "" : form_decode(pair.substr(eq + 1));
  }
  return found;
}

void refuse_invalid_utf8(const httplib::Request& req) {
  auto check = [](std::string_view text, const std::string& field, const std::string& what) {
    if (const std::optional<size_t> at = invalid_utf8_at(text)) {
      throw ServiceError(ServiceError::kInvalid, field,
                         what + " is not valid UTF-8 (byte " + std::to_string(*at) + ")");
    }
  };
  check(req.path, "", "the request path");
  const size_t q = req.target.find('?');
  if (q != std::string::npos) {
    check(form_decode(std::string_view(req.target).substr(q + 1)), "", "the query string");
  }
  check(req.body, "", "the request body");
}

std::string json_text(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void send_error(httplib::Response& res, int status, const std::string& message,
                const std::string& field) {
  nlohmann::json j{{"error", message}};
  if (!field.empty()) j["field"] = field;
  res.status = status;
  res.set_content(json_text(j), kJson);
}

void answer_errors(httplib::Response& res, const std::function<void()>& handle) {
  try {
    handle();
  } catch (const ServiceError& e) {
    send_error(res, status_of(e.kind()), e.what(), e.field());
  } catch (const FieldError& e) {
    send_error(res, 400, e.what(), e.field());
  } catch (const std::exception& e) {
    send_error(res, 500, std::string("internal error: ") + e.what());
  }
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
    case ServiceError::kTooMany:
      return 429;
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

std::string unauthorized_reason(const httplib::Request& req, const std::string& what) {
  if (!req.has_header("Authorization")) {
    return "no bearer token sent: send Authorization: Bearer TOKEN (" + what +
           "; the CLI sends $TESSERA_TOKEN)";
  }
  if (bearer(req).empty()) {
    return "the Authorization header is not of the form 'Bearer TOKEN' (" + what + ")";
  }
  return "unknown bearer token: not " + what + " of this server (mistyped, rotated or revoked?)";
}

int64_t int_param(const httplib::Request& req, const char* name, int64_t def, int64_t lo,
                  int64_t hi) {
  const std::optional<std::string> given = query_param(req, name);
  if (!given) return def;
  const std::string& v = *given;
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
  const std::optional<std::string> given = query_param(req, name);
  if (!given) return false;
  const std::string& v = *given;
  if (v == "true" || v == "1" || v.empty()) return true;  // "?force" alone means true
  if (v == "false" || v == "0") return false;
  throw ServiceError(ServiceError::kInvalid, name,
                     std::string(name) + " must be true or false, got '" + v + "'");
}

nlohmann::json json_body(const httplib::Request& req) {
  return parse_json_strict(req.body);
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
  if (const std::optional<std::string> given = query_param(req, "state")) {
    // One state or several, comma-separated: state=pending,running.
    std::string bad;
    if (!parse_job_states(*given, f.states, bad)) {
      throw ServiceError(ServiceError::kInvalid, "state",
                         "state must be one of " + job_state_names() +
                             " (or several, comma-separated), got '" + bad + "'");
    }
  }
  f.tenant = query_param(req, "tenant").value_or("");
  f.array = int_param(req, "array", 0, 0, INT64_MAX);
  f.queue = query_param(req, "queue").value_or("");
  f.priority_class = query_param(req, "class").value_or("");
  if (PriorityClass p{}; !f.priority_class.empty() && !parse_priority_class(f.priority_class, p)) {
    throw ServiceError(ServiceError::kInvalid, "class",
                       "class must be inference-critical, production, research or best-effort, "
                       "got '" +
                           f.priority_class + "'");
  }
  f.reason = query_param(req, "reason").value_or("");
  f.limit = static_cast<size_t>(int_param(req, "limit", 500, 1, 10000));
  const std::string order = query_param(req, "order").value_or("asc");
  if (order != "asc" && order != "desc") {
    throw ServiceError(ServiceError::kInvalid, "order",
                       "order must be asc or desc, got '" + order + "'");
  }
  f.newest_first = order == "desc";
  f.after = int_param(req, "after", 0, 0, INT64_MAX);
  f.before = int_param(req, "before", 0, 0, INT64_MAX);
  if (f.newest_first && f.after > 0) {
    throw ServiceError(ServiceError::kInvalid, "after", "order=desc pages with before, not after");
  }
  if (!f.newest_first && f.before > 0) {
    throw ServiceError(ServiceError::kInvalid, "before", "before pages order=desc only");
  }
  return f;
}

void add_next_page(nlohmann::json& out, const std::vector<JobView>& page, const JobFilter& f) {
  const nlohmann::json next =
      page.size() == f.limit ? nlohmann::json(page.back().row.id) : nlohmann::json(nullptr);
  out[f.newest_first ? "next_before" : "next_after"] = next;
}

}  // namespace tessera
