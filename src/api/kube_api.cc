#include "api/kube_api.h"

#include <httplib.h>

#include <fmt/format.h>

#include "api/dashboard_routes.h"
#include "api/http_util.h"
#include "api/json_views.h"
#include "api/prometheus.h"
#include "api/read_routes.h"

namespace tessera {

std::string render_kube_prometheus(const ServiceMetrics& m, const kube::KubeMetrics& k) {
  std::string o = render_prometheus(m);
  o += "# HELP tessera_bind_latency_seconds From when the scheduler saw a pod to its bind.\n";
  o += "# TYPE tessera_bind_latency_seconds histogram\n";
  for (size_t b = 0; b < k.bind_bucket_bounds.size(); ++b) {
    o += fmt::format("tessera_bind_latency_seconds_bucket{{le=\"{:g}\"}} {}\n",
                     k.bind_bucket_bounds[b], k.bind_bucket_counts[b]);
  }
  o += fmt::format("tessera_bind_latency_seconds_bucket{{le=\"+Inf\"}} {}\n", k.binds_ok);
  o += fmt::format("tessera_bind_latency_seconds_sum {:.6f}\n", k.bind_latency_sum);
  o += fmt::format("tessera_bind_latency_seconds_count {}\n", k.binds_ok);
  o += "# HELP tessera_binds_total Pod bindings, by result.\n# TYPE tessera_binds_total counter\n";
  o += fmt::format("tessera_binds_total{{result=\"ok\"}} {}\n", k.binds_ok);
  o += fmt::format("tessera_binds_total{{result=\"failed\"}} {}\n",
                   k.binds_failed - k.binds_conflict);
  o += fmt::format("tessera_binds_total{{result=\"conflict\"}} {}\n", k.binds_conflict);
  o += "# HELP tessera_evictions_total Pods evicted (preemption, reclaim, gang roll-back).\n";
  o += "# TYPE tessera_evictions_total counter\n";
  o += fmt::format("tessera_evictions_total {}\n", k.evictions);
  o += "# HELP tessera_gang_rollbacks_total Gangs whose bound members were evicted because the "
       "rest could not be bound.\n# TYPE tessera_gang_rollbacks_total counter\n";
  o += fmt::format("tessera_gang_rollbacks_total {}\n", k.gang_rollbacks);
  o += "# HELP tessera_power_limit_patches_total Running pods whose power-limit annotation was "
       "changed (--power-shifting).\n# TYPE tessera_power_limit_patches_total counter\n";
  o += fmt::format("tessera_power_limit_patches_total {}\n", k.power_limit_patches);
  o += "# HELP tessera_stage_requests_total Nodes asked to stage a waiting gang's dataset "
       "(--prestage-datasets).\n# TYPE tessera_stage_requests_total counter\n";
  o += fmt::format("tessera_stage_requests_total {}\n", k.stage_requests);
  o += "# HELP tessera_kube_api_errors_total Failed writes to the Kubernetes API.\n";
  o += "# TYPE tessera_kube_api_errors_total counter\n";
  o += fmt::format("tessera_kube_api_errors_total {}\n", k.api_errors);
  o += "# HELP tessera_kube_relists_total Re-lists after the API server expired a watch.\n";
  o += "# TYPE tessera_kube_relists_total counter\n";
  o += fmt::format("tessera_kube_relists_total {}\n", k.relists);
  o += "# HELP tessera_kube_api_throttled_total Requests the API server answered 429 (or 5xx "
       "with Retry-After), sent again after the wait it asked for.\n";
  o += "# TYPE tessera_kube_api_throttled_total counter\n";
  o += fmt::format("tessera_kube_api_throttled_total {}\n", k.throttled);
  o += "# HELP tessera_kube_watch_reconnects_total Watches resumed after a dropped stream.\n";
  o += "# TYPE tessera_kube_watch_reconnects_total counter\n";
  o += fmt::format("tessera_kube_watch_reconnects_total {}\n", k.reconnects);
  o += "# HELP tessera_leader Whether this replica holds the lease (1) or stands by (0).\n";
  o += "# TYPE tessera_leader gauge\n";
  o += fmt::format("tessera_leader {}\n", k.leading ? 1 : 0);
  return o;
}

KubeApiServer::KubeApiServer(kube::KubeScheduler& scheduler, KubeReadAccess read_access,
                             int threads, TlsConfig tls)
    : scheduler_(scheduler),
      access_(std::move(read_access)),
      http_(std::make_unique<GuardedHttpServer>(
          [threads] {
            HttpLimits l;
            l.workers = threads;
            return l;
          }(),
          std::move(tls))) {
  http_->set_tcp_nodelay(true);
  kube::KubeScheduler& s = scheduler_;
  KubeReadAccess& access = access_;
  // Errors are JSON, as serve's; anything unexpected is a 500 naming it, never a crash.
  auto guarded = [](auto h) {
    return [h](const httplib::Request& req, httplib::Response& res) {
      answer_errors(res, [&] {
        try {
          h(req, res);
        } catch (const ServiceError& e) {
          // RFC 6750: a refused bearer token says which scheme to bring.
          if (e.kind() == ServiceError::kUnauthorized) {
            res.set_header("WWW-Authenticate", "Bearer realm=\"tessera kube\"");
          }
          throw;
        }
      });
    };
  };
  // A read of a cluster-wide view: `get` on its path.
  auto cluster_view = [&access, guarded](auto h) {
    return guarded([&access, h](const httplib::Request& req, httplib::Response& res) {
      access.require(access.who(req), req.path);
      h(req, res);
    });
  };
  // Open, for the kubelet's probes: alive, and ready once the cache is warm (a standby replica
  // is ready too, or a rollout would wait on it forever).
  auto probe = [&s](const httplib::Request&, httplib::Response& res) {
    if (!s.synced()) {
      res.status = 503;
      res.set_content("not synced: the first list of pods and nodes is not done\n", "text/plain");
      return;
    }
    res.set_content(s.leading() ? "ok (leader)\n" : "ok (standby)\n", "text/plain");
  };
  http_->Get("/healthz", probe);
  http_->Get("/readyz", probe);
  GuardedHttpServer& front = *http_;
  http_->Get("/metrics",
             cluster_view([&s, &front](const httplib::Request&, httplib::Response& res) {
               res.set_content(render_kube_prometheus(s.metrics(), s.kube_metrics()) +
                                   render_http_front(front.stats()),
                               "text/plain; version=0.0.4");
             }));
  // The read routes both servers answer alike: a reader sees the jobs of the namespaces whose
  // pods it may list (asked before the scheduler's lock); queues, nodes and the history are for
  // a reader RBAC lets see the cluster's views.
  ReadRoutes reads;
  reads.get = [&front](const std::string& pattern, httplib::Server::Handler h) {
    front.Get(pattern, std::move(h));
  };
  reads.guard = [guarded](httplib::Server::Handler h) -> httplib::Server::Handler {
    return guarded(std::move(h));
  };
  reads.reader = [&s, &access](const httplib::Request& req, bool cluster_wide) {
    const KubeReader who = access.who(req);
    if (cluster_wide) {
      access.require(who, req.path);
      return Reader{true, {}};
    }
    const auto seen = access.visible(who, [&s] { return s.job_namespaces(); });
    return seen ? Reader{false, *seen} : Reader{true, {}};
  };
  reads.server = "kube";
  reads.read_only = true;
  reads.token_required = !access_.is_open();
  add_read_routes(s, reads);
  http_->Get("/v1/whoami", guarded([&access](const httplib::Request& req, httplib::Response& res) {
               const KubeReader r = access.who(req);
               nlohmann::json me{{"admin", r.open || access.sees_all_namespaces(r)},
                                 {"tenant", nullptr},
                                 {"read_only", true},
                                 {"server", "kube"}};
               if (!r.open) me["user"] = r.user.username;
               res.set_content(json_text(me), kJson);
             }));
  // An adaptive pod group's report (--policy goodput): by the group's own token (annotation
  // tessera.io/report-token on its bound pods), to the leader.
  http_->Post(R"(/v1/groups/([^/]+)/([^/]+)/report)",
              guarded([&s](const httplib::Request& req, httplib::Response& res) {
                refuse_invalid_utf8(req);
                const JobReport r = job_report_from_json(json_body(req));
                const JobReportView v = s.report(req.matches[1], req.matches[2], bearer(req), r);
                res.set_content(json_text(to_json(v)), kJson);
              }));
  // Other mutations belong to Kubernetes here: say so rather than 404.
  http_->Post(".*", [](const httplib::Request& req, httplib::Response& res) {
    send_error(res, 405,
               "tessera kube serves a read-only API; " + req.path +
                   ": create, delete or change pods and PodGroups with the Kubernetes API");
  });
}

KubeApiServer::~KubeApiServer() {
  stop();
}

int KubeApiServer::bind(const std::string& host, int port) {
  return bind_server(*http_, host, port);
}

void KubeApiServer::run() {
  http_->listen_after_bind();
}

void KubeApiServer::stop() {
  if (http_) http_->shutdown();
}

}  // namespace tessera
