// The HTTP face of `tessera kube` (--listen): /healthz and /readyz, /metrics (the serve metric
// names plus bind latency, binds, evictions and API errors) and the read-only part of the serve
// API (GET /v1/queues, /v1/jobs, /v1/jobs/{id}, /v1/nodes; a job is a pod group), so that
// `tessera queues|jobs|job|nodes` work against either. Who may read what is KubeReadAccess's
// (Kubernetes tokens and RBAC, or open); the probes, /v1/info and the dashboard's files are
// open. The one write, an adaptive pod group's report (POST /v1/groups/NS/NAME/report,
// --policy goodput), takes the group's own token.
#pragma once

#include <memory>
#include <string>

#include "api/guarded_http_server.h"
#include "api/kube_read_access.h"
#include "control/kube/kube_scheduler.h"

namespace tessera {

class KubeApiServer {
 public:
  KubeApiServer(kube::KubeScheduler& scheduler, KubeReadAccess access, int threads = 16,
                TlsConfig tls = {});
  ~KubeApiServer();
  KubeApiServer(const KubeApiServer&) = delete;
  KubeApiServer& operator=(const KubeApiServer&) = delete;

  // Binds host:port (0 = any free port); returns the port or throws naming the address.
  int bind(const std::string& host, int port);
  void run();  // serves until stop() (blocks)
  void stop();

 private:
  kube::KubeScheduler& scheduler_;
  KubeReadAccess access_;
  std::unique_ptr<GuardedHttpServer> http_;
};

// /metrics of `tessera kube`: the service's families, then the Kubernetes ones.
std::string render_kube_prometheus(const ServiceMetrics& m, const kube::KubeMetrics& k);

}  // namespace tessera
