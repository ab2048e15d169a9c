// A job as the service holds it in memory (its stored row and what only a live server knows:
// its ledger allocation, processes, stop and accounting state), shared by the files that
// implement Service (control/serve/): the scheduler thread (scheduling, supervisor), the API's
// calls that change jobs (requests) and what the API reads (views).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/job_network.h"
#include "control/serve/row_events.h"
#include "control/serve/service.h"
#include "engine/goodput_model.h"
#include "model/accounting.h"
#include "model/job.h"

namespace tessera {

// A run's allocation and its member processes as the job's row stores them ("" for none).
std::string encode_allocation(const Allocation& a);
Allocation decode_allocation(const std::string& text);
std::string encode_members(const std::vector<MemberHandle>& ms);
std::vector<MemberHandle> decode_members(const std::string& text);

// GPU-seconds of the run that `row` has going on `alloc` up to `t` (0 when none is).
double run_gpu_seconds(const JobRow& row, const Allocation& alloc, double t);

struct Service::Job {
  // Sends `sig` to the processes of its current attempt.
  void signal(Backend& backend, int sig) const {
    backend.signal(static_cast<uint64_t>(row.id), static_cast<uint32_t>(row.attempts), members,
                   sig);
  }

  JobRow row;
  JobSpec spec;
  Allocation alloc;                   // what it holds in the ledger; empty = nothing
  std::vector<MemberHandle> members;  // processes of the current attempt; empty = none alive
  std::vector<int64_t> waits_for;     // preempted victims whose processes must end first
  std::optional<JobNetwork> network;  // its run's own network namespace, when isolated
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
  // Energy of the current run before its power limit last changed (J), and since when it draws
  // run.gpu_watts (its start, or the last change); why its limit last changed (its event).
  double run_joules = 0;
  double power_since = 0;
  std::string power_why;
  int64_t preempted_by = -1;
  std::string preempted_by_tenant;
  // History: the row as of its last write (the next write's events are the difference), and
  // the last reason code recorded for a waiting job with how many reason changes were.
  RecordedState recorded;
  std::string reason_recorded;
  int32_t reason_events = 0;
  // Goodput rounds (adaptive jobs under --policy goodput; serve/goodput.cc): what it has
  // reported (built at its first report or round), the members the last round gave it (-1: no
  // round has planned it since it last waited), its spec with that gang size (what the cycle
  // sees of it while it waits), why it is being stopped to run at another size, and how long
  // its earlier runs ran.
  std::optional<GoodputModel> goodput;
  int32_t round_members = -1;
  JobSpec round_spec;
  std::string resizing;
  double ran_seconds = 0;
  // Datasets (serve/datasets.cc; serve --dataset-dir): placed and waiting for its dataset to
  // be staged; holding it in the cache (never evicted while held); whether this placement asked
  // for the staging (a failure it sees then fails it; an older one is retried); and why it
  // waits for room in the cache ("" = it does not).
  bool staging = false;
  bool data_held = false;
  bool stage_requested = false;
  std::string staging_why;
  // The last pass of Service::sync_queue_locked that found it may start (in the queue), and
  // what it was queued with (null spec: not queued).
  uint64_t queue_pass = 0;
  const JobSpec* queued_spec = nullptr;
  double queued_attained = 0, queued_at = 0;
  // What holds it out of the cycle, or kEligible, as of that pass (Service::Standing).
  Standing standing = Standing::kNotSeen;
};

}  // namespace tessera
