// tessera serve: the scheduler service on this host (control/ + api/ + the local backend).
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <stdexcept>
#include <thread>
#include <tuple>

#include "api/http_server.h"
#include "apps/energy_options.h"
#include "apps/goodput_options.h"
#include "apps/listen.h"
#include "apps/service_commands.h"
#include "backend/job_network.h"
#include "control/serve/service.h"
#include "control/token.h"
#include "model/carbon_intensity.h"
#include "model/input_error.h"
#include "model/yaml_util.h"

namespace tessera {

CLI::App* add_serve_command(CLI::App& app, ServeArgs& a) {
  CLI::App* s = app.add_subcommand("serve", "Run the scheduler service (HTTP API, local jobs)");
  s->add_option("--listen", a.listen, "host:port to serve on (port 0: any free port)");
  s->add_option("--db", a.db, "SQLite database file (created if missing)");
  s->add_option("--work-dir", a.work_dir,
                "where jobs' working directories and logs go (default: DB.jobs)");
  s->add_option("--virtual-gpus", a.virtual_gpus,
                "schedule N virtual GPUs (default: the GPUs nvidia-smi reports, else 8)")
      ->check(CLI::Range(0, 4096));
  s->add_option("--virtual-gpu-type", a.virtual_gpu_type,
                "the GPU type virtual GPUs are (e.g. H100: their power is then estimated as "
                "that type's; \"virtual\" draws nothing)")
      ->capture_default_str();
  s->add_option("--data-dir", a.data_dir,
                "measured data (the power model reads energy/zeus; default: TESSERA_DATA, else "
                "../shared/data)");
  s->add_option("--node-power", a.node_power,
                "this host's base power in watts (CPU, memory, fans; 0: not counted), added to "
                "the GPUs' in tessera_power_watts")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e6));
  s->add_option("--pue", a.pue,
                "power usage effectiveness: facility power per IT watt (tessera_power_watts)")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 10.0));
  s->add_option("--carbon", a.carbon,
                "hourly carbon intensity (CSV: time,g_per_kwh; time in Unix seconds or "
                "ISO-8601 UTC) for usage's carbon_kg")
      ->check(CLI::ExistingFile);
  CLI::Option* cap = s->add_option(
      "--power-cap", a.power_cap,
      "cap on this host's estimated IT draw: kW, or a percentage of its peak draw (--node-power "
      "plus every GPU at its TDP, e.g. 70%); a job that would pass it waits (reason PowerCap)");
  s->add_flag("--power-shifting", a.power_shifting,
              "under --power-cap, lower jobs' GPU power limits (least speed lost per watt first) "
              "before holding jobs; raised again as power frees")
      ->needs(cap);
  s->add_option("--energy-weight", a.energy_weight,
                "Zeus's energy knob for queues that set no energy_weight: 0 runs jobs at full "
                "power, 1 at the power limit that spends least energy per unit of work")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  s->add_flag("--apply-power-limits", a.apply_power_limits,
              "set each job's power limit on its GPUs with nvidia-smi -pl (and the default back "
              "when it ends); needs real GPUs and root. Without it limits are advisory: "
              "recorded, reported and used in the energy estimates");
  CLI::Option* thermal = s->add_option(
      "--thermal-limit", a.thermal_limit,
      "GPU temperature (°C) new work must not push a GPU past: from each reading's temperature "
      "and draw, a job starts only if the host's GPUs have the thermal headroom for it (reason "
      "PowerCap); real GPUs only");
  thermal->check(CLI::Range(1.0, 120.0));
  s->add_option("--inlet-temp", a.inlet_temp,
                "the cooling air's temperature at the GPUs' inlet (°C), for --thermal-limit")
      ->capture_default_str()
      ->check(CLI::Range(-20.0, 60.0))
      ->needs(thermal);
  s->add_option("--admin-token", a.admin_token,
                "the admin's bearer token (default: TESSERA_ADMIN_TOKEN, else the stored one, "
                "else a new one written to DB.admin-token)");
  s->add_option("--queues", a.queues, "queue tree YAML (default: one equal queue per tenant)");
  s->add_option("--policy", a.policy, "scheduling policy, as for simulate (default: fair)");
  add_goodput_options(*s, a.goodput);
  add_goodput_round_option(*s, a.goodput);
  s->add_option("--checkpoint-grace", a.checkpoint_grace,
                "seconds between SIGTERM and SIGKILL for jobs that name none")
      ->check(CLI::Range(0.0, 86400.0));
  s->add_option("--max-checkpoint-grace", a.max_checkpoint_grace,
                "the longest grace a job may ask for, in seconds (more is refused; every grace "
                "is held to it)")
      ->check(CLI::Range(0.0, 30.0 * 86400.0));
  s->add_option("--history-interval", a.history_interval,
                "seconds between the samples the dashboard's charts draw (GET /v1/history); "
                "0 takes none")
      ->capture_default_str()
      ->check([](const std::string& v) {
        const double x = std::stod(v);
        return x == 0 || (x >= 1 && x <= 3600) ? std::string()
                                               : std::string("0 (none) or 1 to 3600 seconds");
      });
  s->add_option("--history-hours", a.history_hours,
                "hours of samples kept, in memory and in the database (at least 1)")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 24.0 * 90));
  s->add_option("--history-days", a.history_days,
                "days an hourly average of the samples is kept in the database, for the "
                "dashboard's last week and month (0: none)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 3660.0));
  s->add_option("--retain-finished", a.retain_finished_hours,
                "hours a finished job stays in memory; after that the API reads it from the "
                "database (-1: for ever)")
      ->capture_default_str()
      ->check(CLI::Range(-1.0, 1e6));
  s->add_option("--archive-after", a.archive_after_hours,
                "hours after which finished jobs move out of the database's live tables into "
                "JSON-lines files in --archive-dir, hourly (accounting keeps their usage; "
                "default: never; at least --retain-finished)")
      ->check(CLI::Range(0.0, 1e6));
  s->add_option("--archive-dir", a.archive_dir, "where archived jobs go (default: DB.archive)");
  s->add_option("--addr-file", a.addr_file, "write host:port here once listening");
  s->add_flag("--sync-full", a.sync_full,
              "fsync every commit (survives power loss; fewer submissions per second)");
  s->add_option("--nvidia-smi", a.nvidia_smi, "nvidia-smi binary for GPU discovery");
  s->add_option("--threads", a.threads,
                "HTTP worker threads: requests served at once (idle connections hold none)")
      ->check(CLI::Range(1, 256));
  s->add_option("--job-user", a.job_user,
                "whose uid jobs run as: tenant (each tenant its own, from --tenant-uid-base; "
                "needs root, the default as root) or server (the server's own, the default "
                "otherwise)")
      ->check(CLI::IsMember({"tenant", "server"}));
  s->add_option("--tenant-uid-base", a.tenant_uid_base,
                "the first uid (and gid) given to a tenant's jobs; the next tenant gets the next, "
                "up to 100000 of them (default: the range this database used, else one derived "
                "from its id; a range another server on this host holds is refused)")
      ->check(CLI::Range(int64_t{1000}, int64_t{2000000000}));
  s->add_option("--cgroups", a.cgroups,
                "a cgroup per job member limiting its memory to its request, its processes to "
                "--pids-per-member and weighting its CPU: auto (when the host allows it: root, "
                "cgroup v2 or v1), on (refuse to start without), off")
      ->check(CLI::IsMember({"auto", "on", "off"}));
  s->add_option("--pids-per-member", a.pids_per_member,
                "processes (and threads) one job member may have at once, with cgroups")
      ->check(CLI::Range(int64_t{16}, int64_t{4194304}));
  s->add_option("--job-network", a.job_network,
                "isolated: each job in a network namespace of its own, with loopback and its "
                "TESSERA_REPORT_URL only (needs root; the default as root); host: the host's "
                "network, where jobs reach each other (docs/service.md)")
      ->check(CLI::IsMember({"isolated", "host"}));
  s->add_option("--default-memory", a.default_memory,
                "memory per member of a job that asks for none (e.g. 16Gi): its cgroup's limit "
                "and its demand in placement, where its queue sets no memory.default (default: "
                "--max-memory; neither: no limit)");
  s->add_option("--max-memory", a.max_memory,
                "the most memory per member a job may ask for (e.g. 128Gi), where its queue sets "
                "no memory.max; more is refused (400)");
  s->add_option("--pass-env", a.pass_env,
                "a variable of the server's environment that jobs see too (repeatable); they "
                "see only PATH, locale, TZ and TMPDIR otherwise");
  s->add_option("--max-pending-per-tenant", a.limits.max_pending_jobs,
                "waiting jobs one tenant may have; a submission beyond is refused (429)")
      ->check(CLI::Range(int64_t{1}, int64_t{100000000}));
  s->add_option("--max-pending-per-user", a.limits.max_pending_per_user,
                "waiting jobs each user inside a tenant may have (0: no limit of its own; "
                "the tenant's applies); a submission beyond is refused (429)")
      ->check(CLI::Range(int64_t{0}, int64_t{100000000}));
  s->add_option("--max-gang-size", a.limits.max_gang_members,
                "members one job may have; a bigger gang is refused (400)")
      ->check(CLI::Range(1, 1000000));
  s->add_option("--max-processes-per-tenant", a.limits.max_running_members,
                "members one tenant's running jobs may have together; more wait")
      ->check(CLI::Range(int64_t{1}, int64_t{100000000}));
  s->add_option("--max-submissions-per-second", a.limits.submissions_per_second,
                "submissions a second per tenant, sustained (0: no limit; the admin is not "
                "metered)")
      ->check(CLI::Range(0.0, 1e9));
  s->add_option("--submission-burst", a.limits.submission_burst,
                "submissions a tenant may make at once before the rate applies")
      ->check(CLI::Range(1.0, 1e9));
  add_tls_options(*s, a.tls_cert, a.tls_key, "serve HTTPS (clients verify it with TESSERA_CA)");
  s->add_option("--classify", a.classify,
                "give a job that names no priority class the class of the kind this workload "
                "classifier predicts (logistic, threshold or majority; docs/classifier.md); it "
                "learns from jobs whose class their user set, as they end")
      ->check(CLI::IsMember({"logistic", "threshold", "majority"}));
  s->add_option("--ui-dir", a.ui_dir,
                "serve the dashboard (/ui/) from DIR/dashboard instead of the copy built in, "
                "re-read at every request (for working on the web/ folder)")
      ->check(CLI::ExistingDirectory);
  s->add_option("--dataset-dir", a.dataset_dir,
                "the dataset cache on this host's fast storage: a job naming a dataset starts "
                "once its copy is there (docs/data.md); needs --stage-command");
  s->add_option("--stage-command", a.stage_command,
                "shell command that copies dataset $TESSERA_DATASET into $TESSERA_DATASET_DIR "
                "(e.g. 'rsync -a /mnt/datasets/$TESSERA_DATASET/ $TESSERA_DATASET_DIR/')");
  s->add_option("--dataset-cache-gb", a.dataset_cache_gb,
                "the cache's capacity; least recently used datasets no job holds make room "
                "(default: no bound)")
      ->check(CLI::NonNegativeNumber);
  s->add_option("--prestage-datasets", a.prestage_datasets,
                "datasets staged at once ahead of the waiting jobs that read them, in free room "
                "only (default 1; 0: none)")
      ->check(CLI::Range(0, 64));
  s->add_option("--metrics-token", a.metrics_token,
                "a token that reads /metrics and nothing else, for a Prometheus scrape "
                "(else TESSERA_METRICS_TOKEN; without either only the admin token reads it)");
  s->add_option("--max-connections", a.max_connections,
                "open connections at most, all clients together (then 503)")
      ->check(CLI::Range(1, 65536));
  s->add_option("--max-connections-per-client", a.max_connections_per_client,
                "open connections at most from one IP address (then 429)")
      ->check(CLI::Range(1, 65536));
  return s;
}

int run_serve(const ServeArgs& a) {
  std::string host;
  int port = 0;
  split_listen(a.listen, host, port);

  // SIGINT / SIGTERM stop the server; blocked here so that every thread started below
  // inherits the mask and one thread waits for them (jobs' processes get a clean mask).
  const sigset_t stop_signals = block_stop_signals();
  // SIGHUP reads the --queues file again; waited for by the same thread.
  sigset_t waited = stop_signals;
  sigaddset(&waited, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &waited, nullptr);

  ServiceOptions opt;
  opt.db_path = a.db;
  opt.work_dir = a.work_dir.empty() ? a.db + ".jobs" : a.work_dir;
  opt.virtual_gpus = a.virtual_gpus;
  opt.nvidia_smi = a.nvidia_smi;
  opt.queues_path = a.queues;
  opt.policy = a.policy;
  opt.goodput = goodput_allocation(a.goodput);
  opt.goodput_round_seconds = a.goodput.round_seconds;
  warn_unused_goodput_options("serve", a.policy, a.goodput);
  opt.checkpoint_grace_seconds = a.checkpoint_grace;
  opt.max_checkpoint_grace_seconds = a.max_checkpoint_grace;
  opt.classifier = a.classify;
  opt.dataset_dir = a.dataset_dir;
  opt.stage_command = a.stage_command;
  opt.dataset_cache_gb = a.dataset_cache_gb;
  opt.prestage_datasets = a.prestage_datasets;
  opt.virtual_gpu_type = a.virtual_gpu_type;
  opt.node_power_w = a.node_power;
  opt.pue = a.pue;
  opt.power_cap = a.power_cap;
  opt.power_shifting = a.power_shifting;
  opt.energy_weight = a.energy_weight;
  opt.apply_power_limits = a.apply_power_limits;
  opt.thermal_limit_c = a.thermal_limit;
  opt.inlet_temp_c = a.inlet_temp;
  opt.root = ::geteuid() == 0;
  opt.power_model = load_service_power_model(a.data_dir, "serve");
  if (!a.carbon.empty()) {
    opt.carbon = std::make_shared<const CarbonIntensity>(
        CarbonIntensity::load(a.carbon, CarbonIntensity::TimeBase::kAbsolute));
  }
  opt.history_interval_seconds = a.history_interval;
  opt.history_window_seconds = a.history_hours * 3600;
  opt.history_hourly_seconds = a.history_days * 86400;
  opt.retain_finished_seconds = a.retain_finished_hours < 0 ? -1 : a.retain_finished_hours * 3600;
  opt.archive_after_seconds = a.archive_after_hours < 0 ? -1 : a.archive_after_hours * 3600;
  opt.archive_dir = a.archive_dir;
  opt.sync_full = a.sync_full;
  opt.limits = a.limits;
  const bool root = ::geteuid() == 0;
  if (a.job_user == "tenant" && !root) {
    throw std::runtime_error(
        "--job-user tenant needs root (to switch uids); this server runs as uid " +
        std::to_string(::geteuid()) + ", so its jobs run as that uid (--job-user server)");
  }
  opt.tenant_uids = a.job_user == "tenant" || (a.job_user.empty() && root);
  if (opt.tenant_uids) {
    // A job of another uid must pass through every directory above its own (for $HOME and
    // TESSERA_WORKDIR by name); /root, say, lets nobody through.
    std::error_code ec;
    for (std::filesystem::path p = std::filesystem::absolute(opt.work_dir, ec).parent_path();
         !ec && !p.empty(); p = p.parent_path()) {
      struct stat st {};
      if (::stat(p.c_str(), &st) == 0 && (st.st_mode & S_IXOTH) == 0) {
        std::cerr << "tessera serve: warning: jobs run as their tenant's uid but cannot pass "
                     "through "
                  << p.string()
                  << " (no x for others): their HOME and TESSERA_WORKDIR will not resolve; "
                     "put --work-dir elsewhere (e.g. under /srv or /var/lib)\n";
        break;
      }
      if (p == p.root_path()) break;
    }
  }
  opt.tenant_uid_base = a.tenant_uid_base;
  if (a.job_network == "isolated" && !root) {
    throw std::runtime_error(
        "--job-network isolated needs root (to make network namespaces); this server runs as "
        "uid " +
        std::to_string(::geteuid()));
  }
  opt.isolate_job_network = a.job_network == "isolated" || (a.job_network.empty() && root);
  if (opt.isolate_job_network) {
    // Root in a container may still lack CAP_SYS_ADMIN: asked for, that is an error; by
    // default, the host's network with a warning (rather than every job failing to start).
    try {
      (void)JobNetwork::create(0);
    } catch (const std::exception& e) {
      if (a.job_network == "isolated")
        throw std::runtime_error(std::string("--job-network isolated: ") + e.what());
      std::cerr << "tessera serve: warning: jobs share the host's network (" << e.what()
                << "); see --job-network\n";
      opt.isolate_job_network = false;
    }
  }
  opt.pass_env = a.pass_env;
  opt.pids_per_member = a.pids_per_member;
  for (const auto& [flag, text, into] :
       {std::tuple{"--default-memory", &a.default_memory, &opt.default_memory_mib},
        std::tuple{"--max-memory", &a.max_memory, &opt.max_memory_mib}}) {
    if (text->empty()) continue;
    if (!parse_memory_quantity(*text, *into) || *into <= 0) {
      throw std::runtime_error(std::string(flag) + ": expected a memory quantity like 16Gi, got " +
                               quote_prefix(*text));
    }
  }
  if (opt.default_memory_mib > 0 && opt.max_memory_mib > 0 &&
      opt.default_memory_mib > opt.max_memory_mib) {
    throw std::runtime_error("--default-memory is more than --max-memory");
  }
  std::string confinement = "off (--cgroups off)";
  if (a.cgroups != "off") {
    opt.cgroups = Cgroups::detect();
    confinement = opt.cgroups.describe();
    if (a.cgroups == "on" && !opt.cgroups.available()) {
      throw std::runtime_error("--cgroups on, but " + confinement);
    }
  }
  // Everything the server creates (the database and its journal, the lock, the admin token
  // file, logs) is its own to read: a job, or another user of the host, must not.
  ::umask(077);
  Service service(opt);

  std::string admin = a.admin_token;
  if (admin.empty()) {
    const char* e = std::getenv("TESSERA_ADMIN_TOKEN");
    if (e != nullptr) admin = e;
  }
  if (!admin.empty()) {
    service.set_admin_token(admin);
  } else if (!service.has_admin_token()) {
    admin = new_token();
    service.set_admin_token(admin);
    const std::string path = a.db + ".admin-token";
    {
      std::ofstream out(path, std::ios::trunc);
      out << admin << "\n";
      if (!out) throw std::runtime_error("cannot write the admin token to " + path);
    }
    chmod(path.c_str(), S_IRUSR | S_IWUSR);
    std::cerr << "tessera serve: admin token written to " << path << " (export TESSERA_TOKEN=$(cat "
              << path << "))\n";
  }

  check_tls_pair(a.tls_cert, a.tls_key);
  ApiOptions api_opt;
  api_opt.tls = TlsConfig{a.tls_cert, a.tls_key};
  api_opt.metrics_token = a.metrics_token;
  api_opt.ui_dir = a.ui_dir;
  if (api_opt.metrics_token.empty()) {
    if (const char* e = std::getenv("TESSERA_METRICS_TOKEN")) api_opt.metrics_token = e;
  }
  api_opt.http.workers = a.threads;
  api_opt.http.max_connections = a.max_connections;
  api_opt.http.max_connections_per_client = a.max_connections_per_client;
  ApiServer api(service, api_opt);
  const int bound = api.bind(host, port);
  const std::string addr = host + ":" + std::to_string(bound);
  // Where the jobs on this host reach the API (adaptive jobs report there): a wildcard address
  // is reached on the loopback.
  const std::string reach = host == "0.0.0.0" || host.empty() ? "127.0.0.1"
                            : host == "::" || host == "[::]"  ? "[::1]"
                                                              : host;
  service.set_api_url((a.tls_cert.empty() ? "http://" : "https://") + reach + ":" +
                      std::to_string(bound));
  service.set_job_listeners(Service::JobListeners{[&api](int fd) { api.serve_listener(fd); },
                                                  [&api](int fd) { api.stop_listener(fd); }});
  service.start();
  std::thread signals([&] {
    for (;;) {
      int sig = 0;
      sigwait(&waited, &sig);
      if (sig != SIGHUP) break;
      try {
        const std::optional<QueueTreeChange> change = service.reload_queue_tree();
        if (!change) {
          std::cerr << "tessera serve: SIGHUP: no --queues file to read again\n";
          continue;
        }
        std::cerr << "tessera serve: SIGHUP: queue tree " << a.queues << " applied ("
                  << change->queues << " queues, " << change->added.size() << " leaves added, "
                  << change->removed.size() << " removed)\n";
      } catch (const std::exception& e) {
        std::cerr << "tessera serve: SIGHUP: the queue tree is unchanged: " << e.what() << "\n";
      }
    }
    api.stop();
  });
  signals.detach();  // the process exits after run() returns; a blocked sigwait needs no join
  write_addr_file(a.addr_file, addr);
  const auto& c = service.cluster();
  std::cerr << "tessera serve: listening on " << (a.tls_cert.empty() ? "http://" : "https://")
            << addr << " with " << c.num_gpus() << " GPUs ("
            << c.gpu_types().at(c.node(0).gpu_type).name << "), database " << a.db << ", jobs in "
            << opt.work_dir << " (as "
            << (opt.tenant_uids ? "their tenant's uid" : "the server's uid")
            << "; cgroups: " << confinement
            << "; network: " << (opt.isolate_job_network ? "isolated" : "host") << ")\n";
  api.run();
  service.stop();
  std::cerr << "tessera serve: stopped (running jobs keep running and are adopted on restart)\n";
  return 0;
}

}  // namespace tessera
