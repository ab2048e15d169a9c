// The process supervisor: jobs launched as processes (as their tenant's uid, in their own
// network where isolated), their processes polled, stopped (SIGTERM, the grace, SIGKILL) and
// their GPUs released as they end; drained nodes; each run's start and end recorded.
#include "control/serve/service.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>

#include "backend/local_backend.h"
#include "control/serve/job.h"
#include "control/token.h"
#include "model/input_error.h"
#include "model/utf8.h"

namespace tessera {
namespace {

// Why a member that is no longer running failed its gang, or nullopt if it exited 0.
std::optional<std::string> member_failure(const MemberStatus& m) {
  if (m.phase == MemberPhase::kLost) return "rank " + std::to_string(m.rank) + " was killed";
  if (m.phase == MemberPhase::kExited && m.exit_code != 0) {
    return "rank " + std::to_string(m.rank) + " exited with code " + std::to_string(m.exit_code);
  }
  return std::nullopt;
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

}  // namespace

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
      // Cancelled before it launched: its GPUs go back once the jobs it preempted have let go
      // of them (they may still run out their grace on them).
      if (is_terminal(j.row.state) && victims_gone_locked(j)) {
        j.waits_for.clear();
        release_locked(j);
      }
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
        // Requeued or resized, it runs again: that run did not finish the job.
        const bool again = requeued || resized;
        if (again) {
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
        if (!again) {
          j.row.finished_at = ended;
          ++counters_.completions;
        }
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

double Service::stop_grace_locked(const JobRequest& spec) const {
  // The job's own grace, else the queue tree's, else the server's.
  double grace = opt_.checkpoint_grace_seconds;
  if (tree_ && tree_->settings().checkpoint_grace_seconds >= 0) {
    grace = tree_->settings().checkpoint_grace_seconds;
  }
  if (spec.checkpoint_grace_seconds >= 0) grace = spec.checkpoint_grace_seconds;
  // Also for jobs stored before the limit was lowered.
  return std::min(grace, opt_.max_checkpoint_grace_seconds);
}

void Service::ask_to_stop_locked(Job& j, double t) {
  j.stopping = true;
  j.kill_at = t + stop_grace_locked(j.row.spec);
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
  j.row.finished_at = -1;  // a row an older server requeued may still carry its run's end
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
  r.user = j.row.user;
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

bool Service::victims_gone_locked(const Job& j) const {
  return std::all_of(j.waits_for.begin(), j.waits_for.end(), [&](int64_t v) {
    auto it = jobs_.find(v);
    return it == jobs_.end() || it->second->members.empty();
  });
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
    if (!victims_gone_locked(j)) continue;
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

}  // namespace tessera
