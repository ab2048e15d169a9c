// tessera kube: schedules the pods of a Kubernetes cluster that name it (spec.schedulerName).
#include "apps/kube_command.h"

#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <iostream>
#include <thread>

#include "api/kube_api.h"
#include "apps/energy_options.h"
#include "apps/listen.h"
#include "backend/kube/kube_config.h"
#include "control/kube/kube_scheduler.h"
#include "model/carbon_intensity.h"

namespace tessera {

CLI::App* add_kube_command(CLI::App& app, KubeArgs& a) {
  CLI::App* k = app.add_subcommand(
      "kube", "Schedule a Kubernetes cluster's pods that name this scheduler (docs/kubernetes.md)");
  k->add_option("--kubeconfig", a.kubeconfig,
                "kubeconfig file (default: $KUBECONFIG, else the in-cluster service account)");
  k->add_option("--context", a.context, "kubeconfig context (default: its current-context)");
  k->add_option("--scheduler-name", a.scheduler_names,
                "schedule pods whose spec.schedulerName is this (repeatable; default tessera)")
      ->delimiter(',');
  k->add_option("--queues", a.queues,
                "queue tree YAML, as for simulate and serve (default: one equal queue per queue "
                "name)");
  k->add_option("--queues-from", a.queues_from,
                "where the queue tree comes from: file (--queues) or crd (Tessera's Queue "
                "objects, queues.scheduling.tessera.io; changes apply without a restart)")
      ->check(CLI::IsMember({"file", "crd"}));
  k->add_option("--topology-labels", a.topology_labels,
                "node label keys of the network topology, coarsest first (KEY,KEY,...)")
      ->delimiter(',');
  k->add_option("--policy", a.policy, "scheduling policy, as for simulate (default: fair)");
  add_goodput_options(*k, a.goodput);
  k->add_option("--locality-wait", a.locality_wait,
                "a gang whose pods name a dataset (tessera.io/dataset) waits up to this many "
                "seconds for nodes labelled as holding it (data.tessera.io/NAME) before going "
                "elsewhere (docs/data.md)")
      ->check(CLI::Range(0.0, 86400.0 * 30));
  k->add_option("--prestage-datasets", a.prestage_datasets,
                "ask at most this many nodes at once to stage a waiting gang's dataset ahead "
                "(annotation stage.data.tessera.io/NAME, for a data agent that labels the node "
                "data.tessera.io/NAME when done; docs/data.md); 0: none")
      ->check(CLI::Range(0, 100000));
  add_goodput_round_option(*k, a.goodput);
  k->add_flag("--leader-elect", a.leader_elect,
              "run as one of several replicas: only the holder of the Lease schedules");
  k->add_option("--lease-namespace", a.lease_namespace, "namespace of the leader-election Lease");
  k->add_option("--lease-name", a.lease_name, "name of the leader-election Lease");
  k->add_option("--identity", a.identity, "this replica's name in the Lease (default host_pid)");
  k->add_option("--listen", a.listen,
                "host:port for /healthz, /metrics and the read API (port 0: any free port)");
  k->add_option("--addr-file", a.addr_file, "write host:port here once listening");
  k->add_option("--read-auth", a.read_auth,
                "who may read --listen: kubernetes (a bearer token the API server accepts, "
                "TokenReview; RBAC decides what it sees, SubjectAccessReview) or none (anyone "
                "who reaches the port sees every namespace). Default: none on a loopback "
                "address, else kubernetes")
      ->check(CLI::IsMember({"kubernetes", "none"}));
  add_tls_options(*k, a.tls_cert, a.tls_key,
                  "serve --listen over HTTPS (callers' tokens never cross the network in clear)");
  k->add_option("--checkpoint-grace", a.checkpoint_grace,
                "eviction grace (s) for preempted pods that name none "
                "(tessera.io/checkpoint-grace-seconds) when the queue tree sets none")
      ->check(CLI::Range(0.0, 86400.0));
  k->add_option("--gang-timeout", a.gang_timeout,
                "seconds a gang may stay partly bound before its bound members are evicted")
      ->check(CLI::Range(1.0, 86400.0));
  k->add_option("--bind-workers", a.bind_workers, "parallel bind requests")
      ->check(CLI::Range(1, 256));
  k->add_option("--status-qps", a.status_qps,
                "at most this many pod status writes and events a second")
      ->check(CLI::Range(1.0, 100000.0));
  k->add_option("--usage-save-interval", a.usage_save_interval,
                "seconds between saves of long-term usage (when the queue tree sets "
                "fairness.half_life) to ConfigMap <lease-name>-usage in the lease namespace; 0: "
                "kept in memory only")
      ->check(CLI::Range(0.0, 86400.0));
  k->add_option("--history-interval", a.history_interval,
                "seconds between the samples the dashboard's charts draw (/ui/, GET "
                "/v1/history; kept in memory); 0 takes none")
      ->capture_default_str()
      ->check([](const std::string& v) {
        const double x = std::stod(v);
        return x == 0 || (x >= 1 && x <= 3600) ? std::string()
                                               : std::string("0 (none) or 1 to 3600 seconds");
      });
  k->add_option("--history-hours", a.history_hours, "hours of samples kept")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 24.0 * 90));
  // Power policies: serve's flags, for a cluster of nodes (docs/kubernetes.md, "Power and
  // energy").
  k->add_option("--data-dir", a.data_dir,
                "measured data (the power model reads energy/zeus; default: TESSERA_DATA, else "
                "../shared/data)");
  k->add_option("--node-power", a.node_power,
                "each node's base power in watts (CPU, memory, fans; 0: not counted), added to "
                "the GPUs' in the cluster's estimated draw")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e6));
  CLI::Option* cap = k->add_option(
      "--power-cap", a.power_cap,
      "cap on the cluster's estimated IT draw: kW, or a percentage of its peak draw (every "
      "schedulable node's --node-power plus its GPUs at their TDP, e.g. 70%); a gang that would "
      "pass it waits (reason PowerCap)");
  k->add_flag("--power-shifting", a.power_shifting,
              "under --power-cap, lower gangs' GPU power limits (least speed lost per watt "
              "first) before holding gangs; raised again as power frees. Limits are advisory: "
              "written on the pods as annotation tessera.io/power-limit-watts for a node agent")
      ->needs(cap);
  k->add_option("--energy-weight", a.energy_weight,
                "Zeus's energy knob for queues that set no energy_weight: 0 runs jobs at full "
                "power, 1 at the power limit that spends least energy per unit of work")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  k->add_option("--carbon", a.carbon,
                "hourly carbon intensity (CSV: time,g_per_kwh; time in Unix seconds or "
                "ISO-8601 UTC): best-effort gangs of queues with carbon_defer wait for a "
                "cleaner hour (reason CarbonDefer)")
      ->check(CLI::ExistingFile);
  return k;
}

int run_kube(const KubeArgs& a) {
  std::string host;
  int port = 0;
  split_listen(a.listen, host, port);
  check_tls_pair(a.tls_cert, a.tls_key);
  const sigset_t stop_signals = block_stop_signals();

  // The power flags are checked before anything connects: a mistake is said at once.
  kube::PowerOptions power;
  power.node_power_w = a.node_power;
  power.cap = a.power_cap;
  power.shifting = a.power_shifting;
  power.energy_weight = a.energy_weight;
  kube::check_power_options(power, /*elastic=*/false);  // kube never resizes (pod groups)
  power.model = load_service_power_model(a.data_dir, "kube");
  if (!a.carbon.empty()) {
    power.carbon = std::make_shared<const CarbonIntensity>(
        CarbonIntensity::load(a.carbon, CarbonIntensity::TimeBase::kAbsolute));
  }

  std::string kubeconfig = a.kubeconfig;
  if (kubeconfig.empty()) {
    if (const char* e = std::getenv("KUBECONFIG"); e != nullptr && *e != '\0') kubeconfig = e;
  }
  kube::KubeConfig config =
      kubeconfig.empty() ? kube::in_cluster_config() : kube::load_kubeconfig(kubeconfig, a.context);
  kube::SchedulerOptions opt;
  opt.model.scheduler_names = a.scheduler_names;
  opt.model.topology_labels = a.topology_labels;
  opt.model.queues_path = a.queues;
  opt.model.queues_from_objects = a.queues_from == "crd";
  if (opt.model.queues_from_objects && !a.queues.empty()) {
    throw std::invalid_argument(
        "--queues and --queues-from crd name two sources of the queue tree: use one");
  }
  opt.policy = a.policy;
  opt.goodput = goodput_allocation(a.goodput);
  opt.goodput_round = a.goodput.round_seconds;
  opt.locality_wait = a.locality_wait;
  opt.prestage_datasets = a.prestage_datasets;
  warn_unused_goodput_options("kube", a.policy, a.goodput);
  opt.checkpoint_grace = a.checkpoint_grace;
  opt.gang_timeout = a.gang_timeout;
  opt.bind_workers = a.bind_workers;
  opt.status_qps = a.status_qps;
  opt.history_interval = a.history_interval;
  opt.history_window = a.history_hours * 3600;
  opt.usage_save_interval = a.usage_save_interval;
  opt.power = std::move(power);
  opt.leader_elect = a.leader_elect;
  opt.lease.ns = a.lease_namespace;
  opt.lease.name = a.lease_name;
  opt.lease.identity = a.identity;
  if (opt.lease.identity.empty()) {
    char name[256] = {};
    gethostname(name, sizeof name - 1);
    opt.lease.identity = std::string(name) + "_" + std::to_string(getpid());
  }
  opt.reporting_instance = opt.lease.identity;
  kube::ClientOptions copt;
  copt.connections = a.bind_workers + 8;
  auto client = std::make_shared<kube::Client>(config, copt);
  kube::KubeScheduler scheduler(client, opt);
  const bool loopback =
      host == "localhost" || host.starts_with("127.") || host == "::1" || host == "[::1]";
  const std::string read_auth =
      !a.read_auth.empty() ? a.read_auth : (loopback ? "none" : "kubernetes");
  KubeApiServer api(
      scheduler, read_auth == "none" ? KubeReadAccess::open() : KubeReadAccess::kubernetes(client),
      16, TlsConfig{a.tls_cert, a.tls_key});
  const int bound = api.bind(host, port);
  const std::string addr = host + ":" + std::to_string(bound);
  scheduler.start();
  std::thread signals([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    api.stop();
  });
  signals.detach();
  write_addr_file(a.addr_file, addr);
  std::cerr << "tessera kube: scheduling pods of schedulerName " << a.scheduler_names.front()
            << " on " << config.server << " (" << config.source << "); read API on "
            << (a.tls_cert.empty() ? "http://" : "https://") << addr
            << (read_auth == "none" ? " (open to anyone who reaches it)"
                                    : " (Kubernetes tokens and RBAC)")
            << (a.leader_elect ? ", leader election on " + a.lease_namespace + "/" + a.lease_name +
                                     " as " + opt.lease.identity
                               : std::string())
            << "\n";
  api.run();
  scheduler.stop();
  std::cerr << "tessera kube: stopped\n";
  return 0;
}

}  // namespace tessera
