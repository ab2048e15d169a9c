#include "control/serve/service.h"

#include <unistd.h>

#include <fmt/format.h>
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "backend/local_backend.h"
#include "backend/nvidia_smi.h"
#include "control/decayed_usage_json.h"
#include "control/serve/job.h"
#include "control/token.h"
#include "engine/admission.h"
#include "model/input_error.h"

namespace tessera {
namespace {

using Clock = std::chrono::steady_clock;

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

int64_t host_cpu_milli() {
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  return (n > 0 ? n : 1) * 1000;
}

int64_t host_mem_mib() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return 1024;
  return static_cast<int64_t>(pages) * page / (1024 * 1024);
}

// The cluster this host offers, the host GPU index of every GpuId, and whether its GPUs are
// real (found by nvidia-smi).
Cluster build_cluster(const ServiceOptions& opt, std::vector<int32_t>& index, bool& real) {
  ClusterBuilder b;
  set_default_links(b);
  const std::string host = host_name();
  std::vector<GpuReading> gpus;
  if (opt.virtual_gpus <= 0) {
    try {
      gpus = query_gpus(opt.nvidia_smi);
    } catch (const std::exception&) {
      gpus.clear();  // no driver or no GPU: virtual GPUs below
    }
  }
  index.clear();
  real = !gpus.empty();
  if (gpus.empty()) {
    const int n = opt.virtual_gpus > 0 ? opt.virtual_gpus : kDefaultVirtualGpus;
    b.add_node(
        "spine", "rack", host,
        b.gpu_types().intern(opt.virtual_gpu_type.empty() ? "virtual" : opt.virtual_gpu_type),
        static_cast<uint16_t>(n), host_cpu_milli(), host_mem_mib());
    for (int i = 0; i < n; ++i) index.push_back(i);
    return b.build();
  }
  // One node per GPU type (a node is homogeneous). A host with several types splits its CPUs
  // and memory among them by GPU count, so a job on any type can ask for its share.
  std::map<std::string, std::vector<int32_t>> by_type;
  for (const GpuReading& g : gpus) by_type[gpu_type_name(g.name)].push_back(g.index);
  const auto total = static_cast<int64_t>(gpus.size());
  for (const auto& [type, idx] : by_type) {
    const auto n = static_cast<int64_t>(idx.size());
    b.add_node("spine", "rack", by_type.size() == 1 ? host : host + "/" + type,
               b.gpu_types().intern(type), static_cast<uint16_t>(n), host_cpu_milli() * n / total,
               host_mem_mib() * n / total);
  }
  Cluster c = b.build();
  // build() keeps the nodes in the order added (one rack), GPUs contiguous per node.
  for (const auto& [type, idx] : by_type) index.insert(index.end(), idx.begin(), idx.end());
  return c;
}

// Whether a database file holds nothing yet: missing, or empty with no write-ahead log (a new
// WAL database keeps its first commits in DB-wal until a checkpoint).
bool database_is_new(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec)) return true;
  const auto size = fs::file_size(path, ec);
  if (ec || size > 0) return false;
  const auto wal = fs::file_size(path + "-wal", ec);
  return ec || wal == 0;
}

// The store, refusing a new database beside a job directory that already holds jobs: that is
// a database lost or truncated, and a new one would give its job ids, and so those
// directories and their logs, to new jobs.
std::unique_ptr<Store> open_store(const ServiceOptions& opt, bool local_backend) {
  namespace fs = std::filesystem;
  if (local_backend && database_is_new(opt.db_path)) {
    std::error_code ec;
    size_t jobs = 0;
    for (fs::directory_iterator it(fs::path(opt.work_dir) / "jobs", ec), end; !ec && it != end;
         it.increment(ec)) {
      ++jobs;
    }
    if (jobs > 0) {
      throw std::runtime_error(
          opt.db_path + " is a new, empty database, but the job directory " + opt.work_dir +
          "/jobs holds the files of " + std::to_string(jobs) +
          " earlier jobs: was the database lost or truncated? Restore it, or move " + opt.work_dir +
          " away to start afresh (a new database would reuse those job ids and "
          "directories, and show a new job's tenant an old job's logs)");
    }
  }
  return std::make_unique<Store>(opt.db_path, Store::Options{opt.sync_full});
}

// The energy settings, refused before anything opens.
ServiceOptions checked_energy_settings(ServiceOptions opt) {
  if (!(opt.pue >= 1)) throw std::invalid_argument("--pue must be at least 1");
  if (!(opt.node_power_w >= 0)) throw std::invalid_argument("--node-power must be 0 or more");
  return opt;
}

// The dataset cache's settings, refused before anything opens (a cache needs its staging
// command and the command its cache; the cache's options need the cache); pre-staging's default
// filled in.
ServiceOptions checked_dataset_settings(ServiceOptions opt) {
  if (opt.dataset_dir.empty() != opt.stage_command.empty()) {
    throw std::invalid_argument(
        "--dataset-dir and --stage-command go together: the cache needs a command that stages "
        "a dataset into it, and the command a cache to stage into");
  }
  if (opt.dataset_dir.empty() && (opt.prestage_datasets >= 0 || opt.dataset_cache_gb > 0)) {
    throw std::invalid_argument(
        "--prestage-datasets and --dataset-cache-gb need --dataset-dir (the dataset cache)");
  }
  if (opt.prestage_datasets < 0) opt.prestage_datasets = 1;
  return opt;
}

constexpr double kCycleBuckets[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                    0.01,   0.025,   0.05,   0.1,   0.25,   1.0};

}  // namespace

double run_gpu_seconds(const JobRow& row, const Allocation& alloc, double t) {
  if (row.started_at < 0) return 0;
  return (t - row.started_at) * static_cast<double>(alloc.gpu_milli()) / 1000.0;
}

Service::Service(ServiceOptions opt, std::unique_ptr<Backend> backend)
    : opt_(checked_dataset_settings(checked_energy_settings(std::move(opt)))),
      cluster_(build_cluster(opt_, gpu_index_, real_gpus_)),
      policy_(make_policy(opt_.policy, opt_.seed)),
      driver_(policy_, CycleDriver::Options{opt_.reason_refresh_seconds,
                                            {std::begin(kCycleBuckets), std::end(kCycleBuckets)},
                                            opt_.goodput_round_seconds}),
      state_(cluster_),
      pending_([](const Job* j) { return j->spec.tenant; },
               [](const Job* j) { return j->spec.user; }) {
  // Every option is checked before anything is made on disk: a server that refuses its flags
  // leaves no database, lock or job folder behind.
  if (policy_.goodput && !(opt_.goodput_round_seconds > 0)) {
    throw std::invalid_argument("--goodput-round must be more than 0 seconds");
  }
  if (!opt_.classifier.empty()) {
    classifier_ = make_workload_classifier(opt_.classifier);
    if (!classifier_) {
      throw std::invalid_argument("--classify: unknown classifier '" + opt_.classifier +
                                  "' (one of logistic, threshold, majority)");
    }
  }
  if (opt_.archive_dir.empty()) opt_.archive_dir = opt_.db_path + ".archive";
  if (opt_.archive_after_seconds >= 0 &&
      (opt_.retain_finished_seconds < 0 ||
       opt_.archive_after_seconds < opt_.retain_finished_seconds)) {
    throw std::invalid_argument(
        "--archive-after must be at least --retain-finished: jobs are archived once out of "
        "memory");
  }
  power_ = opt_.power_model ? opt_.power_model : std::make_shared<const PowerModel>();
  tree_origin_ = opt_.queues_path.empty() ? "tenants" : opt_.queues_path;
  if (!opt_.queues_path.empty()) {
    tree_template_ = load_queue_tree(opt_.queues_path);
    tree_template_.validate_against(cluster_);
    flat_tree_ = false;
  }
  setup_power();

  store_ = open_store(opt_, /*local_backend=*/!backend);
  // Without --queues, the tree last applied (tessera queues apply), if any; --queues wins.
  if (const auto applied = store_->setting(kAppliedTreeSetting);
      applied && opt_.queues_path.empty()) {
    tree_origin_ = "the queue tree applied before (tessera queues apply)";
    try {
      tree_template_ = parse_queue_tree_yaml(*applied, tree_origin_);
      tree_template_.validate_against(cluster_);
    } catch (const InputError& e) {
      throw InputError(std::string(e.what()) + "; start with --queues FILE to replace it");
    }
    flat_tree_ = false;
  }
  backend_ = backend ? std::move(backend)
                     : std::make_unique<LocalBackend>(
                           opt_.work_dir, LocalBackendOptions{store_->database_id(), opt_.pass_env,
                                                              opt_.cgroups, opt_.pids_per_member});
  if (!opt_.dataset_dir.empty()) {
    // A private dataset is its tenant's jobs' to read: their gid (called under mu_).
    auto group_of = [this](const std::string& owner) -> int64_t {
      if (!opt_.tenant_uids) return -1;
      try {
        return uid_for_tenant_locked(owner);
      } catch (const std::exception&) {
        return -1;
      }
    };
    datasets_ = std::make_unique<DatasetCache>(DatasetCache::Options{
        opt_.dataset_dir, opt_.stage_command, opt_.dataset_cache_gb, group_of});
  }
  energy_.restore(store_->run_energy_joules());
  std::lock_guard lock(mu_);
  for (const TenantRow& t : store_->tenants()) {
    tenants_.intern(t.name);
    token_tenant_[t.token_sha256] = t.name;
  }
  for (UserRow& u : store_->users("")) token_user_[u.token_sha256] = std::move(u);
  admin_hash_ = store_->setting("admin_token_sha256").value_or("");
  for (std::string& name : store_->deleted_tenants()) deleted_tenants_.insert(std::move(name));
  if (const auto uids = store_->setting("tenant_uids")) {
    const auto j = nlohmann::json::parse(*uids, nullptr, false);
    if (j.is_object()) {
      for (const auto& [name, uid] : j.items()) {
        if (uid.is_number_integer()) tenant_uids_[name] = uid.get<int64_t>();
      }
    }
  }
  if (opt_.tenant_uids) claim_uid_range_locked();
  // Nodes an admin drained stay drained across restarts (names no longer in the cluster are
  // kept, and apply if the node comes back).
  if (const auto drained = store_->setting("drained_nodes")) {
    const auto j = nlohmann::json::parse(*drained, nullptr, false);
    if (j.is_array()) {
      for (const auto& name : j) {
        if (name.is_string()) drained_.insert(name.get<std::string>());
      }
    }
  }
  load_reservations_locked();
  if (policy_.goodput) {
    // The secret adaptive jobs' report tokens derive from: kept, so a restart does not
    // invalidate the tokens of the jobs it adopts.
    report_secret_ = store_->setting("report_secret").value_or("");
    if (report_secret_.empty()) {
      report_secret_ = new_token();
      store_->set_setting("report_secret", report_secret_);
    }
  }
  recover();
  apply_gpu_power_limits_locked();  // as the running jobs' limits say (the defaults elsewhere)
  restore_decayed_locked();
  restore_history();
  restore_classifier_locked();
}

Service::~Service() {
  stop();
}

double Service::now() const {
  if (opt_.clock) return opt_.clock();
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void Service::rebind_locked() {
  auto t = std::make_shared<QueueTree>(flat_tree_ ? QueueTree::flat(tenants_) : tree_template_);
  t->bind(tenants_, tree_origin_);
  // Queue ids are stable across rebinds (a flat tree appends a leaf per new tenant, a loaded
  // tree keeps its shape), so long-term usage carries over by id.
  driver_.usage().reshape(*t);
  tree_ = std::move(t);
}

void Service::add_tenant_locked(const std::string& name, const std::string& field) {
  Interner before = tenants_;
  tenants_.intern(name);
  try {
    rebind_locked();
  } catch (const InputError&) {  // a loaded queue tree has no leaf for it
    tenants_ = std::move(before);
    rebind_locked();
    throw ServiceError(ServiceError::kInvalid, field,
                       "tenant " + name + " names no queue of " + opt_.queues_path);
  }
}

void Service::advance_decayed_locked(double t) {
  LongTermUsage& usage = driver_.usage();
  if (!usage.on()) return;
  usage.fold(t);
  for (const auto& [id, jp] : active_) usage.hold(*tree_, cluster_, jp->spec, jp->alloc);
  // Kept across restarts, by queue path, at most once a minute.
  if (t - last_decay_saved_ >= 60) {
    last_decay_saved_ = t;
    try {
      store_->set_setting("decayed_usage", usage_to_json(usage_by_path(*tree_, usage.decayed())));
    } catch (const StoreError& e) {
      note_write_failure(e);  // a memory of usage, saved again next minute
    }
  }
}

void Service::restore_decayed_locked() {
  if (!driver_.usage().on()) return;
  const auto text = store_->setting("decayed_usage");
  if (!text) return;
  std::optional<UsageByPath> saved = usage_from_json(*text);
  if (!saved) return;  // unreadable: start afresh (it is a memory, not a ledger)
  apply_usage(*tree_, *saved, driver_.usage().decayed());
}

// Why `name` names no GPU of this cluster: an ambiguous name ("a100") says the choices; either
// way the types the cluster has are listed.
std::string unknown_gpu_type(const Cluster& c, const std::string& name) {
  std::string why = "GPU type " + quote_prefix(name) + " does not exist in this cluster";
  try {
    (void)c.gpu_types().known(name);
  } catch (const std::invalid_argument& e) {
    if (std::string_view(e.what()).starts_with("ambiguous")) why = e.what();
  }
  std::string have;
  for (GpuTypeId t = 0; t < c.gpu_types().size(); ++t) {
    if ((c.present_types() & (GpuTypeMask{1} << t)) == 0) continue;
    have += (have.empty() ? "" : ", ") + c.gpu_types().at(t).name;
  }
  return why + " (this cluster has " + (have.empty() ? std::string("no GPUs") : have) + ")";
}

JobSpec Service::to_spec_locked(const JobRequest& req, TenantId tenant, const std::string& where,
                                std::string* unrunnable) {
  // A problem with this cluster's configuration rather than with the request: refused at
  // submission, recorded for a job already accepted.
  auto config_problem = [&](ServiceError::Kind kind, const char* field, const std::string& why) {
    if (unrunnable == nullptr) throw ServiceError(kind, field, why);
    if (unrunnable->empty()) *unrunnable = why;
  };
  JobSpec s;
  s.name = req.name;
  s.tenant = tenant;
  s.source = where;
  s.min_members = req.min_members;
  s.max_members = req.max_members;
  s.demand.gpus = req.gpus;
  s.demand.gpu_milli = req.gpu_milli;
  s.demand.cpu_milli = req.cpu_milli;
  s.demand.mem_mib = req.mem_mib;
  if (!req.gpu_types.empty()) {
    s.allowed_types = 0;
    for (const std::string& name : req.gpu_types) {
      auto t = cluster_.gpu_types().find(name);
      if (!t || (cluster_.present_types() & (GpuTypeMask{1} << *t)) == 0) {
        config_problem(ServiceError::kInfeasible, "resources.gpu_types",
                       unknown_gpu_type(cluster_, name));
        continue;
      }
      s.allowed_types |= GpuTypeMask{1} << *t;
    }
  }
  if (!req.span.empty()) parse_level(req.span, s.max_span);  // validated with the request
  s.sla_max_queueing = req.sla_max_queueing_seconds;
  s.duration_estimate = req.duration_estimate_seconds;
  // What reservations go by: how long it may hold its GPUs, its stop grace after its limit too.
  s.time_limit =
      req.time_limit_seconds >= 0 ? req.time_limit_seconds + stop_grace_locked(req) : kUnknown;
  const QueueId leaf = tree_->leaf_of(tenant);
  const QueueSpec& q = tree_->queue(leaf == kNoId ? kRootQueue : leaf);
  if (!req.priority_class.empty()) {
    parse_priority_class(req.priority_class, s.priority);
    s.priority_given = true;
  }
  apply_queue_defaults(q, s);
  if (std::string why = class_refusal(q, s.priority); !why.empty()) {
    config_problem(ServiceError::kForbidden, "priority_class", why);
  }
  if (req.adaptive.batch > 0 && !policy_.goodput) {
    // Its GPUs and batch are for a goodput round to choose; no other policy would size it.
    config_problem(ServiceError::kInvalid, "adaptive",
                   "an adaptive job needs a server run with --policy goodput (this one runs " +
                       policy_.name() + ")");
  }
  if (auto why = infeasible_reason(cluster_, s)) {
    config_problem(ServiceError::kInfeasible, "resources", "can never run here: " + *why);
  } else if (power_policies_) {
    if (auto power = power_infeasible_reason(power_view_, cluster_, s)) {
      config_problem(ServiceError::kInfeasible, "resources",
                     "can never run under the power cap (--power-cap): " + *power);
    }
  }
  return s;
}

void Service::start() {
  if (thread_.joinable()) return;
  {
    std::lock_guard lock(mu_);
    adopt_job_networks_locked();
  }
  stop_ = false;
  thread_ = std::thread([this] { run_loop(); });
}

void Service::stop() {
  stop_ = true;
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Service::run_loop() {
  auto last_cycle = Clock::now() - std::chrono::hours(1);
  const auto poll = std::chrono::duration<double>(opt_.poll_interval_seconds);
  const auto cycle_every = std::chrono::duration<double>(opt_.cycle_interval_seconds);
  while (!stop_) {
    poll_processes();
    launch_ready();
    bool run = false;
    {
      std::unique_lock lock(mu_);
      wake_.wait_for(lock, poll, [&] { return stop_.load() || dirty_; });
      run = dirty_ || Clock::now() - last_cycle >= cycle_every;
    }
    if (stop_) break;
    read_gpu_power_if_due();  // first: the cycle schedules under the thermal headroom it gives
    if (run) {
      run_cycle();
      archive_if_due();
      last_cycle = Clock::now();
    }
    record_history_if_due();
  }
}

void Service::tick() {
  poll_processes();
  launch_ready();
  read_gpu_power_if_due();  // first: the cycle schedules under the thermal headroom it gives
  run_cycle();
  archive_if_due();
  record_history_if_due();
}

std::string Service::leaf_path_locked(TenantId t) const {
  const QueueId leaf = tree_ ? tree_->leaf_of(t) : kNoId;
  if (leaf == kNoId) return "";
  return leaf == kRootQueue ? "/" : tree_->queue(leaf).path;
}

}  // namespace tessera
