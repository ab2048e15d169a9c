#include "api/http_server.h"

#include <httplib.h>

#include <charconv>
#include <functional>

#include "api/json_views.h"
#include "api/prometheus.h"

namespace tessera {
namespace {

constexpr const char* kJson = "application/json";

void send_error(httplib::Response& res, int status, const std::string& message,
                const std::string& field = "") {
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
  }
  return 500;
}

std::string bearer(const httplib::Request& req) {
  const std::string h = req.get_header_value("Authorization");
  constexpr std::string_view kPrefix = "Bearer ";
  if (h.size() <= kPrefix.size() || h.compare(0, kPrefix.size(), kPrefix) != 0) return "";
  return h.substr(kPrefix.size());
}

// An integer query parameter in [lo, hi]; `def` when absent. Throws ServiceError naming it.
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

// The request body as JSON; FieldError (400) when it is not.
nlohmann::json json_body(const httplib::Request& req) {
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

}  // namespace

ApiServer::ApiServer(Service& service, ApiOptions opt)
    : service_(service), opt_(opt), http_(std::make_unique<httplib::Server>()) {
  const int threads = opt_.threads;
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http_->set_payload_max_length(opt_.max_body_bytes);
  http_->set_keep_alive_max_count(1000);
  // Small JSON answers must not wait for delayed ACKs (Nagle): 40 ms per request otherwise.
  http_->set_tcp_nodelay(true);
  routes();
}

ApiServer::~ApiServer() {
  stop();
}

int ApiServer::bind(const std::string& host, int port) {
  int bound = 0;
  if (port == 0) {
    bound = http_->bind_to_any_port(host);
  } else if (http_->bind_to_port(host, port)) {
    bound = port;
  }
  if (bound <= 0) {
    throw std::runtime_error("cannot listen on " + host + ":" + std::to_string(port) +
                             " (address in use, or not an address of this host?)");
  }
  return bound;
}

void ApiServer::run() {
  http_->listen_after_bind();
}

void ApiServer::stop() {
  if (http_) http_->stop();
}

void ApiServer::routes() {
  using Handler = std::function<void(const httplib::Request&, httplib::Response&, const Caller&)>;
  Service& svc = service_;
  // Authenticates, runs the handler, maps ServiceError to its status, and writes refused
  // mutating requests to the audit log (successful ones are audited by the Service itself, in
  // the same transaction as their change).
  auto guarded = [&svc](bool mutating, Handler h) {
    return [&svc, mutating, h = std::move(h)](const httplib::Request& req, httplib::Response& res) {
      RequestContext ctx{Caller{}, req.method, req.path};
      try {
        const auto caller = svc.authenticate(bearer(req));
        if (!caller) {
          throw ServiceError(ServiceError::kUnauthorized, "",
                             "missing or unknown bearer token (Authorization: Bearer TOKEN)");
        }
        ctx.caller = *caller;
        h(req, res, *caller);
      } catch (const ServiceError& e) {
        send_error(res, status_of(e.kind()), e.what(), e.field());
      } catch (const FieldError& e) {
        send_error(res, 400, e.what(), e.field());
      } catch (const std::exception& e) {
        send_error(res, 500, std::string("internal error: ") + e.what());
      }
      if (mutating && res.status >= 400) {
        try {
          svc.audit_refusal(ctx, res.status, "");
        } catch (const std::exception&) {  // the refusal was answered; a failed audit must not
        }                                  // turn it into a 500
      }
    };
  };

  http_->Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain");
  });
  http_->Get("/metrics", [&svc](const httplib::Request&, httplib::Response& res) {
    res.set_content(render_prometheus(svc.metrics()), "text/plain; version=0.0.4");
  });

  http_->Post("/v1/jobs", guarded(true, [&svc](const httplib::Request& req, httplib::Response& res,
                                               const Caller& c) {
                const std::string type = req.get_header_value("Content-Type");
                JobRequest jr;
                if (type.find("json") != std::string::npos) {
                  const nlohmann::json j = json_body(req);
                  jr = job_request_from_json(j);
                } else {
                  jr = parse_job_request(req.body);  // YAML (or JSON sent without a JSON type)
                }
                bool created = false;
                const JobView v = svc.submit(RequestContext{c, req.method, req.path}, std::move(jr),
                                             req.get_header_value("Idempotency-Key"), &created);
                res.status = created ? 201 : 200;
                res.set_content(to_json(v).dump(), kJson);
              }));

  http_->Get(
      "/v1/jobs",
      guarded(false, [&svc](const httplib::Request& req, httplib::Response& res, const Caller& c) {
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
        const auto jobs = svc.jobs(c, f);
        nlohmann::json arr = nlohmann::json::array();
        for (const JobView& v : jobs) arr.push_back(to_json(v));
        nlohmann::json out{{"jobs", std::move(arr)}};
        out["next_after"] =
            jobs.size() == f.limit ? nlohmann::json(jobs.back().row.id) : nlohmann::json(nullptr);
        res.set_content(out.dump(), kJson);
      }));

  http_->Get(R"(/v1/jobs/([^/]+))", guarded(false, [&svc](const httplib::Request& req,
                                                          httplib::Response& res, const Caller& c) {
               res.set_content(to_json(svc.job(c, path_id(req))).dump(), kJson);
             }));

  http_->Post(
      R"(/v1/jobs/([^/]+)/cancel)",
      guarded(true, [&svc](const httplib::Request& req, httplib::Response& res, const Caller& c) {
        const JobView v = svc.cancel(RequestContext{c, req.method, req.path}, path_id(req));
        res.set_content(to_json(v).dump(), kJson);
      }));

  http_->Get(
      R"(/v1/jobs/([^/]+)/logs)",
      guarded(false, [&svc](const httplib::Request& req, httplib::Response& res, const Caller& c) {
        const auto rank = static_cast<int32_t>(int_param(req, "rank", 0, 0, 100000));
        const int64_t tail = int_param(req, "tail_bytes", 65536, 0, int64_t{1} << 30);
        res.set_content(svc.logs(c, path_id(req), rank, tail), "text/plain");
      }));

  http_->Get("/v1/queues", guarded(false, [&svc](const httplib::Request&, httplib::Response& res,
                                                 const Caller& c) {
               nlohmann::json arr = nlohmann::json::array();
               for (const QueueView& q : svc.queues(c)) arr.push_back(to_json(q));
               res.set_content(nlohmann::json{{"queues", arr}}.dump(), kJson);
             }));

  http_->Get("/v1/nodes",
             guarded(false, [&svc](const httplib::Request&, httplib::Response& res, const Caller&) {
               nlohmann::json arr = nlohmann::json::array();
               for (const NodeView& n : svc.nodes()) arr.push_back(to_json(n));
               res.set_content(nlohmann::json{{"nodes", arr}}.dump(), kJson);
             }));

  auto admin_only = [](const Caller& c) {
    if (!c.admin) throw ServiceError(ServiceError::kForbidden, "", "admin token required");
  };

  http_->Post(
      "/v1/tenants", guarded(true, [&svc, admin_only](const httplib::Request& req,
                                                      httplib::Response& res, const Caller& c) {
        admin_only(c);
        const nlohmann::json j = json_body(req);
        if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) {
          throw FieldError("name", "expected {\"name\": \"TENANT\"}");
        }
        const std::string name = j["name"].get<std::string>();
        const std::string token = svc.create_tenant(RequestContext{c, req.method, req.path}, name);
        res.status = 201;
        res.set_content(nlohmann::json{{"name", name}, {"token", token}}.dump(), kJson);
      }));

  http_->Get("/v1/tenants",
             guarded(false, [&svc, admin_only](const httplib::Request&, httplib::Response& res,
                                               const Caller& c) {
               admin_only(c);
               nlohmann::json arr = nlohmann::json::array();
               for (const TenantRow& t : svc.tenants()) {
                 arr.push_back({{"name", t.name}, {"created_at", t.created_at}});
               }
               res.set_content(nlohmann::json{{"tenants", arr}}.dump(), kJson);
             }));

  http_->Get("/v1/audit",
             guarded(false, [&svc, admin_only](const httplib::Request& req, httplib::Response& res,
                                               const Caller& c) {
               admin_only(c);
               const auto limit = static_cast<size_t>(int_param(req, "limit", 100, 1, 10000));
               nlohmann::json arr = nlohmann::json::array();
               for (const AuditEntry& e : svc.audit_log(limit)) arr.push_back(to_json(e));
               res.set_content(nlohmann::json{{"entries", arr}}.dump(), kJson);
             }));

  // Bodies over the limit: httplib answers 413 itself; give it the API's error shape.
  http_->set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (res.body.empty()) {
      const char* what = res.status == 413   ? "request body too large"
                         : res.status == 404 ? "no such endpoint"
                                             : "request refused";
      send_error(res, res.status, what);
    }
  });
}

}  // namespace tessera
