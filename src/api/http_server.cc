#include "api/http_server.h"

#include <httplib.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>

#include "api/dashboard_routes.h"
#include "api/http_util.h"
#include "api/json_views.h"
#include "api/prometheus.h"
#include "api/read_routes.h"
#include "control/token.h"
#include "model/accounting_json.h"
#include "model/input_error.h"
#include "model/spelling.h"

namespace tessera {
namespace {

// Methods that change something: their refusals are audited.
bool is_mutating(const std::string& method) {
  return method == "POST" || method == "PUT" || method == "PATCH" || method == "DELETE";
}

// POST /v1/reservations's body: every key known and of its type, or a FieldError naming it.
Service::ReservationRequest reservation_request(const nlohmann::json& j) {
  object_of(j, "",
            {"name", "tenant", "user", "gpus", "gpu_type", "node", "start", "end", "ignore_jobs"});
  Service::ReservationRequest r;
  const auto text = [&](const char* key, std::string& out, bool required) {
    if (!j.contains(key)) {
      if (required) throw FieldError(key, "required");
      return;
    }
    if (!j[key].is_string()) throw FieldError(key, "expected a string");
    out = j[key].get<std::string>();
  };
  const auto number = [&](const char* key) {
    if (!j.contains(key)) throw FieldError(key, "required (unix seconds)");
    // Up to the year 5000: beyond, no calendar the server prints it in reaches.
    if (!j[key].is_number() || !(j[key].get<double>() >= 0 && j[key].get<double>() <= 1e11)) {
      throw FieldError(key, "expected unix seconds, from 0 to 1e11");
    }
    return j[key].get<double>();
  };
  text("name", r.name, true);
  text("tenant", r.tenant, true);
  text("user", r.user, false);
  text("gpu_type", r.gpu_type, false);
  text("node", r.node, false);
  if (!j.contains("gpus") || !j["gpus"].is_number_integer() || j["gpus"].get<int64_t>() < 1 ||
      j["gpus"].get<int64_t>() > 1'000'000) {
    throw FieldError("gpus", "expected a whole number of GPUs, from 1 to 1000000");
  }
  r.gpus = static_cast<int32_t>(j["gpus"].get<int64_t>());
  r.start = number("start");
  r.end = number("end");
  if (j.contains("ignore_jobs")) {
    if (!j["ignore_jobs"].is_boolean()) throw FieldError("ignore_jobs", "expected true or false");
    r.ignore_jobs = j["ignore_jobs"].get<bool>();
  }
  return r;
}

}  // namespace

ApiServer::ApiServer(Service& service, ApiOptions opt)
    : service_(service),
      opt_(opt),
      http_(std::make_unique<GuardedHttpServer>(opt.http, opt.tls)),
      extra_(std::make_unique<ExtraListeners>([this](int c) { http_->adopt(c); })) {
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

std::string ApiServer::respond(std::string_view raw) {
  return http_->respond(raw);
}

void ApiServer::stop() {
  if (http_) http_->shutdown();  // connections adopted after this are closed at once
}

void ApiServer::serve_listener(int fd) {
  extra_->add(fd);
}

void ApiServer::stop_listener(int fd) {
  extra_->remove(fd);
}

void ApiServer::routes() {
  using Handler = std::function<void(const httplib::Request&, httplib::Response&, const Caller&)>;
  Service& svc = service_;
  // Checks the request is valid UTF-8, authenticates, runs the handler, and maps ServiceError
  // to its status. Refused mutating calls are audited by the error handler below (successful
  // ones by the Service itself, in the same transaction as their change).
  // `job_token`: a job's own report token (for the job in the path) is also taken.
  auto guarded = [&svc](Handler h, bool job_token = false) {
    return
        [&svc, h = std::move(h), job_token](const httplib::Request& req, httplib::Response& res) {
          answer_errors(res, [&] {
            refuse_invalid_utf8(req);
            const std::string token = bearer(req);
            auto caller = svc.authenticate(token);
            if (!caller && job_token) caller = svc.authenticate_report(token, path_id(req));
            if (!caller) {
              throw ServiceError(ServiceError::kUnauthorized, "", unauthorized_reason(req));
            }
            h(req, res, *caller);
          });
        };
  };
  // Registers a route and remembers its pattern, so that a path served under other methods
  // is answered 405 with Allow rather than 404.
  auto route = [this](const std::string& method, const std::string& pattern,
                      httplib::Server::Handler h) {
    routes_.emplace_back(std::regex(pattern), method);
    if (method == "GET") {
      http_->Get(pattern, std::move(h));
    } else if (method == "PATCH") {
      http_->Patch(pattern, std::move(h));
    } else if (method == "DELETE") {
      http_->Delete(pattern, std::move(h));
    } else {
      http_->Post(pattern, std::move(h));
    }
  };

  // 503 while the database refuses writes: reads still answer and jobs still run, but
  // nothing new can be recorded, which a probe must see.
  route("GET", "/healthz", [&svc](const httplib::Request&, httplib::Response& res) {
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
  route("GET", "/metrics",
        [&svc, &front, metrics_hash](const httplib::Request& req, httplib::Response& res) {
          // Tenants' names and loads are not for anyone who can reach the port.
          const std::string token = bearer(req);
          const auto caller = svc.authenticate(token);
          const bool scraper = !metrics_hash.empty() && sha256_hex(token) == metrics_hash;
          if (!scraper && !(caller && caller->admin)) {
            send_error(res, caller ? 403 : 401,
                       caller ? "/metrics takes the admin token or the metrics token"
                              : unauthorized_reason(
                                    req, "the admin token or the metrics token, --metrics-token"));
            return;
          }
          res.set_content(render_prometheus(svc.metrics()) + render_http_front(front.stats()),
                          "text/plain; version=0.0.4");
        });

  // The read routes both servers answer alike: a tenant sees its own jobs, its own queue, the
  // nodes without other tenants' names, and its own entries in the history with the totals.
  ReadRoutes reads;
  reads.get = [&route](const std::string& pattern, httplib::Server::Handler h) {
    route("GET", pattern, std::move(h));
  };
  reads.guard = [](httplib::Server::Handler h) -> httplib::Server::Handler {
    return [h = std::move(h)](const httplib::Request& req, httplib::Response& res) {
      answer_errors(res, [&] {
        refuse_invalid_utf8(req);
        h(req, res);
      });
    };
  };
  reads.reader = [&svc](const httplib::Request& req, bool) {
    const auto caller = svc.authenticate(bearer(req));
    if (!caller) throw ServiceError(ServiceError::kUnauthorized, "", unauthorized_reason(req));
    return Service::reader_of(*caller);
  };
  reads.ui_dir = opt_.ui_dir;
  reads.server = "serve";
  add_read_routes(svc, reads);

  route("POST", "/v1/jobs",
        guarded([&svc](const httplib::Request& req, httplib::Response& res, const Caller& c) {
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
          res.set_content(json_text(to_json(v)), kJson);
        }));

  // tessera update: a job's priority class or time limit. The body names only those; the job
  // spec reader checks their types and ranges, the service what the queue allows.
  route("PATCH", R"(/v1/jobs/([^/]+))",
        guarded([&svc](const httplib::Request& req, httplib::Response& res, const Caller& c) {
          const nlohmann::json body = json_body(req);
          if (!body.is_object() || body.empty()) {
            throw FieldError("", "expected {\"priority_class\": ..., \"time_limit\": ...}");
          }
          nlohmann::json probe = {{"name", "update"}, {"command", {"true"}}};
          for (const auto& [key, value] : body.items()) {
            if (key != "priority_class" && key != "time_limit") {
              throw FieldError(key, "only priority_class and time_limit can be updated");
            }
            probe[key] = value;
          }
          const JobRequest r = job_request_from_json(probe);
          JobUpdate u;
          if (body.contains("priority_class")) u.priority_class = r.priority_class;
          if (body.contains("time_limit")) u.time_limit_seconds = r.time_limit_seconds;
          const JobView v = svc.update(RequestContext{c, req.method, req.path}, path_id(req), u);
          res.set_content(json_text(to_json(v)), kJson);
        }));

  // Job control: hold / release / requeue, by the job's tenant or the admin.
  for (const char* action : {"hold", "release", "requeue"}) {
    const std::string what = action;
    route(
        "POST", std::string(R"(/v1/jobs/([^/]+)/)") + action,
        guarded([&svc, what](const httplib::Request& req, httplib::Response& res, const Caller& c) {
          const RequestContext ctx{c, req.method, req.path};
          const int64_t id = path_id(req);
          const JobView v = what == "hold"      ? svc.hold(ctx, id)
                            : what == "release" ? svc.release(ctx, id)
                                                : svc.requeue(ctx, id);
          res.set_content(json_text(to_json(v)), kJson);
        }));
  }

  // An adaptive job's report (--policy goodput; docs/goodput.md): by the job itself with the
  // token it was given (TESSERA_REPORT_TOKEN), or by its tenant or the admin.
  route("POST", R"(/v1/jobs/([^/]+)/report)",
        guarded(
            [&svc](const httplib::Request& req, httplib::Response& res, const Caller& c) {
              const JobReport r = job_report_from_json(json_body(req));
              res.set_content(json_text(to_json(svc.report(c, path_id(req), r))), kJson);
            },
            /*job_token=*/true));

  // ?array=true: every unfinished task of the array the job belongs to.
  route("POST", R"(/v1/jobs/([^/]+)/cancel)",
        guarded([&svc](const httplib::Request& req, httplib::Response& res, const Caller& c) {
          const RequestContext ctx{c, req.method, req.path};
          if (bool_param(req, "array")) {
            const size_t n = svc.cancel_array(ctx, path_id(req), bool_param(req, "force"));
            nlohmann::json out = to_json(svc.job(c, path_id(req)));
            out["cancelled_tasks"] = n;
            res.set_content(json_text(out), kJson);
            return;
          }
          const JobView v = svc.cancel(ctx, path_id(req), bool_param(req, "force"));
          res.set_content(json_text(to_json(v)), kJson);
        }));

  route("GET", R"(/v1/jobs/([^/]+)/logs)",
        guarded([&svc](const httplib::Request& req, httplib::Response& res, const Caller& c) {
          const auto rank = static_cast<int32_t>(int_param(req, "rank", 0, 0, 100000));
          const int64_t tail = int_param(req, "tail_bytes", 65536, 0, int64_t{1} << 30);
          // offset: from this byte on (at most tail_bytes of it), for a client that follows.
          const int64_t from =
              req.has_param("offset") ? int_param(req, "offset", 0, 0, INT64_MAX) : int64_t{-1};
          // Streamed in pieces from the open file: a log of any size costs one buffer.
          auto slice =
              std::make_shared<const LogSlice>(svc.logs(c, path_id(req), rank, tail, from));
          // Where the bytes start, and whose run they are from: a follower's next offset.
          res.set_header("X-Log-Offset", std::to_string(slice->offset));
          res.set_header("X-Log-Attempt", std::to_string(slice->attempt));
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

  // The dataset cache (serve --dataset-dir): what it holds and stages; any caller may read it
  // (dataset names, not whose jobs read them).
  route("GET", "/v1/datasets",
        guarded([&svc](const httplib::Request&, httplib::Response& res, const Caller&) {
          double capacity = 0, used = 0;
          nlohmann::json arr = nlohmann::json::array();
          for (const DatasetCache::Entry& e : svc.datasets(&capacity, &used)) {
            if (e.state == DatasetCache::State::kAbsent) continue;
            arr.push_back({{"name", e.name},
                           {"state", to_string(e.state)},
                           {"size_gb", e.size_gb},
                           {"jobs", e.holders},
                           {"ahead", e.speculative},
                           {"last_used", e.last_used},
                           {"staged_at", e.staged_at},
                           {"stage_seconds", e.stage_seconds},
                           {"error", e.error}});
          }
          res.set_content(json_text(nlohmann::json{
                              {"capacity_gb", capacity}, {"used_gb", used}, {"datasets", arr}}),
                          kJson);
        }));

  auto admin_only = [](const Caller& c) {
    if (!c.admin) throw ServiceError(ServiceError::kForbidden, "", "admin token required");
  };

  route(
      "POST", "/v1/tenants",
      guarded([&svc, admin_only](const httplib::Request& req, httplib::Response& res,
                                 const Caller& c) {
        admin_only(c);
        const nlohmann::json j = json_body(req);
        if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) {
          throw FieldError("name", "expected {\"name\": \"TENANT\"}");
        }
        const std::string name = j["name"].get<std::string>();
        const std::string token = svc.create_tenant(RequestContext{c, req.method, req.path}, name);
        res.status = 201;
        res.set_content(json_text(nlohmann::json{{"name", name}, {"token", token}}), kJson);
      }));

  // The admin drains a node (no new work there; what runs there finishes) or resumes it.
  route("POST", R"(/v1/nodes/([^/]+)/(drain|resume))",
        guarded([&svc](const httplib::Request& req, httplib::Response& res, const Caller& c) {
          const std::string name = req.matches[1];
          const bool drain = req.matches[2] == "drain";
          svc.drain_node(RequestContext{c, req.method, req.path}, name, drain);
          res.set_content(json_text(nlohmann::json{{"name", name}, {"drained", drain}}), kJson);
        }));

  // Reservations: the admin sets GPUs aside for a tenant or user over a window, and deletes
  // them; everyone lists them (other tenants' without their names).
  route("POST", "/v1/reservations",
        guarded([&svc](const httplib::Request& req, httplib::Response& res, const Caller& c) {
          res.status = 201;
          res.set_content(
              json_text(to_json(svc.create_reservation(RequestContext{c, req.method, req.path},
                                                       reservation_request(json_body(req))))),
              kJson);
        }));
  route("GET", "/v1/reservations",
        guarded([&svc](const httplib::Request&, httplib::Response& res, const Caller& c) {
          nlohmann::json arr = nlohmann::json::array();
          for (const ReservationView& v : svc.reservations(c)) arr.push_back(to_json(v));
          res.set_content(json_text(nlohmann::json{{"reservations", arr}}), kJson);
        }));
  route("DELETE", R"(/v1/reservations/([^/]+))",
        guarded([&svc](const httplib::Request& req, httplib::Response& res, const Caller& c) {
          const std::string name = req.matches[1];
          svc.delete_reservation(RequestContext{c, req.method, req.path}, name);
          res.set_content(json_text(nlohmann::json{{"name", name}, {"deleted", true}}), kJson);
        }));

  // The admin rotates (POST: a new token, shown once) or revokes (DELETE) a tenant's token.
  route("POST", R"(/v1/tenants/([^/]+)/token)",
        guarded([&svc](const httplib::Request& req, httplib::Response& res, const Caller& c) {
          const std::string name = req.matches[1];
          const std::string token = svc.rotate_token(RequestContext{c, req.method, req.path}, name);
          res.set_content(json_text(nlohmann::json{{"name", name}, {"token", token}}), kJson);
        }));
  route("DELETE", R"(/v1/tenants/([^/]+)/token)",
        guarded([&svc](const httplib::Request& req, httplib::Response& res, const Caller& c) {
          const std::string name = req.matches[1];
          svc.revoke_token(RequestContext{c, req.method, req.path}, name);
          res.set_content(json_text(nlohmann::json{{"name", name}, {"revoked", true}}), kJson);
        }));

  // The admin archives jobs that finished more than older_than_hours ago.
  route(
      "POST", "/v1/archive",
      guarded([&svc](const httplib::Request& req, httplib::Response& res, const Caller& c) {
        const nlohmann::json body = json_body(req);
        if (!body.is_object() || !body.contains("older_than_hours") ||
            !body["older_than_hours"].is_number() || body["older_than_hours"].get<double>() < 0) {
          throw FieldError("older_than_hours", "expected {\"older_than_hours\": HOURS >= 0}");
        }
        const ArchiveResult r = svc.archive(RequestContext{c, req.method, req.path},
                                            body["older_than_hours"].get<double>() * 3600);
        res.set_content(json_text(nlohmann::json{{"archived", r.jobs}, {"files", r.files}}), kJson);
      }));

  // The admin deletes a tenant that has no job waiting or running.
  route("DELETE", R"(/v1/tenants/([^/]+))",
        guarded([&svc](const httplib::Request& req, httplib::Response& res, const Caller& c) {
          const std::string name = req.matches[1];
          svc.delete_tenant(RequestContext{c, req.method, req.path}, name);
          res.set_content(json_text(nlohmann::json{{"name", name}, {"deleted", true}}), kJson);
        }));

  // People inside a tenant: the admin or the tenant's managers add (a token, shown once),
  // list and remove users; a user's token is rotated by them or a manager.
  const auto user_json = [](const UserRow& u) {
    return nlohmann::json{{"tenant", u.tenant},
                          {"name", u.name},
                          {"role", to_string(u.role)},
                          {"created_at", u.created_at}};
  };
  route("POST", R"(/v1/tenants/([^/]+)/users)",
        guarded([&svc](const httplib::Request& req, httplib::Response& res, const Caller& c) {
          const std::string tenant = req.matches[1];
          const nlohmann::json j = json_body(req);
          object_of(j, "", {"name", "role"});
          if (!j.contains("name") || !j["name"].is_string()) {
            throw FieldError("name", "expected {\"name\": \"USER\", \"role\": \"member\"}");
          }
          UserRole role = UserRole::kMember;
          if (j.contains("role") &&
              (!j["role"].is_string() || !parse_user_role(j["role"].get<std::string>(), role))) {
            throw FieldError("role", "expected member or admin");
          }
          const std::string name = j["name"].get<std::string>();
          const std::string token =
              svc.add_user(RequestContext{c, req.method, req.path}, tenant, name, role);
          res.status = 201;
          res.set_content(
              json_text(nlohmann::json{
                  {"tenant", tenant}, {"name", name}, {"role", to_string(role)}, {"token", token}}),
              kJson);
        }));
  route("GET", R"(/v1/tenants/([^/]+)/users)",
        guarded([&svc, user_json](const httplib::Request& req, httplib::Response& res,
                                  const Caller& c) {
          nlohmann::json arr = nlohmann::json::array();
          for (const UserRow& u : svc.users(c, req.matches[1])) arr.push_back(user_json(u));
          res.set_content(json_text(nlohmann::json{{"users", arr}}), kJson);
        }));
  route(
      "GET", "/v1/users",
      guarded([&svc, user_json](const httplib::Request&, httplib::Response& res, const Caller& c) {
        nlohmann::json arr = nlohmann::json::array();
        for (const UserRow& u : svc.users(c, "")) arr.push_back(user_json(u));
        res.set_content(json_text(nlohmann::json{{"users", arr}}), kJson);
      }));
  route("DELETE", R"(/v1/tenants/([^/]+)/users/([^/]+))",
        guarded([&svc](const httplib::Request& req, httplib::Response& res, const Caller& c) {
          const std::string tenant = req.matches[1];
          const std::string name = req.matches[2];
          svc.remove_user(RequestContext{c, req.method, req.path}, tenant, name);
          res.set_content(
              json_text(nlohmann::json{{"tenant", tenant}, {"name", name}, {"removed", true}}),
              kJson);
        }));
  route("POST", R"(/v1/tenants/([^/]+)/users/([^/]+)/token)",
        guarded([&svc](const httplib::Request& req, httplib::Response& res, const Caller& c) {
          const std::string tenant = req.matches[1];
          const std::string name = req.matches[2];
          const std::string token =
              svc.rotate_user_token(RequestContext{c, req.method, req.path}, tenant, name);
          res.set_content(
              json_text(nlohmann::json{{"tenant", tenant}, {"name", name}, {"token", token}}),
              kJson);
        }));

  // The admin replaces the queue tree (the body: its YAML); ?dry_run=true checks it only.
  route("POST", "/v1/queues",
        guarded([&svc](const httplib::Request& req, httplib::Response& res, const Caller& c) {
          const bool dry_run = query_param(req, "dry_run").value_or("false") == "true";
          // The file the client read it from, for errors that name its lines.
          // Cut at a character boundary, control characters shown as '?' (quote_prefix),
          // without its quotes.
          const std::string quoted =
              quote_prefix(query_param(req, "origin").value_or("the applied queue tree"), 200);
          const std::string origin = quoted.substr(1, quoted.size() - 2);
          const QueueTreeChange change = svc.apply_queue_tree(
              RequestContext{c, req.method, req.path}, req.body, origin, dry_run);
          res.set_content(json_text(nlohmann::json{{"applied", !dry_run},
                                                   {"queues", change.queues},
                                                   {"added", change.added},
                                                   {"removed", change.removed}}),
                          kJson);
        }));

  route(
      "GET", "/v1/tenants",
      guarded([&svc, admin_only](const httplib::Request&, httplib::Response& res, const Caller& c) {
        admin_only(c);
        nlohmann::json arr = nlohmann::json::array();
        for (const TenantView& t : svc.tenants()) {
          arr.push_back(
              {{"name", t.name},
               {"has_token", t.has_token},
               {"created_at", t.created_at >= 0 ? nlohmann::json(t.created_at) : nlohmann::json()},
               {"queue", t.queue},
               {"pending_jobs", t.pending_jobs},
               {"running_jobs", t.running_jobs}});
        }
        res.set_content(json_text(nlohmann::json{{"tenants", arr}}), kJson);
      }));

  route("GET", "/v1/audit",
        guarded([&svc, admin_only](const httplib::Request& req, httplib::Response& res,
                                   const Caller& c) {
          admin_only(c);
          const auto limit = static_cast<size_t>(int_param(req, "limit", 100, 1, 10000));
          AuditFilter f;
          f.actor = query_param(req, "actor").value_or("");
          f.target = query_param(req, "target").value_or("");
          f.since = static_cast<double>(int_param(req, "since", -1, -1, INT64_MAX));
          f.until = static_cast<double>(int_param(req, "until", -1, -1, INT64_MAX));
          f.refused_only = bool_param(req, "refused");
          nlohmann::json arr = nlohmann::json::array();
          for (const AuditEntry& e : svc.audit_log(limit, f)) arr.push_back(to_json(e));
          res.set_content(json_text(nlohmann::json{{"entries", arr}}), kJson);
        }));

  // Accounting (tessera usage): per tenant and queue over [since, until), unix seconds; by
  // default the last 30 days. A tenant sees its own rows, the admin everyone's.
  route("GET", "/v1/usage",
        guarded([&svc](const httplib::Request& req, httplib::Response& res, const Caller& c) {
          const auto now = static_cast<int64_t>(svc.clock_now());
          const int64_t until = int_param(req, "until", now, 0, INT64_MAX);
          const int64_t since = int_param(req, "since", until - 30 * 86400, 0, INT64_MAX);
          const std::string by = query_param(req, "by").value_or("queue");
          if (by != "queue" && by != "user") {
            throw ServiceError(ServiceError::kInvalid, "by",
                               "expected queue (a row per tenant and queue) or user (a row per "
                               "user of each tenant), got " +
                                   quote_prefix(by));
          }
          nlohmann::json rows = nlohmann::json::array();
          for (const UsageRow& r :
               svc.usage(c, static_cast<double>(since), static_cast<double>(until), by == "user")) {
            rows.push_back(usage_row_json<nlohmann::json>(r));
          }
          res.set_content(
              json_text(nlohmann::json{{"since", since}, {"until", until}, {"usage", rows}}),
              kJson);
        }));

  // Who a token stands for: the dashboard shows the admin's pages only to the admin.
  route("GET", "/v1/whoami",
        guarded([](const httplib::Request&, httplib::Response& res, const Caller& c) {
          const auto or_null = [](const std::string& s) {
            return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s);
          };
          res.set_content(
              json_text(nlohmann::json{
                  {"admin", c.admin},
                  {"tenant", c.admin ? nlohmann::json(nullptr) : nlohmann::json(c.tenant)},
                  {"user", or_null(c.user)},
                  {"role", c.admin          ? nlohmann::json("server admin")
                           : c.user.empty() ? nlohmann::json("tenant")
                           : c.tenant_admin ? nlohmann::json("admin")
                                            : nlohmann::json("member")}}),
              kJson);
        }));

  // Requests the front end refused (too large, chunked, malformed) are audited as well.
  http_->on_refused = [&svc](const Framing& f) {
    if (!is_mutating(f.method)) return;
    std::string token = f.authorization;
    if (token.rfind("Bearer ", 0) == 0) token = token.substr(7);
    const std::optional<Caller> caller = svc.authenticate(token);
    try {
      svc.audit_refusal(RequestContext{caller.value_or(Caller{}), f.method,
                                       f.target.substr(0, f.target.find('?'))},
                        f.status, "");
    } catch (const std::exception&) {  // best effort, as below
    }
  };

  // Errors httplib answers itself (no route, a request it cannot parse) get the API's shape;
  // every refused call that would have changed something is audited, whoever made it.
  http_->set_error_handler([this, &svc](const httplib::Request& req, httplib::Response& res) {
    if (res.status == 404 && res.body.empty()) {
      std::string allow;
      for (const auto& [pattern, method] : routes_) {
        if (method != req.method && std::regex_match(req.path, pattern) &&
            allow.find(method) == std::string::npos) {
          allow += (allow.empty() ? "" : ", ") + method;
        }
      }
      if (!allow.empty()) {
        res.set_header("Allow", allow);
        send_error(res, 405, req.method + " is not served here; " + allow + " is");
      }
    }
    if (res.body.empty()) {
      const char* what = res.status == 413   ? "request body too large"
                         : res.status == 404 ? "no such endpoint"
                                             : "request refused";
      send_error(res, res.status, what);
    }
    if (is_mutating(req.method)) {
      const std::optional<Caller> caller = svc.authenticate(bearer(req));
      try {
        svc.audit_refusal(RequestContext{caller.value_or(Caller{}), req.method, req.path},
                          res.status, "");
      } catch (const std::exception&) {  // the refusal was answered; a failed audit must not
      }                                  // turn it into a 500
    }
  });
}

}  // namespace tessera
