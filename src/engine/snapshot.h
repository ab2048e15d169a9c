// The state one scheduling cycle sees: a const view, built by the caller (simulator, local
// backend, Kubernetes backend) as of the cycle's start. The engine never keeps it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>

#include "model/allocation.h"
#include "model/cluster_state.h"
#include "model/gpu_reservation.h"
#include "model/job.h"
#include "model/queue_tree.h"

namespace tessera {

struct PendingJob {
  JobId id = 0;
  const JobSpec* spec = nullptr;    // not owned
  double attained_gpu_seconds = 0;  // service received so far (before preemptions)
  double queued_since = 0;          // submit time, or the time it was last requeued (starvation);
                                    // queue orders rank arrival by spec->submit_time
  // Whether the caller wants this job's PendingReason. The simulator keeps only a job's first
  // reason (and every reason of the jobs it explains); with a PendingQueue, a cycle passes over
  // jobs that want none once nothing more can start.
  bool wants_reason = true;
};

class PendingQueue;
class RunningSet;
struct PowerView;       // engine/power_budget.h
class CarbonIntensity;  // model/carbon_intensity.h

struct RunningJob {
  JobId id = 0;
  const JobSpec* spec = nullptr;      // not owned
  const Allocation* alloc = nullptr;  // not owned
  double start_time = 0;
  // Service received, this run included up to now; or, where attaining_gpus > 0, up to
  // start_time only (a caller that keeps its running jobs between cycles, RunningSet, leaves
  // the accrual to attained_at instead of updating every job every cycle).
  double attained_gpu_seconds = 0;
  double attaining_gpus = 0;           // GPUs accruing service since start_time (see above)
  double expected_end = kUnknown;      // from the duration estimate; kUnknown if none
  double last_checkpoint = 0;          // time of the last checkpoint (start if none yet)
  double reclaim_protected_until = 0;  // not reclaimed before this time (a starving gang's turn)
  // Seconds its GPUs would produce nothing if it were preempted now, beyond the work lost since
  // its last checkpoint: the checkpoint grace and its restart (re-initialising, reading the
  // checkpoint back). The caller's estimate; 0: nothing known. Prices a reclaim
  // (FairnessSettings::reclaim_cost_ratio).
  double preemption_seconds = 0;
  double power_limit_w = 0;  // its GPUs' power limit now; 0: their default (TDP)

  double attained_at(double now) const {
    return attained_gpu_seconds + attaining_gpus * std::max(0.0, now - start_time);
  }
};

struct Snapshot {
  double now = 0;
  uint64_t cycle = 0;                   // cycle number, mixed into the random seed
  const ClusterState* state = nullptr;  // not owned
  // The caller's own ledger, equal to *state (usually the same object), for the cycle to try
  // placements on: it journals its changes and undoes them before it returns (also when it
  // throws), so the caller gets it back exactly as it was. Saves copying the ledger every cycle
  // (1.4 MB at 200,000 GPUs). Null: the cycle works on a copy of *state. Not for a ledger that
  // others read while the cycle runs.
  ClusterState* scratch = nullptr;  // not owned
  std::span<const PendingJob> pending;
  // The caller's persistent pending queue, when it keeps one (the simulator): `pending` is then
  // its jobs(), and the cycle walks it lazily in the policy's order and reads its aggregates
  // instead of passing over every pending job (engine/pending_queue.h). Null: `pending` only.
  const PendingQueue* pending_queue = nullptr;  // not owned
  std::span<const RunningJob> running;
  // The caller's running set, when it keeps one: `running` is then its jobs(), and the queue
  // shares read its per-tenant sums instead of summing every running job (engine/running_set.h).
  const RunningSet* running_set = nullptr;  // not owned
  // The queue tree, bound to the jobs' tenants (QueueTree::bind); null means one queue per
  // tenant, equal weights, no quotas.
  const QueueTree* queues = nullptr;  // not owned
  // Long-term usage per queue (by QueueId, leaves; decayed by the caller with the tree's
  // half-life), in the same units as Amounts; empty when long-term fairness is off.
  std::span<const Amounts> decayed_usage;
  // GPUs (milli) held back for inference-critical arrivals (the caller's forecast): jobs of
  // other classes may not start if they would leave fewer free. 0: none.
  int64_t inference_reserve_milli = 0;
  // Power (engine/power_budget.h): caps on the estimated draw and the model that estimates it.
  // Null: power is not considered (no caps, no power limits chosen).
  const PowerView* power = nullptr;  // not owned
  // Carbon intensity on the snapshot's clock (now), for carbon-aware deferral of best-effort
  // jobs in queues that set carbon_defer. Null: no deferral.
  const CarbonIntensity* carbon = nullptr;  // not owned
  // Data locality (docs/data.md): the nodes that hold each waiting job's dataset, by JobId
  // (a job not listed has no preference). Such a job is placed on those nodes when it fits
  // there; until it has waited locality_wait_seconds it waits for them (delay scheduling,
  // reason DataLocality) rather than start elsewhere and stage its data. Null: none.
  const std::unordered_map<JobId, std::shared_ptr<const NodeSet>>* preferred_nodes = nullptr;
  double locality_wait_seconds = 0;
  // GPUs reserved for a tenant or user over a window (model/gpu_reservation.h), those whose
  // window is not over; at most ReservedGpus::kMax (64) are honoured. Empty: none.
  std::span<const GpuReservation> reservations;
};

}  // namespace tessera
