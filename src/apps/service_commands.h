// `tessera serve` (the scheduler service) and its client commands: submit, jobs, job,
// cancel, queues, nodes, logs, tenant.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "apps/goodput_options.h"
#include "control/serve/tenant_limits.h"

namespace tessera {

struct ServeArgs {
  std::string listen = "127.0.0.1:8080";
  // Datasets (ServiceOptions::dataset_dir and the rest; docs/data.md).
  std::string dataset_dir;
  std::string stage_command;
  double dataset_cache_gb = 0;
  int prestage_datasets = -1;  // -1: not given (1 with --dataset-dir)
  std::string db = "tessera.db";
  std::string work_dir;  // empty: <db>.jobs next to the database
  int virtual_gpus = 0;
  std::string admin_token;  // empty: TESSERA_ADMIN_TOKEN, else kept / generated
  std::string queues;
  std::string policy = "fair";
  double checkpoint_grace = 30;
  double max_checkpoint_grace = 3600;
  std::string addr_file;  // write the bound address here once listening
  bool sync_full = false;
  std::string nvidia_smi = "nvidia-smi";
  // Threads that run handlers. Idle and slow connections hold none (GuardedHttpServer), so
  // this bounds concurrent requests being served, not clients.
  int threads = 16;
  TenantLimits limits;
  std::string job_user;          // "tenant", "server"; empty: tenant when root, else server
  int64_t tenant_uid_base = -1;  // -1: derived from the database (control/serve/uid_range.h)
  std::vector<std::string> pass_env;
  std::string cgroups = "auto";  // auto, on, off
  std::string tls_cert, tls_key;
  int64_t pids_per_member = 4096;
  std::string default_memory, max_memory;  // per member, e.g. 16Gi; "" = not set
  std::string job_network;                 // isolated | host; "" = isolated as root
  int max_connections = 1024;
  double history_interval = 10;  // serve --history-interval
  double history_hours = 24;     // serve --history-hours
  double history_days = 90;      // serve --history-days: hourly samples kept
  std::string classify;          // serve --classify
  std::string ui_dir;            // serve --ui-dir: the dashboard from disk (development)
  std::string metrics_token;     // empty: TESSERA_METRICS_TOKEN, else only the admin reads /metrics
  int max_connections_per_client = 128;
  double retain_finished_hours = 24;  // < 0: for ever
  double archive_after_hours = -1;    // < 0: never
  std::string archive_dir;            // empty: <db>.archive
  // Energy: the data dir the power model is read from (empty: the default, as
  // other commands), the virtual GPUs' type, this host's base power, the PUE, a carbon series.
  std::string data_dir;
  std::string virtual_gpu_type = "virtual";
  double node_power = 0;
  double pue = 1;
  std::string carbon;
  // Power policies: the cap ("KW" or "N%"), shifting, the default energy knob, and
  // whether the limits are applied to the GPUs with nvidia-smi.
  std::string power_cap;
  bool power_shifting = false;
  double energy_weight = 0;
  bool apply_power_limits = false;
  double thermal_limit = 0;
  double inlet_temp = 25;
  GoodputArgs goodput;  // --policy goodput: how rounds weigh jobs, and how often they run
};
CLI::App* add_serve_command(CLI::App& app, ServeArgs& args);
int run_serve(const ServeArgs& args);

struct ClientArgs {
  std::string addr;     // empty: TESSERA_ADDR, else 127.0.0.1:8080
  std::string token;    // empty: TESSERA_TOKEN
  std::string file;     // submit
  int64_t id = 0;       // job, cancel, logs: resolved from job_ref
  std::string job_ref;  // as given: "12", or an array's task "3_0"
  std::string state, tenant;
  size_t limit = 0;     // jobs: 0 = all
  std::string sort;     // jobs: a key of job_sort_keys(); "" = newest first
  double watch = 0;     // jobs: seconds between refreshes; 0 = once
  int rank = -1;        // logs: -1 = rank 0, or every rank with --follow
  bool follow = false;  // logs: keep printing until the job ends
  int64_t tail_bytes = 65536;
  bool json = false;
  bool force = false;                      // cancel: SIGKILL now, without the checkpoint grace
  std::string name;                        // tenant create
  std::string priority_class, time_limit;  // update: "" = unchanged
  std::string actor, target;               // audit filters
  double since_hours = -1;                 // audit: only the last this many hours
  bool refused = false;                    // audit: only refused requests
  double until_hours = 0;                  // usage: the window ends this many hours ago
  std::string prices;                      // usage: price table (YAML)
  std::string result;                      // usage: a simulation's result file instead
  int64_t array = 0;                       // jobs: only this array's tasks
  bool cancel_array = false;               // cancel: every task of the job's array
  double older_than_hours = -1;            // archive
  bool csv = false;                        // usage: print CSV
  std::string role = "member";             // user add: member | admin
  std::string usage_by = "queue";          // usage: queue | user
  bool dry_run = false;                    // queues apply
  // reservation create: how many GPUs, of which type, on which node, for whom, when
  int32_t gpus = 0;
  std::string gpu_type, node, user, start = "now", end, duration;
  bool ignore_jobs = false;
};
struct ClientCommands {
  CLI::App* submit = nullptr;
  CLI::App* jobs = nullptr;
  CLI::App* job = nullptr;
  CLI::App* cancel = nullptr;
  CLI::App* hold = nullptr;
  CLI::App* release = nullptr;
  CLI::App* requeue = nullptr;
  CLI::App* update = nullptr;
  CLI::App* audit = nullptr;
  CLI::App* usage = nullptr;
  CLI::App* queues = nullptr;
  CLI::App* queues_apply = nullptr;
  CLI::App* nodes = nullptr;
  CLI::App* logs = nullptr;
  CLI::App* tenant = nullptr;
  CLI::App* tenant_create = nullptr;
  CLI::App* tenant_list = nullptr;
  CLI::App* tenant_delete = nullptr;
  CLI::App* archive = nullptr;
  CLI::App* token = nullptr;
  CLI::App* token_rotate = nullptr;
  CLI::App* token_revoke = nullptr;
  CLI::App* node = nullptr;
  CLI::App* node_drain = nullptr;
  CLI::App* node_resume = nullptr;
  CLI::App* user = nullptr;
  CLI::App* user_add = nullptr;
  CLI::App* user_list = nullptr;
  CLI::App* user_remove = nullptr;
  CLI::App* user_rotate = nullptr;
  CLI::App* reservation = nullptr;
  CLI::App* reservation_create = nullptr;
  CLI::App* reservation_list = nullptr;
  CLI::App* reservation_delete = nullptr;
};
ClientCommands add_client_commands(CLI::App& app, ClientArgs& args);
// Runs whichever client command was given; -1 when none was.
int run_client_command(const ClientCommands& cmds, const ClientArgs& args);

}  // namespace tessera
