#include "control/service.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>

#include "backend/local_backend.h"
#include "backend/nvidia_smi.h"
#include "control/decayed_usage_json.h"
#include "control/service_job.h"
#include "control/token.h"
#include "engine/admission.h"
#include "engine/cycle.h"
#include "engine/fair_share.h"
#include "engine/snapshot.h"
#include "model/input_error.h"
#include "model/utf8.h"

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

// A free TCP port for a gang's MASTER_PORT (the kernel picks one; it is free now, which is
// as good as any launcher can do without owning the rendezvous).
int32_t free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 29500;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  int32_t port = 29500;
  // The sockets API takes sockaddr*; sockaddr_in is layout-compatible by design.
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

std::string encode_allocation(const Allocation& a) {
  if (a.empty()) return "";
  nlohmann::json members = nlohmann::json::array();
  const size_t gpm = static_cast<size_t>(a.gpus_per_member);
  for (size_t m = 0; m < a.member_node.size(); ++m) {
    nlohmann::json shares = nlohmann::json::array();
    for (size_t k = 0; k < gpm; ++k) {
      const GpuShare& s = a.shares[m * gpm + k];
      shares.push_back({s.gpu, s.milli});
    }
    members.push_back({a.member_node[m], shares});
  }
  return nlohmann::json{{"gpus_per_member", a.gpus_per_member},
                        {"cpu_milli", a.cpu_milli_per_member},
                        {"mem_mib", a.mem_mib_per_member},
                        {"members", members}}
      .dump();
}

Allocation decode_allocation(const std::string& text) {
  Allocation a;
  if (text.empty()) return a;
  const auto j = nlohmann::json::parse(text);
  a.gpus_per_member = j.at("gpus_per_member").get<int32_t>();
  a.cpu_milli_per_member = j.at("cpu_milli").get<int64_t>();
  a.mem_mib_per_member = j.at("mem_mib").get<int64_t>();
  for (const auto& m : j.at("members")) {
    a.member_node.push_back(m.at(0).get<NodeId>());
    for (const auto& s : m.at(1))
      a.shares.push_back({s.at(0).get<GpuId>(), s.at(1).get<int32_t>()});
  }
  return a;
}

std::string encode_members(const std::vector<MemberHandle>& ms) {
  if (ms.empty()) return "";
  nlohmann::json j = nlohmann::json::array();
  for (const MemberHandle& m : ms) j.push_back({m.rank, m.pid, m.start_ticks});
  return j.dump();
}

std::vector<MemberHandle> decode_members(const std::string& text) {
  std::vector<MemberHandle> out;
  if (text.empty()) return out;
  for (const auto& m : nlohmann::json::parse(text)) {
    out.push_back({m.at(0).get<int32_t>(), m.at(1).get<int64_t>(), m.at(2).get<int64_t>()});
  }
  return out;
}

// Why a member that is no longer running failed its gang, or nullopt if it exited 0.
std::optional<std::string> member_failure(const MemberStatus& m) {
  if (m.phase == MemberPhase::kLost) return "rank " + std::to_string(m.rank) + " was killed";
  if (m.phase == MemberPhase::kExited && m.exit_code != 0) {
    return "rank " + std::to_string(m.rank) + " exited with code " + std::to_string(m.exit_code);
  }
  return std::nullopt;
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
// directories and their logs, to new jobs (issue 14, finding 13).
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

// Whether every node and GPU of `a` exists in `c`, each GPU on its member's node.
bool within_cluster(const Cluster& c, const Allocation& a) {
  const size_t gpm = static_cast<size_t>(std::max(a.gpus_per_member, 0));
  if (a.shares.size() != a.member_node.size() * gpm) return false;
  for (size_t m = 0; m < a.member_node.size(); ++m) {
    if (a.member_node[m] >= c.nodes().size()) return false;
    for (size_t k = 0; k < gpm; ++k) {
      const GpuId g = a.shares[m * gpm + k].gpu;
      if (g >= c.num_gpus() || c.node_of_gpu(g) != a.member_node[m]) return false;
    }
  }
  return true;
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
      pending_([](const Job* j) { return j->spec.tenant; }) {
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
  if (!opt_.queues_path.empty()) {
    tree_template_ = load_queue_tree(opt_.queues_path);
    tree_template_.validate_against(cluster_);
    flat_tree_ = false;
  }
  setup_power();

  store_ = open_store(opt_, /*local_backend=*/!backend);
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
  t->bind(tenants_, opt_.queues_path.empty() ? "tenants" : opt_.queues_path);
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
                       "GPU type " + quote_prefix(name) + " does not exist in this cluster");
        continue;
      }
      s.allowed_types |= GpuTypeMask{1} << *t;
    }
  }
  if (!req.span.empty()) parse_level(req.span, s.max_span);  // validated with the request
  s.sla_max_queueing = req.sla_max_queueing_seconds;
  s.duration_estimate = req.duration_estimate_seconds;
  const QueueId leaf = tree_->leaf_of(tenant);
  const QueueSpec& q = tree_->queue(leaf == kNoId ? kRootQueue : leaf);
  if (!req.priority_class.empty()) {
    parse_priority_class(req.priority_class, s.priority);
    s.priority_given = true;
  }
  if (!apply_queue_defaults(q, s)) {
    config_problem(
        ServiceError::kForbidden, "priority_class",
        "queue " + q.path + " does not allow priority class " + std::string(to_string(s.priority)));
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

void Service::recover() {
  const double t = now();
  std::vector<JobRow> rows = store_->load_jobs();
  for (const JobRow& r : rows) tenants_.intern(r.tenant);
  rebind_locked();
  std::vector<const JobRow*> dirty;
  for (JobRow& r : rows) {
    auto j = std::make_unique<Job>();
    j->row = std::move(r);
    j->recorded = RecordedState::of(j->row);
    JobRow& row = j->row;
    const TenantId tid = *tenants_.find(row.tenant);
    if (!row.classified.empty() && !is_terminal(row.state)) {
      // A class the classifier chose that the queue no longer allows: the queue's default, as
      // the job would have had without a classifier (a user's own class stays, and waits).
      std::string refused;
      to_spec_locked(row.spec, tid, "job", &refused);
      JobRequest plain = row.spec;
      plain.priority_class.clear();
      std::string plain_refused;
      to_spec_locked(plain, tid, "job", &plain_refused);
      if (!refused.empty() && plain_refused.empty()) {
        row.spec.priority_class.clear();
        row.classified.clear();
      }
    }
    // The configuration may have changed under it (fewer GPUs, a queue tree edited): it is
    // kept, and waits if it cannot run now; a running one is adopted all the same.
    j->spec = to_spec_locked(row.spec, tid, "job " + std::to_string(row.id), &j->unrunnable);
    j->spec.submit_time = row.submitted_at;  // arrival order and SLA deadlines count from it
    if (!row.idempotency_key.empty()) idempotency_[{row.tenant, row.idempotency_key}] = row.id;
    j->queued_since = row.submitted_at;
    Allocation alloc;
    try {
      j->members = decode_members(row.processes);
      alloc = decode_allocation(row.allocation);
    } catch (const std::exception& e) {
      throw std::runtime_error(store_->path() + ": job " + std::to_string(row.id) +
                               ": its stored processes or allocation cannot be read (" + e.what() +
                               "); repair or remove that row");
    }
    if (!alloc.empty() && !within_cluster(cluster_, alloc)) {
      // It runs on GPUs this server no longer schedules (restarted with fewer): adopted, but
      // it holds nothing in the ledger, which has no such GPUs.
      alloc = Allocation{};
      row.message = "adopted after a restart on GPUs this server no longer schedules";
    }
    const bool has_processes = !j->members.empty();
    auto requeue = [&](const std::string& why) {
      if (row.state == JobState::kRunning && row.started_at >= 0) {
        // Its run ends here, as far as the ledger knows: its GPUs were held for it from its
        // start until now (when its processes vanished during the downtime is not known), so
        // usage and energy count that, with the run's own record.
        Job& job = *j;
        job.alloc = alloc;
        job.run = run_record_locked(job);
        job.power_since = row.started_at;
        end_run_locked(job, std::max(t, row.started_at), "requeued");
        job.alloc = Allocation{};
      }
      row.state = JobState::kPending;
      row.allocation.clear();
      row.processes.clear();
      row.message = why;
      j->members.clear();
      j->queued_since = t;
      dirty.push_back(&row);
    };
    switch (row.state) {
      case JobState::kPending:
        break;
      case JobState::kRunning:
        if (!has_processes) {
          // The server died between recording the start and recording the processes: find
          // the members that did start, adopt a whole gang, stop a partial one.
          const int32_t world = alloc.members();
          auto found = backend_->discover(static_cast<uint64_t>(row.id),
                                          static_cast<uint32_t>(row.attempts), world);
          if (world == 0 || static_cast<int32_t>(found.size()) != world) {
            backend_->signal(static_cast<uint64_t>(row.id), static_cast<uint32_t>(row.attempts),
                             found, SIGKILL);
            requeue("requeued after a restart: it had not been launched");
            break;
          }
          j->members = std::move(found);
          row.processes = encode_members(j->members);
          dirty.push_back(&row);
        }
        {
          const auto st = backend_->poll(static_cast<uint64_t>(row.id),
                                         static_cast<uint32_t>(row.attempts), j->members);
          const bool all_lost = std::all_of(st.begin(), st.end(), [](const MemberStatus& m) {
            return m.phase == MemberPhase::kLost;
          });
          if (all_lost) {
            requeue("requeued after a restart: its processes were gone");
            break;
          }
        }
        if (!alloc.empty() && state_.fits(alloc)) {
          state_.allocate(alloc);
          j->alloc = std::move(alloc);
          // Its run goes on (accounted when it ends), at the limit it had; the energy estimate
          // takes that limit for the whole run.
          j->run = run_record_locked(*j);
          j->power_since = row.started_at;
        }
        break;
      case JobState::kPreempted:
        if (!has_processes) {
          requeue("preempted; requeued");
        } else {
          ask_to_stop_locked(*j, t);
        }
        break;
      case JobState::kCancelled:
        if (row.finished_at < 0) {
          if (has_processes) {
            j->stopping = true;
            j->signal(*backend_, SIGKILL);
            if (!alloc.empty() && state_.fits(alloc)) {
              state_.allocate(alloc);
              j->alloc = std::move(alloc);
            }
          } else {
            row.finished_at = t;
            dirty.push_back(&row);
          }
        }
        break;
      default:
        break;
    }
    if (row.state == JobState::kPending) pending_.push_back(j.get());
    if (row.array_id != 0) array_tasks_[row.array_id].push_back(row.id);
    if (!j->alloc.empty() || !j->members.empty()) active_[row.id] = j.get();
    index_dependencies_locked(*j);
    jobs_.emplace(row.id, std::move(j));
  }
  // A full disk must not stop the server from starting: what recovery learned stays in memory
  // and is written once the database takes writes again.
  if (!dirty.empty()) save_rows_locked(dirty);
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

void Service::release_locked(Job& j) {
  release_dataset_locked(j);
  close_job_network_locked(j);
  if (!j.alloc.empty()) {
    state_.release(j.alloc);
    std::set<NodeId> nodes(j.alloc.member_node.begin(), j.alloc.member_node.end());
    j.alloc = Allocation{};
    dirty_ = true;
    for (NodeId n : nodes) {
      if (drain_holds_.contains(n)) hold_drained_node_locked(n);  // what it freed stays unused
    }
  }
  j.row.allocation.clear();
  j.row.power_limit_w = 0;  // its next run gets its own
}

// Holds everything free on drained node n (GPUs, CPU, memory) in the ledger.
void Service::hold_drained_node_locked(NodeId n) {
  Allocation& hold = drain_holds_[n];
  if (!hold.member_node.empty()) state_.release(hold);
  hold = state_.free_on_node(n);
  state_.allocate(hold);
  dirty_ = true;
}

// The drained set as the ledger's holds: new drains hold their node, resumed nodes let go.
void Service::apply_drains_locked() {
  for (auto it = drain_holds_.begin(); it != drain_holds_.end();) {
    if (drained_.contains(cluster_.node(it->first).name)) {
      ++it;
      continue;
    }
    if (!it->second.member_node.empty()) state_.release(it->second);
    it = drain_holds_.erase(it);
    dirty_ = true;
  }
  for (NodeId n = 0; n < cluster_.nodes().size(); ++n) {
    if (drained_.contains(cluster_.node(n).name) && !drain_holds_.contains(n)) {
      hold_drained_node_locked(n);
    }
  }
}

void Service::poll_processes() {
  std::lock_guard lock(mu_);
  const double t = now();
  std::vector<const JobRow*> dirty;
  for (auto& [id, jp] : active_) {
    Job& j = *jp;
    if (j.members.empty()) {
      if (is_terminal(j.row.state)) release_locked(j);  // cancelled before it launched
      continue;
    }
    const auto st =
        backend_->poll(static_cast<uint64_t>(id), static_cast<uint32_t>(j.row.attempts), j.members);
    const bool all_gone = std::none_of(st.begin(), st.end(), [](const MemberStatus& m) {
      return m.phase == MemberPhase::kRunning;
    });
    if (!all_gone) {
      if (j.row.state == JobState::kRunning && !j.stopping) {
        // A gang fails together: one member that failed stops the others.
        for (const MemberStatus& m : st) {
          if (m.phase == MemberPhase::kRunning) continue;
          const auto why = member_failure(m);
          if (!why) continue;
          j.failure = *why;
          if (m.phase == MemberPhase::kExited) j.failure_code = m.exit_code;
          j.stopping = true;
          j.kill_at = -1;
          j.signal(*backend_, SIGKILL);
          break;
        }
      } else if (j.stopping && j.kill_at >= 0 && t >= j.kill_at) {
        j.signal(*backend_, SIGKILL);
        j.kill_at = -1;
      }
      // Its run reached its time limit (a duration estimate only plans backfill; this stops).
      const double limit = j.row.spec.time_limit_seconds;
      if (j.row.state == JobState::kRunning && !j.stopping && limit > 0 &&
          t - j.row.started_at >= limit) {
        j.timed_out = true;
        ask_to_stop_locked(j, t);
      }
      continue;
    }
    // Every member is gone. It ended when the last one did, if the backend knows (members
    // that ended while the server was down ended before this restart).
    double ended = t;
    if (std::all_of(st.begin(), st.end(), [](const MemberStatus& m) { return m.ended_at >= 0; })) {
      ended = 0;
      for (const MemberStatus& m : st) ended = std::max(ended, m.ended_at);
      ended = std::clamp(ended, j.row.started_at, t);
    }
    j.members.clear();
    j.stopping = false;
    j.kill_at = -1;
    j.row.processes.clear();
    j.attained += run_gpu_seconds(j.row, j.alloc, ended);
    if (j.row.started_at >= 0) j.ran_seconds += std::max(0.0, ended - j.row.started_at);
    const JobState was = j.row.state;
    const bool requeued = !j.requeued_by.empty();
    const bool resized = !j.resizing.empty();
    switch (j.row.state) {
      case JobState::kRunning: {
        std::optional<int32_t> code;
        std::string why = j.failure;
        for (const MemberStatus& m : st) {
          const auto failed = member_failure(m);
          if (!failed) continue;
          if (why.empty()) why = *failed;
          if (m.phase == MemberPhase::kExited && !code) code = m.exit_code;
        }
        if (j.failure_code) code = j.failure_code;
        if (!j.requeued_by.empty() || resized) {
          // Requeued by its user, or stopped by a goodput round to run at another size (it
          // keeps the round's decision; a requeued job waits for the next round's).
          j.row.state = JobState::kPending;
          j.row.message = resized ? j.resizing : "requeued by " + j.requeued_by;
          if (!resized) j.round_members = -1;
          j.queued_since = ended;
          pending_.push_back(&j);
        } else if (j.timed_out) {
          j.row.state = JobState::kTimeout;
          j.row.exit_code = code;
          char msg[160];
          std::snprintf(msg, sizeof msg, "stopped at its time limit of %g s",
                        j.row.spec.time_limit_seconds);
          j.row.message = msg;
        } else if (why.empty()) {
          j.row.state = JobState::kSucceeded;
          j.row.exit_code = 0;
        } else {
          j.row.state = JobState::kFailed;
          j.row.exit_code = code;
          j.row.message = why;
          const std::string output = backend_->output_problem(
              static_cast<uint64_t>(j.row.id), static_cast<uint32_t>(j.row.attempts));
          if (!output.empty()) j.row.message += "; " + output;
        }
        j.row.finished_at = ended;
        ++counters_.completions;
        break;
      }
      case JobState::kCancelled:
        j.row.finished_at = ended;
        break;
      case JobState::kPreempted:
        j.row.state = JobState::kPending;
        j.queued_since = ended;
        j.round_members = -1;  // the next goodput round plans it afresh
        pending_.push_back(&j);
        break;
      default:
        break;
    }
    end_run_locked(j, ended,
                   was == JobState::kPreempted ? "preempted"
                   : requeued                  ? "requeued"
                   : resized && j.row.state == JobState::kPending
                       ? "resized"
                       : std::string(to_string(j.row.state)));
    j.failure.clear();
    j.failure_code.reset();
    j.timed_out = false;
    j.requeued_by.clear();
    j.resizing.clear();
    release_locked(j);
    dirty.push_back(&j.row);
    dirty_ = true;
  }
  if (!dirty.empty()) save_rows_locked(dirty);
  std::erase_if(active_,
                [](const auto& e) { return e.second->alloc.empty() && e.second->members.empty(); });
  if (!dirty.empty()) apply_gpu_power_limits_locked();  // the ended jobs' GPUs back to default
}

std::string Service::leaf_path_locked(TenantId t) const {
  const QueueId leaf = tree_ ? tree_->leaf_of(t) : kNoId;
  if (leaf == kNoId) return "";
  return leaf == kRootQueue ? "/" : tree_->queue(leaf).path;
}

void Service::ask_to_stop_locked(Job& j, double t) {
  // The job's own grace, else the queue tree's, else the server's.
  double grace = opt_.checkpoint_grace_seconds;
  if (tree_ && tree_->settings().checkpoint_grace_seconds >= 0) {
    grace = tree_->settings().checkpoint_grace_seconds;
  }
  if (j.row.spec.checkpoint_grace_seconds >= 0) grace = j.row.spec.checkpoint_grace_seconds;
  // Also for jobs stored before the limit was lowered.
  grace = std::min(grace, opt_.max_checkpoint_grace_seconds);
  j.stopping = true;
  j.kill_at = t + grace;
  j.signal(*backend_, SIGTERM);
}

void Service::claim_uid_range_locked() {
  // The base: the operator's, else the one this database recorded, else (a database that
  // gave uids before bases were recorded) the old fixed default, else derived from its id.
  const std::string id = store_->database_id();
  const std::optional<std::string> recorded = store_->setting("tenant_uid_base");
  int64_t base = opt_.tenant_uid_base;
  const bool chosen = base >= 0 || recorded.has_value() || !tenant_uids_.empty();
  if (base < 0 && recorded) base = std::stoll(*recorded);
  if (base < 0 && !tenant_uids_.empty()) base = 900000000;
  if (base < 0) base = derived_uid_base(id);
  for (int64_t tries = 0;; ++tries) {
    UidRange r{base, base + kUidsPerServer - 1};
    for (const auto& [name, uid] : tenant_uids_) {
      r.first = std::min(r.first, uid);
      r.last = std::max(r.last, uid);
    }
    try {
      uid_claim_ = UidRangeClaim::claim(opt_.uid_claims_dir, id, r);
      uid_range_ = r;
      break;
    } catch (const UidRangeTaken&) {
      // A derived slot another server holds: the next one (a chosen base is refused).
      if (chosen || tries + 1 >= kUidSlots) throw;
      base = 900000000 + (base - 900000000 + kUidsPerServer) % (kUidSlots * kUidsPerServer);
    }
  }
  if (recorded != std::to_string(base))
    store_->set_setting("tenant_uid_base", std::to_string(base));
}

int64_t Service::uid_for_tenant_locked(const std::string& tenant) {
  if (auto it = tenant_uids_.find(tenant); it != tenant_uids_.end()) return it->second;
  int64_t next = uid_range_.first;
  for (const auto& [name, uid] : tenant_uids_) next = std::max(next, uid + 1);
  if (next > uid_range_.last) {
    throw std::runtime_error("this server's tenant uids, [" + std::to_string(uid_range_.first) +
                             ", " + std::to_string(uid_range_.last) + "], are all given out");
  }
  std::map<std::string, int64_t> with = tenant_uids_;
  with[tenant] = next;
  // Stored before any process runs as it: the same tenant keeps its uid across restarts, and
  // no two tenants ever share one.
  store_->set_setting("tenant_uids", nlohmann::json(with).dump());
  tenant_uids_ = std::move(with);
  return next;
}

void Service::launch_locked(Job& j, std::vector<const JobRow*>& dirty) {
  LaunchSpec ls;
  ls.job = static_cast<uint64_t>(j.row.id);
  ls.attempt = static_cast<uint32_t>(j.row.attempts);
  ls.name = j.row.spec.name;
  ls.tenant = j.row.tenant;
  ls.command = j.row.spec.command;
  ls.env = j.row.spec.env;
  if (j.row.array_id != 0) {
    // As Slurm's SLURM_ARRAY_TASK_ID / SLURM_ARRAY_JOB_ID; the job's own env cannot hide them.
    std::erase_if(ls.env, [](const auto& e) {
      return e.first == "TESSERA_ARRAY_INDEX" || e.first == "TESSERA_ARRAY_JOB_ID";
    });
    ls.env.emplace_back("TESSERA_ARRAY_INDEX", std::to_string(j.row.array_index));
    ls.env.emplace_back("TESSERA_ARRAY_JOB_ID", std::to_string(j.row.array_id));
    std::sort(ls.env.begin(), ls.env.end());
  }
  if (adaptive_locked(j)) add_goodput_env_locked(j, ls.env);
  if (!j.row.spec.dataset.empty()) {
    // Where its dataset is (the cache's copy, staged before it started), as the job's own env
    // cannot say.
    std::erase_if(ls.env, [](const auto& e) { return e.first.starts_with("TESSERA_DATASET"); });
    ls.env.emplace_back("TESSERA_DATASET", j.row.spec.dataset);
    if (datasets_)
      ls.env.emplace_back("TESSERA_DATASET_DIR", datasets_->dir_of(j.row.spec.dataset));
    std::sort(ls.env.begin(), ls.env.end());
  }
  ls.master_port = free_port();
  for (const MemberPlacement& p : placement_locked(j.alloc)) {
    ls.members.push_back(
        MemberLaunch{p.rank, p.gpus, p.gpu_milli, j.spec.demand.mem_mib, j.spec.demand.cpu_milli});
  }
  try {
    // Never as the server's uid by mistake: a tenant whose uid cannot be stored does not start.
    if (opt_.tenant_uids) ls.run_as_uid = ls.run_as_gid = uid_for_tenant_locked(j.row.tenant);
    open_job_network_locked(j, ls);
    j.members = backend_->launch(ls);
    j.row.processes = encode_members(j.members);
  } catch (const std::exception& e) {
    j.row.state = JobState::kFailed;
    j.row.finished_at = now();
    j.row.message = std::string("could not start: ") + e.what();
    end_run_locked(j, j.row.finished_at, "failed");
    release_locked(j);
  }
  dirty.push_back(&j.row);
}

void Service::begin_run_locked(Job& j, double t) {
  j.row.state = JobState::kRunning;
  j.row.started_at = t;
  ++j.row.attempts;
  j.row.message.clear();
  j.row.allocation = encode_allocation(j.alloc);
  j.run = run_record_locked(j);
  j.run_joules = 0;
  j.power_since = t;
  j.preempted_by = -1;
  j.preempted_by_tenant.clear();
}

RunRecord Service::run_record_locked(const Job& j) const {
  RunRecord r;
  r.job = j.row.id;
  r.attempt = j.row.attempts;
  r.tenant = j.row.tenant;
  r.queue = leaf_path_locked(j.spec.tenant);
  r.started = j.row.started_at;
  r.outcome = "running";
  for (const GpuShare& g : j.alloc.shares) {
    const Node& n = cluster_.node(cluster_.node_of_gpu(g.gpu));
    r.gpu_milli[cluster_.gpu_types().at(n.gpu_type).name] += g.milli;
  }
  r.cpu_milli = j.alloc.cpu_milli_per_member * j.alloc.members();
  r.mem_mib = j.alloc.mem_mib_per_member * j.alloc.members();
  r.gpu_watts = run_gpu_watts(*power_, r.gpu_milli, j.row.power_limit_w);
  return r;
}

// A run whose processes are all gone: its record, with how it ended, waits to be written with
// the job's row (save_rows_locked).
void Service::end_run_locked(Job& j, double ended, const std::string& outcome) {
  if (j.run.job == 0) return;  // no run began (a job recovered from an older database)
  j.run.ended = ended;
  j.run.outcome = outcome;
  j.run.preempted_by = j.preempted_by;
  j.run.preempted_by_tenant = j.preempted_by_tenant;
  // Its draw as the run's average: its limit may have changed while it ran.
  const double joules = run_joules_locked(j, ended);
  if (ended > j.run.started) j.run.gpu_watts = joules / (ended - j.run.started);
  energy_.add_ended(j.run.tenant, joules);
  unsaved_runs_.push_back(std::move(j.run));
  j.run = RunRecord{};
  j.run_joules = 0;
}

void Service::launch_ready() {
  std::lock_guard lock(mu_);
  // No process starts that the database could not record.
  if (!retry_writes_locked()) return;
  std::vector<const JobRow*> dirty;
  if (datasets_) datasets_->poll(now());
  for (auto& [id, jp] : active_) {
    Job& j = *jp;
    // Placed, and waiting for its victims to exit or its dataset to be staged.
    if (j.row.state != JobState::kPending || j.alloc.empty()) continue;
    if (j.waits_for.empty() && !j.staging) continue;
    const bool clear = std::all_of(j.waits_for.begin(), j.waits_for.end(), [&](int64_t v) {
      auto it = jobs_.find(v);
      return it == jobs_.end() || it->second->members.empty();
    });
    if (!clear) continue;
    j.waits_for.clear();
    if (j.staging || needs_staging_locked(j)) {
      j.staging = true;
      if (stage_for_locked(j, dirty) != DataState::kReady) continue;
    }
    begin_run_locked(j, now());
    launch_locked(j, dirty);
  }
  if (!dirty.empty()) save_rows_locked(dirty);
}

bool Service::save_rows_locked(const std::vector<const JobRow*>& rows) {
  std::vector<const JobRow*> all = rows;
  for (const int64_t id : unsaved_) all.push_back(&jobs_.at(id)->row);
  try {
    store_->update_jobs(all, nullptr, unsaved_runs_, row_events_locked(all, now()));
  } catch (const StoreError& e) {
    for (const JobRow* r : rows) unsaved_.insert(r->id);
    note_write_failure(e);
    return false;
  }
  mark_recorded_locked(all);
  unsaved_.clear();
  unsaved_runs_.clear();
  note_write_success();
  return true;
}

bool Service::retry_writes_locked() {
  if (health_.ok()) return true;
  if (!unsaved_.empty() || !unsaved_runs_.empty()) return save_rows_locked({});
  try {
    store_->set_setting("write_probe", std::to_string(now()));
  } catch (const StoreError& e) {
    note_write_failure(e);
    return false;
  }
  note_write_success();
  return true;
}

void Service::note_write_failure(const std::exception& e) {
  if (health_.failed(e.what(), now())) {
    std::cerr << "tessera serve: DEGRADED: a database write failed (" << e.what()
              << "); running jobs keep running, new work and API writes wait until it takes "
                 "writes again\n";
  }
}

void Service::note_write_success() {
  if (health_.succeeded()) {
    std::cerr << "tessera serve: the database takes writes again; service restored\n";
  }
}

void Service::api_write(const std::function<void()>& write) {
  try {
    write();
  } catch (const StoreError& e) {
    note_write_failure(e);
    throw ServiceError(ServiceError::kUnavailable, "",
                       std::string("the database cannot be written, so nothing was changed; "
                                   "retry later (") +
                           e.what() + ")");
  }
  note_write_success();
}

std::vector<int64_t> Service::running_members_locked() const {
  // Members of jobs that run or are about to (placed, waiting for their victims).
  std::vector<int64_t> running(tenants_.size(), 0);
  for (const auto& [id, jp] : active_) {
    const auto members =
        std::max<int64_t>(jp->alloc.members(), static_cast<int64_t>(jp->members.size()));
    if (jp->spec.tenant < running.size()) running[jp->spec.tenant] += members;
  }
  return running;
}

std::vector<int64_t> Service::process_caps_locked() const {
  std::vector<int64_t> cap(tenants_.size());
  for (TenantId t = 0; t < cap.size(); ++t) cap[t] = limits_for_locked(t).max_running_members;
  return cap;
}

Service::Standing Service::standing_locked(const Job& j) const {
  if (j.row.held) return Standing::kHeld;
  if ((!j.row.spec.after_ok.empty() || !j.row.spec.after_any.empty()) &&
      dependencies_locked(j.row).state != DependencyState::kMet) {
    return Standing::kDependency;
  }
  if (!j.unrunnable.empty()) return Standing::kUnrunnable;
  // An adaptive job starts at the size its goodput round gave it, and not before one did.
  if (adaptive_locked(j) && j.round_members <= 0) return Standing::kGoodputRound;
  return Standing::kEligible;
}

const JobSpec& Service::cycle_spec_locked(const Job& j) const {
  return adaptive_locked(j) ? j.round_spec : j.spec;
}

std::vector<PendingJob> Service::pending_snapshot_locked() const {
  std::vector<PendingJob> out;
  out.reserve(pending_.size());
  for (const Job* j : pending_) {
    if (standing_locked(*j) == Standing::kEligible) {
      out.push_back(PendingJob{static_cast<JobId>(j->row.id), &cycle_spec_locked(*j), j->attained,
                               j->queued_since});
    }
  }
  return out;
}

void Service::unqueue_locked(int64_t id) {
  if (!driver_.has_queue() || !driver_.queue().contains(static_cast<JobId>(id))) return;
  driver_.queue().remove(static_cast<JobId>(id));
  if (auto it = jobs_.find(id); it != jobs_.end()) it->second->queued_spec = nullptr;
}

// One pass over the waiting jobs in arrival order: each that a cycle may start is in the queue as
// it is now (a job whose spec, service or queueing time differs is put in anew), each that may
// not is out, with why for the limits (process_held_, array_held_). Tree updates are only for
// jobs whose standing changed; a job new to the queue wants its reason.
void Service::sync_queue_locked() {
  PendingQueue& queue = driver_.queue();
  // Processes of a tenant's running jobs against its limit; an array's running tasks and those
  // let in (lowest index first, as pending_ holds them) against its throttle.
  const std::vector<int64_t> procs = running_members_locked();
  const std::vector<int64_t> caps = process_caps_locked();
  std::unordered_map<int64_t, int32_t> array_running;
  if (!array_tasks_.empty()) {
    for (const auto& [id, jp] : active_) {
      if (jp->row.array_id != 0 && jp->row.spec.array_throttle > 0) {
        ++array_running[jp->row.array_id];
      }
    }
  }
  process_held_.clear();
  array_held_.clear();
  restanding_.clear();
  size_t eligible = 0;
  ++queue_passes_;
  for (Job* j : pending_) {
    const auto id = static_cast<JobId>(j->row.id);
    Standing standing = standing_locked(*j);
    const JobSpec* spec = standing == Standing::kEligible ? &cycle_spec_locked(*j) : nullptr;
    if (spec != nullptr) {
      const TenantId t = spec->tenant;
      if (t < caps.size() && (t < procs.size() ? procs[t] : 0) + spec->max_members > caps[t]) {
        process_held_.insert(j->row.id);
        spec = nullptr;
        standing = Standing::kTenantLimit;
      }
    }
    if (spec != nullptr && j->row.array_id != 0 && j->row.spec.array_throttle > 0) {
      int32_t& n = array_running[j->row.array_id];
      if (n < j->row.spec.array_throttle) {
        ++n;
      } else {
        array_held_.insert(j->row.id);
        spec = nullptr;
        standing = Standing::kArrayLimit;
      }
    }
    if (standing != j->standing) {
      j->standing = standing;
      restanding_.push_back(j);
    }
    if (j->queued_spec != nullptr) {  // queued as it was then (no lookup: most are unchanged)
      if (spec == j->queued_spec && j->attained == j->queued_attained &&
          j->queued_since == j->queued_at) {
        ++eligible;
        j->queue_pass = queue_passes_;
        continue;
      }
      queue.remove(id);
      j->queued_spec = nullptr;
      reasons_.erase(j->row.id);
    }
    if (spec == nullptr) continue;
    queue.add(PendingJob{id, spec, j->attained, j->queued_since, true});
    j->queued_spec = spec;
    j->queued_attained = j->attained;
    j->queued_at = j->queued_since;
    ++eligible;
    j->queue_pass = queue_passes_;
  }
  if (queue.size() == eligible) return;
  // Some left pending_ since the last pass (cancelled): out.
  std::vector<JobId> gone;
  for (const PendingJob& p : queue.jobs()) {
    const auto it = jobs_.find(static_cast<int64_t>(p.id));
    if (it == jobs_.end() || it->second->queue_pass != queue_passes_) gone.push_back(p.id);
  }
  for (const JobId id : gone) unqueue_locked(id);
}

void Service::run_cycle() {
  std::vector<RunningJob> running;
  CycleDriver::Cycle cycle;
  std::shared_ptr<const QueueTree> tree;
  std::vector<Amounts> decayed;
  // The power view is fixed since construction (safe to read unlocked) but for the thermal
  // headroom, which each power reading changes: with one, this cycle's copy is taken under the
  // lock.
  std::optional<PowerView> thermal_view;
  Snapshot snap;
  {
    std::lock_guard lock(mu_);
    // Decisions wait until the database can record them.
    if (!retry_writes_locked()) return;
    // Something happened that may change which jobs may start: the queue is brought up to it.
    queue_stale_ = queue_stale_ || dirty_;
    dirty_ = false;
    cancel_unmet_dependencies_locked(now());
    // Specs `tessera update` changed, swapped in now that no cycle reads them.
    for (const int64_t id : spec_updates_) {
      if (auto it = jobs_.find(id); it != jobs_.end() && it->second->next_spec) {
        unqueue_locked(id);  // its place in the queue was taken by the spec it had
        queue_stale_ = true;
        it->second->spec = std::move(*it->second->next_spec);
        it->second->next_spec.reset();
      }
    }
    spec_updates_.clear();
    apply_drains_locked();
    evict_finished_locked(now());
    if (goodput_round_due_locked(now())) {
      goodput_round_locked(now());
      queue_stale_ = true;
    }
    cycle = driver_.begin(now());
    // Nothing changed since the last cycle: the queue is as it was (a refresh passes over it
    // anyway, so that a change no event announced is not missed for longer).
    reasons_only_ = !(queue_stale_ || dirty_ || cycle.refresh || !driver_.has_queue());
    if (!reasons_only_) sync_queue_locked();
    queue_stale_ = false;
    for (const auto& [id, jp] : active_) {
      const Job& j = *jp;
      if (j.row.state != JobState::kRunning || j.alloc.empty() || j.stopping) continue;
      RunningJob r;
      r.id = static_cast<JobId>(id);
      r.spec = &j.spec;
      r.alloc = &j.alloc;
      r.start_time = j.row.started_at;
      r.attained_gpu_seconds = j.attained + run_gpu_seconds(j.row, j.alloc, cycle.now);
      if (j.spec.duration_estimate >= 0) {
        r.expected_end = std::max(cycle.now, j.row.started_at + j.spec.duration_estimate);
      }
      r.last_checkpoint = j.row.started_at;
      r.power_limit_w = j.row.power_limit_w;
      running.push_back(r);
    }
    tree = tree_;
    if (opt_.thermal_limit_c > 0 && thermal_headroom_w_ >= 0) {
      thermal_view = power_view_;
      thermal_view->node_headroom_w.assign(cluster_.nodes().size(), thermal_headroom_w_);
    }
    advance_decayed_locked(cycle.now);
    const std::span<const Amounts> held = driver_.usage().decayed().view();
    decayed.assign(held.begin(), held.end());
  }
  snap.state = &state_;
  snap.decayed_usage = decayed;
  snap.running = running;
  snap.queues = tree.get();
  if (power_policies_) snap.power = thermal_view ? &*thermal_view : &power_view_;
  // Carbon-aware deferral of best-effort jobs in queues with carbon_defer (on Unix time, as
  // the jobs' submission times and the clock).
  snap.carbon = opt_.carbon.get();
  // Unlocked: only this thread changes the ledger, allocations and the queue, and specs never
  // change.
  CycleDriver::Outcome outcome = driver_.decide(cycle, snap);
  Decisions& d = outcome.decisions;

  std::lock_guard lock(mu_);
  // A job keeps its reason until a cycle gives it another.
  for (const PendingReason& r : d.pending)
    reasons_.insert_or_assign(static_cast<int64_t>(r.job), r);
  driver_.settle(outcome);
  const double t = now();
  // The decisions change memory, are written, and only then acted on: victims signalled,
  // processes started. A write the database refuses undoes them, so nothing was signalled or
  // started that the database does not know of, and the next cycle decides again.
  struct Before {
    Job* job;
    JobRow row;
    Allocation alloc;
    std::vector<int64_t> waits_for;
    bool active;
    RunRecord run;
    double run_joules;
    double power_since;
  };
  std::vector<Before> before;  // in the order changed
  auto keep = [&](Job& j) {
    before.push_back(Before{&j, j.row, j.alloc, j.waits_for, active_.count(j.row.id) != 0, j.run,
                            j.run_joules, j.power_since});
  };
  std::vector<const JobRow*> dirty;
  std::vector<Job*> to_launch, to_stop, requeued, awaiting_data;
  std::set<int64_t> started;
  uint64_t preempted = 0;
  // Starts of one cycle count together against each tenant's process limit: the snapshot
  // held out the jobs that alone would pass it, not two that together do.
  std::vector<int64_t> procs = running_members_locked();
  const std::vector<int64_t> caps = process_caps_locked();
  for (Start& s : d.starts) {
    Job& j = *jobs_.at(s.job);
    if (j.row.state != JobState::kPending) continue;  // cancelled while the cycle ran
    const TenantId tenant = j.spec.tenant;
    const int64_t members = s.alloc.members();
    if (tenant < caps.size() && procs[tenant] + members > caps[tenant]) {
      process_held_.insert(s.job);
      continue;
    }
    keep(j);
    for (const Preemption& p : d.preemptions) {
      if (p.for_job != s.job) continue;
      Job& v = *jobs_.at(p.job);
      if (v.row.state != JobState::kRunning || v.stopping) continue;
      keep(v);
      v.row.state = JobState::kPreempted;
      ++v.row.preemptions;
      ++preempted;
      v.row.message = "preempted by job " + std::to_string(s.job) + " (" + j.row.tenant + ")";
      v.preempted_by = static_cast<int64_t>(s.job);
      v.preempted_by_tenant = j.row.tenant;
      release_locked(v);  // its GPUs pass to the preemptor, which starts once it has exited
      v.waits_for.clear();
      if (v.members.empty()) {  // never launched: straight back to the queue
        v.row.state = JobState::kPending;
        requeued.push_back(&v);
      } else {
        to_stop.push_back(&v);
        j.waits_for.push_back(p.job);
      }
      dirty.push_back(&v.row);
    }
    if (!state_.fits(s.alloc)) {
      dirty_ = true;  // decided on a stale ledger; the next cycle decides again
      continue;
    }
    state_.allocate(s.alloc);
    if (tenant < procs.size()) procs[tenant] += members;
    j.alloc = std::move(s.alloc);
    active_[s.job] = &j;
    started.insert(s.job);
    // Its power limit (set with a power view; its run draws at it from its start).
    set_power_limit_locked(j, snap.power != nullptr ? s.power_limit_w : 0.0, t,
                           start_limit_why_locked(j, s.power_limit_w));
    // A start that preempted waits, holding its GPUs, until its victims have exited; one whose
    // dataset the cache does not hold waits for it to be staged. Either is still pending (to
    // the API and in the store) until its processes start.
    if (j.waits_for.empty()) {
      if (needs_staging_locked(j)) {
        awaiting_data.push_back(&j);
      } else {
        begin_run_locked(j, t);
        dirty.push_back(&j.row);
        to_launch.push_back(&j);
      }
    }
  }
  // Running jobs' limits lowered to make room under the power cap, or raised as power freed.
  for (const PowerLimit& p : d.power_limits) {
    const auto it = jobs_.find(static_cast<int64_t>(p.job));
    if (it == jobs_.end()) continue;
    Job& j = *it->second;
    if (j.row.state != JobState::kRunning || j.stopping || j.alloc.empty()) continue;
    const double was = j.row.power_limit_w > 0 ? j.row.power_limit_w : tdp_of(j.alloc);
    if (std::abs(p.limit_w - was) < 0.5) continue;
    keep(j);
    set_power_limit_locked(j, p.limit_w, t, p.limit_w < was ? "power cap" : "raised: power freed");
    dirty.push_back(&j.row);
  }
  try {
    if (!dirty.empty()) store_->update_jobs(dirty, nullptr, {}, row_events_locked(dirty, t));
  } catch (const StoreError& e) {
    note_write_failure(e);
    // Undo: every allocation made or released here is returned, then each job gets back what
    // it had before its first change (the earliest saved copy wins, so restore newest first).
    std::set<Job*> touched;
    for (const Before& b : before) touched.insert(b.job);
    for (Job* j : touched) {
      if (!j->alloc.empty()) state_.release(j->alloc);
    }
    for (auto it = before.rbegin(); it != before.rend(); ++it) {
      Job& j = *it->job;
      j.row = std::move(it->row);
      j.alloc = std::move(it->alloc);
      j.waits_for = std::move(it->waits_for);
      j.run = std::move(it->run);
      j.run_joules = it->run_joules;
      j.power_since = it->power_since;
      if (it->active) {
        active_[j.row.id] = &j;
      } else {
        active_.erase(j.row.id);
      }
    }
    for (Job* j : touched) {
      if (!j->alloc.empty()) state_.allocate(j->alloc);
    }
    return;
  }
  note_write_success();
  mark_recorded_locked(dirty);
  counters_.starts += started.size();
  counters_.preemptions += preempted;
  if (!started.empty()) {
    pending_.erase_if([&](const Job* p) { return started.count(p->row.id) != 0; });
    for (const int64_t id : started) {
      unqueue_locked(id);
      reasons_.erase(id);
    }
  }
  for (Job* v : requeued) {
    v->queued_since = t;
    pending_.push_back(v);
    queue_stale_ = true;
  }
  for (Job* v : to_stop) ask_to_stop_locked(*v, t);
  apply_gpu_power_limits_locked();  // before the new jobs' processes start
  std::vector<const JobRow*> launched;
  for (Job* j : to_launch) launch_locked(*j, launched);
  for (Job* j : awaiting_data) {
    j->staging = true;
    stage_for_locked(*j, launched);
  }
  stage_ahead_locked(t);
  if (!launched.empty()) save_rows_locked(launched);
  // A reason code changes only with the engine's reason (the jobs given one this cycle) or with
  // what holds a job out of the cycle (the jobs whose standing the queue's sync found changed);
  // a refresh looks at every waiting job.
  if (cycle.refresh) {
    record_reason_changes_locked(t);
  } else {
    // (A job placed this cycle has left the waiting jobs: its placement is its news.)
    std::vector<Job*> look;
    if (!reasons_only_) {
      for (Job* j : restanding_) {
        if (started.count(j->row.id) == 0) look.push_back(j);
      }
    }
    for (const PendingReason& r : d.pending) {
      if (auto it = jobs_.find(static_cast<int64_t>(r.job)); it != jobs_.end()) {
        look.push_back(it->second.get());
      }
    }
    record_reason_changes_locked(t, &look);
  }
}

}  // namespace tessera
