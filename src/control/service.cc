#include "control/service.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>
#include <algorithm>
#include <cerrno>
#include <chrono>
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
#include "control/token.h"
#include "engine/admission.h"
#include "engine/cycle.h"
#include "engine/fair_share.h"
#include "engine/snapshot.h"
#include "model/input_error.h"
#include "model/utf8.h"

namespace tessera {

struct Service::Job {
  JobRow row;
  JobSpec spec;
  Allocation alloc;                   // what it holds in the ledger; empty = nothing
  std::vector<MemberHandle> members;  // processes of the current attempt; empty = none alive
  std::vector<int64_t> waits_for;     // preempted victims whose processes must end first
  double kill_at = -1;                // a stopping job gets SIGKILL at this time (-1: sent)
  bool stopping = false;              // asked to stop (SIGTERM or SIGKILL sent)
  std::string failure;                // why a running gang is being stopped as failed
  std::optional<int32_t> failure_code;
  double queued_since = 0;
  double attained = 0;  // GPU-seconds of earlier runs
  // Why it cannot run on this cluster as configured now (set at a restart with fewer GPUs, a
  // GPU type gone, a queue that no longer allows its priority); such a job waits, out of the
  // cycle, rather than being failed for a change of configuration.
  std::string unrunnable;
  bool timed_out = false;   // being stopped because its run reached its time limit
  std::string requeued_by;  // being stopped to be queued again (tessera requeue), by whom
  // A spec changed by `tessera update`, waiting to replace `spec`: a cycle may be reading
  // `spec` unlocked, so it is swapped in only between cycles (run_cycle, under the lock).
  std::optional<JobSpec> next_spec;
  // Accounting: the current run (begin_run_locked), written to job_runs when it ends, and the
  // job it was preempted for.
  RunRecord run;
  int64_t preempted_by = -1;
  std::string preempted_by_tenant;
};

namespace {

// The audit log names its actors "admin" and "anonymous": a tenant of either name could not be
// told apart from them (issue 14, finding 16).
void refuse_reserved_tenant(const std::string& name, const std::string& field) {
  if (name == "admin" || name == "anonymous") {
    throw ServiceError(ServiceError::kInvalid, field,
                       "tenant name " + name + " is reserved (the audit log's own actors)");
  }
}

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

// The cluster this host offers, and the host GPU index of every GpuId.
Cluster build_cluster(const ServiceOptions& opt, std::vector<int32_t>& index) {
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
  if (gpus.empty()) {
    const int n = opt.virtual_gpus > 0 ? opt.virtual_gpus : kDefaultVirtualGpus;
    b.add_node("spine", "rack", host, b.gpu_types().intern("virtual"), static_cast<uint16_t>(n),
               host_cpu_milli(), host_mem_mib());
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

// GPU-seconds of a job's current run up to `t` (0 when it has not started).
double run_gpu_seconds(const JobRow& row, const Allocation& alloc, double t) {
  if (row.started_at < 0) return 0;
  return (t - row.started_at) * static_cast<double>(alloc.gpu_milli()) / 1000.0;
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

constexpr double kCycleBuckets[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                    0.01,   0.025,   0.05,   0.1,   0.25,   1.0};

}  // namespace

Service::Service(ServiceOptions opt, std::unique_ptr<Backend> backend)
    : opt_(std::move(opt)),
      cluster_(build_cluster(opt_, gpu_index_)),
      store_(open_store(opt_, /*local_backend=*/!backend)),
      backend_(backend
                   ? std::move(backend)
                   : std::make_unique<LocalBackend>(
                         opt_.work_dir, LocalBackendOptions{store_->database_id(), opt_.pass_env,
                                                            opt_.cgroups, opt_.pids_per_member})),
      policy_(make_policy(opt_.policy, opt_.seed)),
      state_(cluster_),
      pending_([](const Job* j) { return j->spec.tenant; }) {
  counters_.cycle_bucket_bounds.assign(std::begin(kCycleBuckets), std::end(kCycleBuckets));
  counters_.cycle_bucket_counts.assign(counters_.cycle_bucket_bounds.size(), 0);
  std::lock_guard lock(mu_);
  if (!opt_.queues_path.empty()) {
    tree_template_ = load_queue_tree(opt_.queues_path);
    tree_template_.validate_against(cluster_);
    flat_tree_ = false;
  }
  for (const TenantRow& t : store_->tenants()) {
    tenants_.intern(t.name);
    token_tenant_[t.token_sha256] = t.name;
  }
  admin_hash_ = store_->setting("admin_token_sha256").value_or("");
  if (const auto uids = store_->setting("tenant_uids")) {
    const auto j = nlohmann::json::parse(*uids, nullptr, false);
    if (j.is_object()) {
      for (const auto& [name, uid] : j.items()) {
        if (uid.is_number_integer()) tenant_uids_[name] = uid.get<int64_t>();
      }
    }
  }
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
  recover();
  restore_decayed_locked();
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
  decayed_ = decayed_.resized(t->size(), t->settings().half_life_seconds);
  last_usage_.resize(t->size(), kZeroAmounts);
  leaves_.clear();
  for (QueueId q = 0; q < t->size(); ++q) {
    if (t->queue(q).leaf()) leaves_.push_back(q);
  }
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
  if (!decayed_.on()) return;
  // What each leaf held since the last cycle (jobs change only at cycles and polls, so the
  // usage as of the last cycle is a close account of the interval).
  if (last_decay_at_ > 0) decayed_.advance(t - last_decay_at_, last_usage_, leaves_);
  last_decay_at_ = t;
  std::fill(last_usage_.begin(), last_usage_.end(), kZeroAmounts);
  for (const auto& [id, jp] : active_) {
    if (jp->alloc.empty()) continue;
    const QueueId leaf = tree_->leaf_of(jp->spec.tenant);
    if (leaf == kNoId) continue;
    last_usage_[leaf] =
        last_usage_[leaf] + fair_amounts_of(tree_->settings(), cluster_, jp->spec, jp->alloc);
  }
  // Kept across restarts, by queue path, at most once a minute.
  if (t - last_decay_saved_ >= 60) {
    last_decay_saved_ = t;
    try {
      store_->set_setting("decayed_usage", usage_to_json(usage_by_path(*tree_, decayed_)));
    } catch (const StoreError& e) {
      note_write_failure(e);  // a memory of usage, saved again next minute
    }
  }
}

void Service::restore_decayed_locked() {
  if (!decayed_.on()) return;
  const auto text = store_->setting("decayed_usage");
  if (!text) return;
  std::optional<UsageByPath> saved = usage_from_json(*text);
  if (!saved) return;  // unreadable: start afresh (it is a memory, not a ledger)
  apply_usage(*tree_, *saved, decayed_);
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
                       "GPU type '" + name + "' does not exist in this cluster");
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
  if (auto why = infeasible_reason(cluster_, s)) {
    config_problem(ServiceError::kInfeasible, "resources", "can never run here: " + *why);
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
    JobRow& row = j->row;
    const TenantId tid = *tenants_.find(row.tenant);
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
            backend_->signal(found, SIGKILL);
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
          j->run = run_record_locked(*j);  // its run goes on: accounted when it ends
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
            backend_->signal(j->members, SIGKILL);
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
    if (!j->alloc.empty() || !j->members.empty()) active_[row.id] = j.get();
    jobs_.emplace(row.id, std::move(j));
  }
  // A full disk must not stop the server from starting: what recovery learned stays in memory
  // and is written once the database takes writes again.
  if (!dirty.empty()) save_rows_locked(dirty);
}

void Service::start() {
  if (thread_.joinable()) return;
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
    if (run) {
      run_cycle();
      last_cycle = Clock::now();
    }
  }
}

void Service::tick() {
  poll_processes();
  launch_ready();
  run_cycle();
}

void Service::release_locked(Job& j) {
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

void Service::drain_node(const RequestContext& ctx, const std::string& name, bool drain) {
  if (!ctx.caller.admin) {
    throw ServiceError(ServiceError::kForbidden, "", "only the admin drains or resumes nodes");
  }
  std::lock_guard lock(mu_);
  const auto& nodes = cluster_.nodes();
  if (std::none_of(nodes.begin(), nodes.end(), [&](const Node& n) { return n.name == name; })) {
    std::string known;
    for (const Node& n : nodes) known += (known.empty() ? "" : ", ") + n.name;
    throw ServiceError(ServiceError::kNotFound, "node",
                       "no node " + name + " (nodes: " + known + ")");
  }
  std::set<std::string> next = drained_;
  if (drain) {
    next.insert(name);
  } else {
    next.erase(name);
  }
  const AuditEntry audit{0, now(), ctx.caller.actor(), ctx.method, ctx.path, 200, "node " + name};
  api_write([&] { store_->set_setting("drained_nodes", nlohmann::json(next).dump(), &audit); });
  drained_ = std::move(next);
  dirty_ = true;  // the loop applies it at its next cycle
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
          backend_->signal(j.members, SIGKILL);
          break;
        }
      } else if (j.stopping && j.kill_at >= 0 && t >= j.kill_at) {
        backend_->signal(j.members, SIGKILL);
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
    const JobState was = j.row.state;
    const bool requeued = !j.requeued_by.empty();
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
        if (!j.requeued_by.empty()) {
          j.row.state = JobState::kPending;
          j.row.message = "requeued by " + j.requeued_by;
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
        pending_.push_back(&j);
        break;
      default:
        break;
    }
    end_run_locked(j, ended,
                   was == JobState::kPreempted ? "preempted"
                   : requeued                  ? "requeued"
                                               : std::string(to_string(j.row.state)));
    j.failure.clear();
    j.failure_code.reset();
    j.timed_out = false;
    j.requeued_by.clear();
    release_locked(j);
    dirty.push_back(&j.row);
    dirty_ = true;
  }
  if (!dirty.empty()) save_rows_locked(dirty);
  std::erase_if(active_,
                [](const auto& e) { return e.second->alloc.empty() && e.second->members.empty(); });
}

std::string Service::leaf_path_locked(TenantId t) const {
  const QueueId leaf = tree_ ? tree_->leaf_of(t) : kNoId;
  if (leaf == kNoId) return "";
  return leaf == kRootQueue ? "/" : tree_->queue(leaf).path;
}

void Service::apply_time_limit_locked(JobRequest& req, TenantId t) const {
  const QueueId leaf = tree_ ? tree_->leaf_of(t) : kNoId;
  if (leaf == kNoId) return;
  const QueueSpec& q = tree_->queue(leaf);
  if (req.time_limit_seconds < 0) {
    req.time_limit_seconds =
        q.default_time_limit_seconds >= 0 ? q.default_time_limit_seconds : q.max_time_limit_seconds;
  } else if (q.max_time_limit_seconds >= 0 && req.time_limit_seconds > q.max_time_limit_seconds) {
    char msg[200];
    std::snprintf(msg, sizeof msg, "%g s is more than queue %s allows (time_limit.max %g s)",
                  req.time_limit_seconds, q.path.c_str(), q.max_time_limit_seconds);
    throw ServiceError(ServiceError::kInvalid, "time_limit", msg);
  }
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
  backend_->signal(j.members, SIGTERM);
}

int64_t Service::uid_for_tenant_locked(const std::string& tenant) {
  if (auto it = tenant_uids_.find(tenant); it != tenant_uids_.end()) return it->second;
  int64_t next = opt_.tenant_uid_base;
  for (const auto& [name, uid] : tenant_uids_) next = std::max(next, uid + 1);
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
  ls.master_port = free_port();
  for (const MemberPlacement& p : placement_locked(j.alloc)) {
    ls.members.push_back(
        MemberLaunch{p.rank, p.gpus, p.gpu_milli, j.spec.demand.mem_mib, j.spec.demand.cpu_milli});
  }
  try {
    // Never as the server's uid by mistake: a tenant whose uid cannot be stored does not start.
    if (opt_.tenant_uids) ls.run_as_uid = ls.run_as_gid = uid_for_tenant_locked(j.row.tenant);
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
  unsaved_runs_.push_back(std::move(j.run));
  j.run = RunRecord{};
}

void Service::launch_ready() {
  std::lock_guard lock(mu_);
  // No process starts that the database could not record.
  if (!retry_writes_locked()) return;
  std::vector<const JobRow*> dirty;
  for (auto& [id, jp] : active_) {
    Job& j = *jp;
    if (j.row.state != JobState::kPending || j.waits_for.empty() || j.alloc.empty()) continue;
    const bool clear = std::all_of(j.waits_for.begin(), j.waits_for.end(), [&](int64_t v) {
      auto it = jobs_.find(v);
      return it == jobs_.end() || it->second->members.empty();
    });
    if (!clear) continue;
    j.waits_for.clear();
    begin_run_locked(j, now());
    launch_locked(j, dirty);
  }
  if (!dirty.empty()) save_rows_locked(dirty);
}

bool Service::save_rows_locked(const std::vector<const JobRow*>& rows) {
  std::vector<const JobRow*> all = rows;
  for (const int64_t id : unsaved_) all.push_back(&jobs_.at(id)->row);
  try {
    store_->update_jobs(all, nullptr, unsaved_runs_);
  } catch (const StoreError& e) {
    for (const JobRow* r : rows) unsaved_.insert(r->id);
    note_write_failure(e);
    return false;
  }
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

TenantLimits Service::limits_for_locked(TenantId t) const {
  std::vector<QueueId> path;  // leaf first
  for (QueueId q = tree_->leaf_of(t); q != kNoId; q = tree_->queue(q).parent) {
    path.push_back(q);
    if (q == kRootQueue) break;
  }
  // From the root down, each queue that sets a limit replaces what is above it (the server's
  // flags first): the queue nearest the tenant's leaf wins.
  TenantLimits lim = opt_.limits;
  for (auto it = path.rbegin(); it != path.rend(); ++it) {
    const QueueSpec& s = tree_->queue(*it);
    if (s.max_pending_jobs >= 0) lim.max_pending_jobs = s.max_pending_jobs;
    if (s.max_gang_size >= 0) lim.max_gang_members = static_cast<int32_t>(s.max_gang_size);
    if (s.max_processes >= 0) lim.max_running_members = s.max_processes;
    if (s.submissions_per_second >= 0) lim.submissions_per_second = s.submissions_per_second;
  }
  return lim;
}

void Service::check_limits_locked(const Caller& caller, const JobRequest& req, TenantId t,
                                  double now_s) {
  const TenantLimits lim = limits_for_locked(t);
  if (req.max_members > lim.max_gang_members) {
    throw ServiceError(ServiceError::kInvalid, "gang.max",
                       "a gang of " + std::to_string(req.max_members) +
                           " members is more than this server runs as one job (" +
                           std::to_string(lim.max_gang_members) +
                           ", --max-gang-size or the queue's tenant_limits)");
  }
  if (pending_.count(t) >= lim.max_pending_jobs) {
    throw ServiceError(
        ServiceError::kTooMany, "",
        "tenant " + req.tenant + " has " + std::to_string(pending_.count(t)) +
            " jobs waiting, the most this server queues for one tenant (" +
            std::to_string(lim.max_pending_jobs) +
            ", --max-pending-per-tenant or the queue's tenant_limits); submit more as they "
            "start");
  }
  // The admin is the operator, not a tenant racing others: only tenants' tokens are metered.
  if (!caller.admin && lim.submissions_per_second > 0) {
    if (t >= submissions_.size()) {
      submissions_.resize(t + 1, TokenBucket(lim.submission_burst, lim.submissions_per_second));
    }
    if (!submissions_[t].take(now_s)) {
      throw ServiceError(ServiceError::kTooMany, "",
                         "tenant " + req.tenant + " submits faster than " +
                             fmt::format("{:g}", lim.submissions_per_second) +
                             " jobs a second (--max-submissions-per-second); retry later");
    }
  }
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

void Service::hold_for_process_limits_locked(std::vector<PendingJob>& pending) {
  const std::vector<int64_t> running = running_members_locked();
  const std::vector<int64_t> cap = process_caps_locked();
  process_held_.clear();
  std::erase_if(pending, [&](const PendingJob& p) {
    const TenantId t = p.spec->tenant;
    const int64_t would = (t < running.size() ? running[t] : 0) + p.spec->max_members;
    if (t >= cap.size() || would <= cap[t]) return false;
    process_held_.insert(static_cast<int64_t>(p.id));
    return true;
  });
}

std::vector<PendingJob> Service::pending_snapshot_locked() const {
  std::vector<PendingJob> out;
  out.reserve(pending_.size());
  for (const Job* j : pending_) {
    if (!j->unrunnable.empty() || j->row.held) continue;  // no decision can start it
    if (dependencies_locked(j->row).state != DependencyState::kMet) continue;
    out.push_back(
        PendingJob{static_cast<JobId>(j->row.id), &j->spec, j->attained, j->queued_since});
  }
  return out;
}

void Service::run_cycle() {
  std::vector<PendingJob> pending;
  std::vector<RunningJob> running;
  std::shared_ptr<const QueueTree> tree;
  std::vector<Amounts> decayed;
  Snapshot snap;
  {
    std::lock_guard lock(mu_);
    // Decisions wait until the database can record them.
    if (!retry_writes_locked()) return;
    dirty_ = false;
    cancel_unmet_dependencies_locked(now());
    // Specs `tessera update` changed, swapped in now that no cycle reads them.
    for (const int64_t id : spec_updates_) {
      if (auto it = jobs_.find(id); it != jobs_.end() && it->second->next_spec) {
        it->second->spec = std::move(*it->second->next_spec);
        it->second->next_spec.reset();
      }
    }
    spec_updates_.clear();
    apply_drains_locked();
    snap.now = now();
    snap.cycle = ++cycle_no_;
    pending = pending_snapshot_locked();
    hold_for_process_limits_locked(pending);
    for (const auto& [id, jp] : active_) {
      const Job& j = *jp;
      if (j.row.state != JobState::kRunning || j.alloc.empty() || j.stopping) continue;
      RunningJob r;
      r.id = static_cast<JobId>(id);
      r.spec = &j.spec;
      r.alloc = &j.alloc;
      r.start_time = j.row.started_at;
      r.attained_gpu_seconds = j.attained + run_gpu_seconds(j.row, j.alloc, snap.now);
      if (j.spec.duration_estimate >= 0) {
        r.expected_end = std::max(snap.now, j.row.started_at + j.spec.duration_estimate);
      }
      r.last_checkpoint = j.row.started_at;
      running.push_back(r);
    }
    tree = tree_;
    advance_decayed_locked(snap.now);
    decayed.assign(decayed_.view().begin(), decayed_.view().end());
  }
  snap.state = &state_;
  snap.decayed_usage = decayed;
  snap.pending = pending;
  snap.running = running;
  snap.queues = tree.get();
  // Unlocked: only this thread changes the ledger and allocations, and specs never change.
  const auto t0 = Clock::now();
  Decisions d = schedule_cycle(snap, policy_);
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();

  std::unordered_map<int64_t, PendingReason> reasons;
  reasons.reserve(d.pending.size());
  for (const PendingReason& r : d.pending) reasons.emplace(r.job, r);

  std::lock_guard lock(mu_);
  reasons_.swap(reasons);
  ++counters_.cycles;
  counters_.cycle_seconds_sum += secs;
  for (size_t b = 0; b < counters_.cycle_bucket_bounds.size(); ++b) {
    if (secs <= counters_.cycle_bucket_bounds[b]) ++counters_.cycle_bucket_counts[b];
  }
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
  };
  std::vector<Before> before;  // in the order changed
  auto keep = [&](Job& j) {
    before.push_back(Before{&j, j.row, j.alloc, j.waits_for, active_.count(j.row.id) != 0});
  };
  std::vector<const JobRow*> dirty;
  std::vector<Job*> to_launch, to_stop, requeued;
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
    // A start that preempted waits, holding its GPUs, until its victims have exited; it is
    // still pending (to the API and in the store) until its processes start.
    if (j.waits_for.empty()) {
      begin_run_locked(j, t);
      dirty.push_back(&j.row);
      to_launch.push_back(&j);
    }
  }
  try {
    if (!dirty.empty()) store_->update_jobs(dirty);
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
  counters_.starts += started.size();
  counters_.preemptions += preempted;
  if (!started.empty()) {
    pending_.erase_if([&](const Job* p) { return started.count(p->row.id) != 0; });
  }
  for (Job* v : requeued) {
    v->queued_since = t;
    pending_.push_back(v);
  }
  for (Job* v : to_stop) ask_to_stop_locked(*v, t);
  std::vector<const JobRow*> launched;
  for (Job* j : to_launch) launch_locked(*j, launched);
  if (!launched.empty()) save_rows_locked(launched);
}

std::optional<Caller> Service::authenticate(const std::string& token) const {
  if (token.empty()) return std::nullopt;
  const std::string h = sha256_hex(token);
  std::lock_guard lock(mu_);
  if (!admin_hash_.empty() && h == admin_hash_) return Caller{true, ""};
  auto it = token_tenant_.find(h);
  if (it == token_tenant_.end()) return std::nullopt;
  return Caller{false, it->second};
}

void Service::set_admin_token(const std::string& token) {
  const std::string h = sha256_hex(token);
  std::lock_guard lock(mu_);
  // Unchanged at every restart: no write, so a server whose disk is full still starts.
  if (h == admin_hash_) return;
  store_->set_setting("admin_token_sha256", h);
  admin_hash_ = h;
}

bool Service::has_admin_token() const {
  std::lock_guard lock(mu_);
  return !admin_hash_.empty();
}

JobView Service::submit(const RequestContext& ctx, JobRequest req,
                        const std::string& idempotency_key, bool* created) {
  if (created != nullptr) *created = false;
  std::lock_guard lock(mu_);
  if (ctx.caller.admin) {
    if (req.tenant.empty()) {
      throw ServiceError(ServiceError::kInvalid, "tenant",
                         "the admin submits on behalf of a tenant: name it in `tenant`");
    }
  } else if (req.tenant.empty()) {
    req.tenant = ctx.caller.tenant;
  } else if (req.tenant != ctx.caller.tenant) {
    throw ServiceError(
        ServiceError::kForbidden, "tenant",
        "token of tenant " + ctx.caller.tenant + " cannot submit for tenant " + req.tenant);
  }
  if (!idempotency_key.empty()) {
    if (idempotency_key.size() > kMaxIdempotencyKeyChars ||
        !std::all_of(idempotency_key.begin(), idempotency_key.end(),
                     [](char c) { return c > ' ' && c < 127; })) {
      throw ServiceError(ServiceError::kInvalid, "Idempotency-Key",
                         "an idempotency key is 1-" + std::to_string(kMaxIdempotencyKeyChars) +
                             " printable ASCII characters");
    }
    auto it = idempotency_.find({req.tenant, idempotency_key});
    if (it != idempotency_.end()) {
      const Job& first = *jobs_.at(it->second);
      // A retry repeats its request; the same key with another spec is a client's mistake, and
      // answering with the first job would hide it.
      if (!(first.row.spec == req)) {
        throw ServiceError(ServiceError::kConflict, "Idempotency-Key",
                           "idempotency key already used for job " + std::to_string(first.row.id) +
                               " with a different spec");
      }
      return view_locked(first);
    }
  }
  if (!tenants_.find(req.tenant)) {
    if (!is_valid_name(req.tenant) && flat_tree_) {
      throw ServiceError(ServiceError::kInvalid, "tenant",
                         "tenant names are 1-63 characters of letters, digits, '-', '_', '.'");
    }
    refuse_reserved_tenant(req.tenant, "tenant");
    // A tenant without a token (the admin submits for it): it gets a queue like any other.
    add_tenant_locked(req.tenant, "tenant");
  }
  if (req.checkpoint_grace_seconds > opt_.max_checkpoint_grace_seconds) {
    char msg[160];
    std::snprintf(msg, sizeof msg,
                  "%g s is more than this server allows (%g s, --max-checkpoint-grace)",
                  req.checkpoint_grace_seconds, opt_.max_checkpoint_grace_seconds);
    throw ServiceError(ServiceError::kInvalid, "checkpoint_grace", msg);
  }
  const TenantId tid = *tenants_.find(req.tenant);
  const double t = now();
  check_limits_locked(ctx.caller, req, tid, t);
  apply_time_limit_locked(req, tid);
  // Dependencies name jobs the caller can see (another tenant's ids are not found).
  for (const auto* list : {&req.after_ok, &req.after_any}) {
    for (size_t i = 0; i < list->size(); ++i) {
      const int64_t dep = (*list)[i];
      const auto it = jobs_.find(dep);
      if (it == jobs_.end() || (!ctx.caller.admin && it->second->row.tenant != ctx.caller.tenant)) {
        throw ServiceError(ServiceError::kInvalid,
                           std::string(list == &req.after_ok ? "after_ok" : "after_any") + "[" +
                               std::to_string(i) + "]",
                           "job " + std::to_string(dep) + " not found");
      }
    }
  }
  auto j = std::make_unique<Job>();
  j->spec = to_spec_locked(req, tid, "submitted job");
  j->spec.submit_time = t;  // arrival order and SLA deadlines count from it
  j->row.tenant = req.tenant;
  j->row.spec = std::move(req);
  j->row.submitted_at = t;
  j->row.idempotency_key = idempotency_key;
  j->queued_since = t;
  const AuditEntry audit{0, t, ctx.caller.actor(), ctx.method, ctx.path, 201, ""};
  int64_t id = 0;
  api_write([&] { id = store_->insert_job(j->row, &audit); });
  j->spec.source = "job " + std::to_string(id);
  if (!idempotency_key.empty()) idempotency_[{j->row.tenant, idempotency_key}] = id;
  pending_.push_back(j.get());
  Job& ref = *j;
  jobs_.emplace(id, std::move(j));
  dirty_ = true;
  wake_.notify_one();
  if (created != nullptr) *created = true;
  return view_locked(ref);
}

Service::Job& Service::visible_job_locked(const Caller& caller, int64_t id) const {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) {
    throw ServiceError(ServiceError::kNotFound, "", "job " + std::to_string(id) + " not found");
  }
  if (!caller.admin && it->second->row.tenant != caller.tenant) {
    throw ServiceError(ServiceError::kForbidden, "",
                       "job " + std::to_string(id) + " belongs to another tenant");
  }
  return *it->second;
}

JobView Service::cancel(const RequestContext& ctx, int64_t id, bool force) {
  std::lock_guard lock(mu_);
  Job& j = visible_job_locked(ctx.caller, id);
  const double t = now();
  const AuditEntry audit{0,
                         t,
                         ctx.caller.actor(),
                         ctx.method,
                         ctx.path,
                         200,
                         "job " + std::to_string(id) + (force ? " (force)" : "")};
  // Cancelled (or preempted) and still waiting for its processes to exit: a second cancel
  // is answered, not refused, and `force` ends the grace (a job that ignores SIGTERM would
  // otherwise keep its GPUs until the grace runs out).
  const bool stopping = j.stopping && !j.members.empty() &&
                        (j.row.state == JobState::kCancelled || !is_terminal(j.row.state));
  if (is_terminal(j.row.state) && !stopping) {
    throw ServiceError(
        ServiceError::kConflict, "",
        "job " + std::to_string(id) + " already " + std::string(to_string(j.row.state)));
  }
  // The row is written first and memory follows only once it is committed: a failed write
  // (a full disk) leaves the job as it was, in memory and on disk alike.
  JobRow next = j.row;
  if (next.state != JobState::kCancelled) {
    next.state = JobState::kCancelled;
    next.message = "cancelled by " + ctx.caller.actor();
    if (j.members.empty()) next.finished_at = t;
  }
  if (force) next.message += " (force: killed without waiting for its grace)";
  api_write([&] { store_->update_job(next, &audit); });
  const JobState was = j.row.state;
  j.row = std::move(next);
  if (was == JobState::kPending) pending_.erase(&j);
  if (j.members.empty()) {
    // Nothing runs. GPUs it holds (placed, waiting for its victims to exit) are released by
    // the scheduler thread: the ledger changes only there, as the unlocked cycle requires.
    j.waits_for.clear();
  } else if (force) {
    j.stopping = true;
    j.kill_at = -1;  // sent now
    backend_->signal(j.members, SIGKILL);
  } else if (!j.stopping) {
    ask_to_stop_locked(j, t);
  }
  dirty_ = true;
  wake_.notify_one();
  return view_locked(j);
}

Service::DependencyState Service::dependencies_locked(const JobRow& row) const {
  DependencyState out;
  std::string waiting;
  const auto check = [&](const std::vector<int64_t>& ids, bool must_succeed) {
    for (const int64_t dep : ids) {
      const auto it = jobs_.find(dep);
      if (it == jobs_.end()) continue;  // checked at submission; never erased
      const JobState s = it->second->row.state;
      const std::string name = "job " + std::to_string(dep);
      if (!is_terminal(s)) {
        waiting += (waiting.empty() ? "" : ", ") + name + " (" + std::string(to_string(s)) + ")";
      } else if (must_succeed && s != JobState::kSucceeded &&
                 out.state != DependencyState::kNever) {
        out.state = DependencyState::kNever;
        out.why = "dependency never satisfied: " + name + " ended " + std::string(to_string(s)) +
                  " (after_ok)";
      }
    }
  };
  check(row.spec.after_ok, true);
  check(row.spec.after_any, false);
  if (out.state == DependencyState::kNever) return out;
  if (!waiting.empty()) {
    out.state = DependencyState::kWaiting;
    out.why = "waits for " + waiting + " to end (after_ok / after_any)";
  }
  return out;
}

void Service::cancel_unmet_dependencies_locked(double t) {
  std::vector<const JobRow*> dirty;
  // Until nothing changes: a cancelled job can leave its own dependents unsatisfiable.
  for (;;) {
    std::vector<std::pair<Job*, std::string>> never;  // and why
    for (Job* j : pending_) {
      if (j->row.spec.after_ok.empty() || !j->waits_for.empty()) continue;
      DependencyState d = dependencies_locked(j->row);
      if (d.state == DependencyState::kNever) never.emplace_back(j, std::move(d.why));
    }
    if (never.empty()) break;
    for (auto& [j, why] : never) {
      j->row.message = std::move(why);
      j->row.state = JobState::kCancelled;
      j->row.finished_at = t;
      pending_.erase(j);
      dirty.push_back(&j->row);
    }
  }
  if (!dirty.empty()) save_rows_locked(dirty);
}

JobView Service::hold(const RequestContext& ctx, int64_t id) {
  std::lock_guard lock(mu_);
  Job& j = visible_job_locked(ctx.caller, id);
  const std::string what = "job " + std::to_string(id);
  if (j.row.state != JobState::kPending || !j.waits_for.empty() || !j.alloc.empty()) {
    throw ServiceError(
        ServiceError::kConflict, "",
        what + " is " +
            (j.row.state == JobState::kPending ? std::string("starting")
                                               : std::string(to_string(j.row.state))) +
            ": only a waiting job can be held (tessera requeue stops a running one)");
  }
  if (j.row.held) return view_locked(j);
  JobRow next = j.row;
  next.held = true;
  next.message = "held by " + ctx.caller.actor();
  const AuditEntry audit{0, now(), ctx.caller.actor(), ctx.method, ctx.path, 200, what};
  api_write([&] { store_->update_job(next, &audit); });
  j.row = std::move(next);
  dirty_ = true;
  return view_locked(j);
}

JobView Service::release(const RequestContext& ctx, int64_t id) {
  std::lock_guard lock(mu_);
  Job& j = visible_job_locked(ctx.caller, id);
  const std::string what = "job " + std::to_string(id);
  if (!j.row.held) {
    throw ServiceError(ServiceError::kConflict, "", what + " is not held");
  }
  JobRow next = j.row;
  next.held = false;
  next.message.clear();
  const AuditEntry audit{0, now(), ctx.caller.actor(), ctx.method, ctx.path, 200, what};
  api_write([&] { store_->update_job(next, &audit); });
  j.row = std::move(next);
  dirty_ = true;
  wake_.notify_one();
  return view_locked(j);
}

JobView Service::requeue(const RequestContext& ctx, int64_t id) {
  std::lock_guard lock(mu_);
  Job& j = visible_job_locked(ctx.caller, id);
  const std::string what = "job " + std::to_string(id);
  if (j.row.state != JobState::kRunning || j.members.empty()) {
    throw ServiceError(ServiceError::kConflict, "",
                       what + " is " + std::string(to_string(j.row.state)) +
                           ": only a running job can be requeued");
  }
  if (j.stopping) {
    throw ServiceError(ServiceError::kConflict, "", what + " is already stopping");
  }
  const double t = now();
  const AuditEntry audit{0, t, ctx.caller.actor(), ctx.method, ctx.path, 200, what};
  api_write([&] { store_->add_audit(audit); });
  j.requeued_by = ctx.caller.actor();
  ask_to_stop_locked(j, t);
  dirty_ = true;
  return view_locked(j);
}

JobView Service::update(const RequestContext& ctx, int64_t id, const JobUpdate& u) {
  std::lock_guard lock(mu_);
  Job& j = visible_job_locked(ctx.caller, id);
  const std::string what = "job " + std::to_string(id);
  if (is_terminal(j.row.state)) {
    throw ServiceError(ServiceError::kConflict, "",
                       what + " already " + std::string(to_string(j.row.state)));
  }
  JobRow next = j.row;
  if (u.priority_class) {
    if (j.row.state != JobState::kPending || !j.alloc.empty()) {
      throw ServiceError(ServiceError::kConflict, "priority_class",
                         what + " is " + std::string(to_string(j.row.state)) +
                             ": only a waiting job's class can change");
    }
    next.spec.priority_class = *u.priority_class;
  }
  if (u.time_limit_seconds) {
    const double was = j.row.spec.time_limit_seconds;
    if (!ctx.caller.admin && was >= 0 && *u.time_limit_seconds > was) {
      throw ServiceError(ServiceError::kForbidden, "time_limit",
                         "only the admin may raise a job's time limit");
    }
    next.spec.time_limit_seconds = *u.time_limit_seconds;
    apply_time_limit_locked(next.spec, j.spec.tenant);  // the queue's maximum holds
  }
  // The class must be one the queue allows: the spec is built again, refusing otherwise.
  JobSpec spec = to_spec_locked(next.spec, j.spec.tenant, what);
  spec.submit_time = j.spec.submit_time;
  spec.source = j.spec.source;
  const AuditEntry audit{0, now(), ctx.caller.actor(), ctx.method, ctx.path, 200, what};
  api_write([&] { store_->update_job(next, &audit); });
  j.row = std::move(next);
  if (u.priority_class) {
    j.next_spec = std::move(spec);
    spec_updates_.push_back(id);
  }
  dirty_ = true;
  wake_.notify_one();
  return view_locked(j);
}

std::string Service::create_tenant(const RequestContext& ctx, const std::string& name) {
  if (!ctx.caller.admin) {
    throw ServiceError(ServiceError::kForbidden, "", "only the admin creates tenants");
  }
  if (!is_valid_name(name)) {
    throw ServiceError(ServiceError::kInvalid, "name",
                       "tenant names are 1-63 characters of letters, digits, '-', '_', '.'");
  }
  refuse_reserved_tenant(name, "name");
  std::lock_guard lock(mu_);
  for (const auto& [h, t] : token_tenant_) {
    if (t == name) {
      throw ServiceError(ServiceError::kConflict, "name", "tenant " + name + " exists");
    }
  }
  if (!tenants_.find(name)) add_tenant_locked(name, "name");
  const std::string token = new_token();
  const double t = now();
  const TenantRow row{name, sha256_hex(token), t};
  const AuditEntry audit{0, t, ctx.caller.actor(), ctx.method, ctx.path, 201, "tenant " + name};
  bool added = false;
  api_write([&] { added = store_->add_tenant(row, &audit); });
  if (!added) {
    throw ServiceError(ServiceError::kConflict, "name", "tenant " + name + " exists");
  }
  token_tenant_[row.token_sha256] = name;
  return token;
}

std::string Service::rotate_token(const RequestContext& ctx, const std::string& name) {
  if (!ctx.caller.admin) {
    throw ServiceError(ServiceError::kForbidden, "", "only the admin rotates tokens");
  }
  std::lock_guard lock(mu_);
  const std::string token = new_token();
  const std::string hash = sha256_hex(token);
  const AuditEntry audit{0, now(), ctx.caller.actor(), ctx.method, ctx.path, 200, "tenant " + name};
  bool changed = false;
  api_write([&] { changed = store_->set_tenant_token(name, hash, &audit); });
  if (!changed) {
    throw ServiceError(ServiceError::kNotFound, "", "tenant " + name + " has no token");
  }
  std::erase_if(token_tenant_, [&](const auto& e) { return e.second == name; });
  token_tenant_[hash] = name;
  return token;
}

void Service::revoke_token(const RequestContext& ctx, const std::string& name) {
  if (!ctx.caller.admin) {
    throw ServiceError(ServiceError::kForbidden, "", "only the admin revokes tokens");
  }
  std::lock_guard lock(mu_);
  const AuditEntry audit{0, now(), ctx.caller.actor(), ctx.method, ctx.path, 200, "tenant " + name};
  bool removed = false;
  api_write([&] { removed = store_->remove_tenant_token(name, &audit); });
  if (!removed) {
    throw ServiceError(ServiceError::kNotFound, "", "tenant " + name + " has no token");
  }
  std::erase_if(token_tenant_, [&](const auto& e) { return e.second == name; });
}

void Service::audit_refusal(const RequestContext& ctx, int32_t status, const std::string& target) {
  const double t = now();
  // A refused request's path may be anything a client sent: kept, made valid UTF-8.
  AuditEntry e{0,
               t,
               ctx.caller.actor().empty() ? "anonymous" : ctx.caller.actor(),
               to_valid_utf8(ctx.method),
               to_valid_utf8(ctx.path),
               status,
               to_valid_utf8(target)};
  if (ctx.caller.actor().empty()) {
    // Anyone can send refused calls without a token, and each would be a row: a budget keeps
    // what they can write bounded; the rest are counted and the count is written with the
    // next row that fits the budget.
    std::lock_guard lock(mu_);
    if (!anonymous_audit_.take(t)) {
      ++counters_.audit_suppressed;
      ++anonymous_suppressed_;
      return;
    }
    if (anonymous_suppressed_ > 0) {
      e.target += (e.target.empty() ? "" : "; ") + std::string("and ") +
                  std::to_string(anonymous_suppressed_) +
                  " more refused anonymous calls, not recorded one by one";
      anonymous_suppressed_ = 0;
    }
  }
  api_write([&] { store_->add_audit(e); });
}

JobView Service::view_locked(const Job& j) const {
  JobView v;
  v.row = j.row;
  v.queue = leaf_path_locked(j.spec.tenant);
  v.priority_class = std::string(to_string(j.next_spec ? j.next_spec->priority : j.spec.priority));
  const DependencyState deps =
      j.row.state == JobState::kPending ? dependencies_locked(j.row) : DependencyState{};
  if (j.row.state == JobState::kPending && j.row.held) {
    v.reason_code = "Held";
    v.pending_reason =
        j.row.message + "; it starts only after `tessera release " + std::to_string(j.row.id) + "`";
  } else if (deps.state == DependencyState::kWaiting) {
    v.reason_code = "Dependency";
    v.pending_reason = deps.why;
  } else if (j.row.state == JobState::kPending && !j.unrunnable.empty()) {
    v.reason_code = "Unrunnable";
    v.pending_reason = "cannot run on this server as configured now (" + j.unrunnable +
                       "); it waits for a restart with what it needs, or a cancel";
  } else if (j.row.state == JobState::kPending && process_held_.count(j.row.id) != 0) {
    v.reason_code = "TenantLimit";
    v.pending_reason =
        "waits for tenant " + j.row.tenant + "'s running jobs: it would take the tenant past " +
        std::to_string(limits_for_locked(j.spec.tenant).max_running_members) +
        " processes (--max-processes-per-tenant, or its queue's tenant_limits.max_processes)";
  } else if (j.row.state == JobState::kPending && !j.waits_for.empty()) {
    v.reason_code = "Preempting";
    std::string ids;
    for (int64_t w : j.waits_for) ids += (ids.empty() ? "" : ", ") + std::to_string(w);
    v.pending_reason =
        "starting: placed, waiting for preempted job " + ids + " to exit (checkpoint grace)";
  } else if (auto it = reasons_.find(j.row.id);
             j.row.state == JobState::kPending && it != reasons_.end()) {
    const PendingReason& r = it->second;
    v.reason_code = reason_code(r.code);
    const std::string blocker = r.blocker == kNoId ? "" : std::to_string(r.blocker);
    const std::string queue =
        r.queue != kNoId && tree_ && r.queue < tree_->size() ? tree_->queue(r.queue).path : "";
    v.pending_reason = describe(r, blocker, queue);
  }
  v.placement = placement_locked(j.alloc);
  return v;
}

std::vector<MemberPlacement> Service::placement_locked(const Allocation& a) const {
  std::vector<MemberPlacement> out;
  const size_t gpm = static_cast<size_t>(a.gpus_per_member);
  for (int32_t m = 0; m < a.members(); ++m) {
    MemberPlacement p;
    p.rank = m;
    p.node = cluster_.node(a.member_node[static_cast<size_t>(m)]).name;
    for (size_t k = 0; k < gpm; ++k) {
      const GpuShare& s = a.shares[static_cast<size_t>(m) * gpm + k];
      p.gpus.push_back(gpu_index_[s.gpu]);
      p.gpu_milli = s.milli;
    }
    out.push_back(std::move(p));
  }
  return out;
}

JobView Service::job(const Caller& caller, int64_t id) const {
  std::lock_guard lock(mu_);
  return view_locked(visible_job_locked(caller, id));
}

std::vector<JobView> Service::jobs(const Caller& caller, const JobFilter& f) const {
  if (!caller.admin && !f.tenant.empty() && f.tenant != caller.tenant) {
    // An empty list would read as "that tenant has no jobs".
    throw ServiceError(
        ServiceError::kForbidden, "tenant",
        "token of tenant " + caller.tenant + " cannot list tenant " + f.tenant + "'s jobs");
  }
  std::lock_guard lock(mu_);
  std::vector<JobView> out;
  const auto wanted = [&](const Job& j) {
    const JobRow& r = j.row;
    if (!caller.admin && r.tenant != caller.tenant) return false;
    if (!f.tenant.empty() && r.tenant != f.tenant) return false;
    return f.wants(r.state);
  };
  if (f.newest_first) {
    auto it = f.before > 0 ? jobs_.lower_bound(f.before) : jobs_.end();
    while (it != jobs_.begin() && out.size() < f.limit) {
      --it;
      if (wanted(*it->second)) out.push_back(view_locked(*it->second));
    }
    return out;
  }
  for (auto it = jobs_.upper_bound(f.after); it != jobs_.end() && out.size() < f.limit; ++it) {
    if (wanted(*it->second)) out.push_back(view_locked(*it->second));
  }
  return out;
}

LogSlice Service::logs(const Caller& caller, int64_t id, int32_t rank, int64_t tail_bytes,
                       int64_t from_offset) const {
  uint32_t attempt = 0;
  {
    std::lock_guard lock(mu_);
    const Job& j = visible_job_locked(caller, id);
    if (j.row.attempts == 0) {
      throw ServiceError(ServiceError::kNotFound, "",
                         "job " + std::to_string(id) + " has not started, so it has no logs");
    }
    const int32_t world = j.row.spec.max_members;
    if (rank < 0 || rank >= world) {
      throw ServiceError(ServiceError::kInvalid, "rank",
                         "rank must be in 0.." + std::to_string(world - 1));
    }
    attempt = static_cast<uint32_t>(j.row.attempts);
  }
  LogSlice out;
  try {
    out.file = backend_->open_log(static_cast<uint64_t>(id), attempt, rank);
  } catch (const LogFileError& e) {
    throw ServiceError(ServiceError::kForbidden, "", "job " + std::to_string(id) + ": " + e.what());
  }
  const int64_t size = out.file.size();
  out.attempt = attempt;
  if (from_offset >= 0) {
    out.offset = std::min(from_offset, size);
    out.length = size - out.offset;
    if (tail_bytes > 0) out.length = std::min(out.length, tail_bytes);
    return out;
  }
  out.offset = tail_bytes > 0 && size > tail_bytes ? size - tail_bytes : 0;
  out.length = size - out.offset;
  return out;
}

std::vector<QueueView> Service::queues(const Caller& caller) const {
  std::lock_guard lock(mu_);
  const std::vector<PendingJob> pending = pending_snapshot_locked();
  std::vector<RunningJob> running;
  std::vector<std::pair<int64_t, int64_t>> counts(tenants_.size());  // pending, running
  for (TenantId t = 0; t < counts.size(); ++t) counts[t].first = pending_.count(t);
  for (const auto& [id, jp] : active_) {
    if (jp->alloc.empty()) continue;
    RunningJob r;
    r.id = static_cast<JobId>(id);
    r.spec = &jp->spec;
    r.alloc = &jp->alloc;
    running.push_back(r);
    ++counts[jp->spec.tenant].second;
  }
  Snapshot snap;
  snap.now = now();
  snap.state = &state_;
  snap.pending = pending;
  snap.running = running;
  snap.queues = tree_.get();
  snap.decayed_usage = decayed_.view();
  std::vector<QueueView> out = queue_views(snap, decayed_, counts);
  if (!caller.admin) {
    // A tenant sees its own queue only: the others' names and loads are theirs.
    const std::optional<TenantId> t = tenants_.find(caller.tenant);
    const std::string mine = t ? leaf_path_locked(*t) : "";
    std::erase_if(out, [&](const QueueView& v) { return v.path != mine; });
  }
  return out;
}

std::vector<NodeView> Service::nodes() const {
  std::lock_guard lock(mu_);
  std::vector<NodeView> out = node_views(state_, [&](GpuId g) { return gpu_index_[g]; });
  std::vector<std::pair<int64_t, const Allocation*>> held;
  for (const auto& [id, jp] : active_) {
    if (!jp->alloc.empty()) held.emplace_back(id, &jp->alloc);
  }
  mark_gpu_holders(out, cluster_, held);
  for (NodeView& v : out) {
    if (!drained_.contains(v.name)) continue;
    const bool busy =
        std::any_of(v.gpus.begin(), v.gpus.end(), [](const GpuView& g) { return !g.jobs.empty(); });
    v.state = busy ? "draining" : "drained";
  }
  return out;
}

std::vector<TenantView> Service::tenants() const {
  std::lock_guard lock(mu_);
  std::vector<TenantView> out(tenants_.size());
  for (TenantId t = 0; t < out.size(); ++t) {
    out[t].name = tenants_.name(t);
    out[t].queue = leaf_path_locked(t);
    out[t].pending_jobs = static_cast<int64_t>(pending_.count(t));
  }
  for (const auto& [id, jp] : active_) {
    if (!jp->alloc.empty()) ++out[jp->spec.tenant].running_jobs;
  }
  for (const TenantRow& row : store_->tenants()) {
    if (const std::optional<TenantId> t = tenants_.find(row.name)) {
      out[*t].has_token = true;
      out[*t].created_at = row.created_at;
    }
  }
  std::sort(out.begin(), out.end(),
            [](const TenantView& a, const TenantView& b) { return a.name < b.name; });
  return out;
}

std::vector<AuditEntry> Service::audit_log(size_t limit, const AuditFilter& f) const {
  return store_->audit_log(limit, f);
}

std::vector<UsageRow> Service::usage(const Caller& caller, double since, double until) const {
  if (!(since < until)) {
    throw ServiceError(ServiceError::kInvalid, "until", "must be later than since");
  }
  std::vector<RunRecord> runs;
  try {
    runs = store_->runs(since, until);
  } catch (const StoreError& e) {
    throw ServiceError(ServiceError::kUnavailable, "", std::string("reading usage: ") + e.what());
  }
  std::vector<JobRecord> jobs;
  {
    std::lock_guard lock(mu_);
    const double t = now();
    for (const RunRecord& r : unsaved_runs_) {
      if (r.ended >= since && r.started < until) runs.push_back(r);
    }
    for (const auto& [id, jp] : active_) {
      const Job& j = *jp;
      if (j.run.job == 0 || j.run.started >= until) continue;
      RunRecord live = j.run;
      live.ended = t;
      runs.push_back(std::move(live));
    }
    jobs.reserve(jobs_.size());
    for (const auto& [id, jp] : jobs_) {
      const Job& j = *jp;
      jobs.push_back(JobRecord{id, j.row.tenant, leaf_path_locked(j.spec.tenant),
                               std::string(to_string(j.row.state)), j.row.submitted_at,
                               j.row.finished_at});
    }
  }
  std::vector<UsageRow> rows = usage_report(runs, jobs, since, until);
  if (!caller.admin)
    std::erase_if(rows, [&](const UsageRow& r) { return r.tenant != caller.tenant; });
  return rows;
}

ServiceMetrics Service::metrics() const {
  std::lock_guard lock(mu_);
  ServiceMetrics m = counters_;
  m.store_write_failures = static_cast<uint64_t>(health_.failures_total());
  m.store_writable = health_.ok();
  std::vector<ServiceMetrics::Tenant> by(tenants_.size());
  for (TenantId t = 0; t < tenants_.size(); ++t) by[t].name = tenants_.name(t);
  for (TenantId t = 0; t < by.size(); ++t) by[t].pending = pending_.count(t);
  for (const auto& [id, jp] : active_) {
    if (jp->row.state == JobState::kRunning) {
      ++by[jp->spec.tenant].running;
      ++m.running_jobs;
    }
    by[jp->spec.tenant].gpus_allocated += static_cast<double>(jp->alloc.gpu_milli()) / 1000.0;
  }
  m.pending_jobs = static_cast<int64_t>(pending_.size());
  m.gpus_total = cluster_.num_gpus();
  m.gpus_allocated = static_cast<double>(state_.allocated_milli()) / 1000.0;
  m.tenants = std::move(by);
  return m;
}

}  // namespace tessera
