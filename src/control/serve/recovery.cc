// After a restart: the jobs reloaded from the database, and the running ones reconciled with
// their processes: still running (adopted), finished while the server was down (their exit
// files say how), or gone (requeued).
#include "control/serve/service.h"

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <iostream>
#include <set>

#include "control/serve/job.h"
#include "engine/admission.h"
#include "model/input_error.h"

namespace tessera {
namespace {

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

}  // namespace

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
    j->spec.user = user_id_locked(row.tenant, row.user);
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

}  // namespace tessera
