#include "api/http_server.h"

#include <httplib.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <functional>
#include <memory>

#include "api/http_util.h"
#include "api/json_views.h"
#include "api/prometheus.h"
#include "control/token.h"

namespace tessera {

ApiServer::ApiServer(Service& service, ApiOptions opt)
    : service_(service), opt_(opt), http_(std::make_unique<GuardedHttpServer>(opt.http)) {
  http_->set_payload_max_length(opt_.http.framing.max_body_bytes);
  // Small JSON answers must not wait for delayed ACKs (Nagle): 40 ms per request otherwise.
  http_->set_tcp_nodelay(true);
  routes();
}

ApiServer::~ApiServer() {
  stop();
}

int ApiServer::bind(const std::string& host, int port) {
  return bind_server(*http_, host, port);
}

void ApiServer::run() {
  http_->listen_after_bind();
}

void ApiServer::stop() {
  if (http_) http_->shutdown();
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

  // 503 while the database refuses writes: reads still answer and jobs still run, but
  // nothing new can be recorded, which a probe must see.
  http_->Get("/healthz", [&svc](const httplib::Request&, httplib::Response& res) {
    if (const auto why = svc.degraded()) {
      res.status = 503;
      res.set_content("degraded: " + *why + "\n", "text/plain");
      return;
    }
    res.set_content("ok\n", "text/plain");
  });
  GuardedHttpServer& front = *http_;
  // Compared by hash, as tenant tokens are, so the comparison's time tells nothing.
  const std::string metrics_hash = opt_.metrics_token.empty() ? "" : sha256_hex(opt_.metrics_token);
  http_->Get("/metrics", [&svc, &front, metrics_hash](const httplib::Request& req,
                                                      httplib::Response& res) {
    // Tenants' names and loads are not for anyone who can reach the port.
    const std::string token = bearer(req);
    const auto caller = svc.authenticate(token);
    const bool scraper = !metrics_hash.empty() && sha256_hex(token) == metrics_hash;
    if (!scraper && !(caller && caller->admin)) {
      send_error(res, caller ? 403 : 401,
                 caller ? "/metrics takes the admin token or the metrics token"
                        : "missing or unknown bearer token (the admin token or the metrics "
                          "token, --metrics-token)");
      return;
    }
    res.set_content(render_prometheus(svc.metrics()) + render_http_front(front.stats()),
                    "text/plain; version=0.0.4");
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

  http_->Get("/v1/jobs", guarded(false, [&svc](const httplib::Request& req, httplib::Response& res,
                                               const Caller& c) {
               const JobFilter f = job_filter(req);
               const auto jobs = svc.jobs(c, f);
               nlohmann::json arr = nlohmann::json::array();
               for (const JobView& v : jobs) arr.push_back(to_json(v));
               nlohmann::json out{{"jobs", std::move(arr)}};
               out["next_after"] = jobs.size() == f.limit ? nlohmann::json(jobs.back().row.id)
                                                          : nlohmann::json(nullptr);
               res.set_content(out.dump(), kJson);
             }));

  http_->Get(R"(/v1/jobs/([^/]+))", guarded(false, [&svc](const httplib::Request& req,
                                                          httplib::Response& res, const Caller& c) {
               res.set_content(to_json(svc.job(c, path_id(req))).dump(), kJson);
             }));

  http_->Post(
      R"(/v1/jobs/([^/]+)/cancel)",
      guarded(true, [&svc](const httplib::Request& req, httplib::Response& res, const Caller& c) {
        const JobView v = svc.cancel(RequestContext{c, req.method, req.path}, path_id(req),
                                     bool_param(req, "force"));
        res.set_content(to_json(v).dump(), kJson);
      }));

  http_->Get(
      R"(/v1/jobs/([^/]+)/logs)",
      guarded(false, [&svc](const httplib::Request& req, httplib::Response& res, const Caller& c) {
        const auto rank = static_cast<int32_t>(int_param(req, "rank", 0, 0, 100000));
        const int64_t tail = int_param(req, "tail_bytes", 65536, 0, int64_t{1} << 30);
        // Streamed in pieces from the open file: a log of any size costs one buffer.
        auto slice = std::make_shared<const LogSlice>(svc.logs(c, path_id(req), rank, tail));
        res.set_content_provider(static_cast<size_t>(slice->length), "text/plain",
                                 [slice](size_t offset, size_t length, httplib::DataSink& sink) {
                                   std::array<char, 64 * 1024> buf{};
                                   const size_t got = slice->file.read_at(
                                       slice->offset + static_cast<int64_t>(offset), buf.data(),
                                       std::min(length, buf.size()));
                                   // A log cannot shrink under a reader unless someone truncated
                                   // it: end the response (the client sees fewer bytes than
                                   // promised) rather than spin.
                                   return got > 0 && sink.write(buf.data(), got);
                                 });
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
