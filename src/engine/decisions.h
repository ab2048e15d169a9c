// What one scheduling cycle decided.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/allocation.h"
#include "model/ids.h"

namespace tessera {

// Why a job is still pending. The "never" case (a job no cluster state could host) is caught
// at admission (engine/admission.h), so every reason here is "not now".
enum class PendingCode : uint8_t {
  kInsufficientGpus,       // fewer free GPUs of an allowed type than the gang needs
  kGangCannotFit,          // enough free GPUs in total, but no node set hosts every member (for
                           // a job restricted to some nodes: not enough free on those, or no
                           // set of them hosts every member; see eligible_free_gpu_milli)
  kWaitingForReservation,  // would fit, but would delay the reserved head-of-line job
  kBlockedByHead,          // strict order: behind a job that cannot start
  kQuotaExceeded,          // starting it would take its queue (or a parent) past its limit
  kOverFairShare,          // no room, and its queue already holds its fair share, so it may not
                           // reclaim from other queues
  kReservedForInference,   // would take GPUs held back for the inference arrivals forecast
  kPowerCapped,            // placed, but its estimated draw would take the cluster (or its
                           // rack) past the power cap, even at the lowest limits allowed
  kCarbonDeferred,         // best-effort, waiting (within its queue's carbon_defer) for an
                           // hour with cleaner electricity
  kDataLocality,           // waiting (within Snapshot::locality_wait_seconds) for room on the
                           // nodes that hold its dataset
  kSiteUnreachable,        // a latency-bound service waiting at its region's edge site: the main
                           // site is cut off (its link down) or too slow for its SLO
                           // (engine/site_routing.h)
  kReservedGpus,           // short of GPUs, and enough of those it lacks are reserved for another
                           // tenant or user (Snapshot::reservations) over a window it would
                           // run into
};
inline constexpr size_t kNumPendingCodes = 12;

struct PendingReason {
  JobId job = 0;
  PendingCode code = PendingCode::kInsufficientGpus;
  int64_t need_gpu_milli = 0;  // what the gang needs (at its minimum size)
  int64_t free_gpu_milli = 0;  // free on the GPU types it may use, when decided
  JobId blocker = kNoId;       // the reserved / head-of-line job, where relevant
  // For kQuotaExceeded and kOverFairShare: the queue whose rule holds it (a QueueId), what
  // that queue holds and its limit (quota) or entitlement (fair share), in milli-GPU.
  uint32_t queue = kNoId;
  int64_t queue_holds_milli = 0;
  int64_t queue_bound_milli = 0;
  // For kOverFairShare: > 0 when the job is held by preemption.borrow_max_runtime (it would
  // borrow past its queue's share and is not expected to end within this many seconds), not
  // for lack of GPUs.
  double borrow_max_runtime = 0;
  // For kPowerCapped: the estimated draw (W) the cap would have to allow, and the cap, of the
  // cluster or of the rack `rack` (kNoId: the cluster's).
  double power_need_w = 0;
  double power_cap_w = 0;
  uint32_t rack = kNoId;
  uint32_t node = kNoId;  // a node's thermal headroom (power_cap_w: its headroom above idle)
  bool shifted = false;   // lowering power limits was tried and was not enough
  // For kCarbonDeferred: the intensity (g/kWh) of starting now and at the cleaner time found,
  // that time, and the last time it may wait until.
  double carbon_now = 0, carbon_then = 0, carbon_at = 0, carbon_until = 0;
  // For a job restricted to a node set (JobSpec::eligible_nodes) that found no room: how much of
  // free_gpu_milli is on nodes it may use; -1 for an unrestricted job or another reason.
  int64_t eligible_free_gpu_milli = -1;
  // For kReservedGpus: the reservation (index into Snapshot::reservations) holding GPUs it could
  // use, and how much of its GPU types the reservations closed to it reserve (milli-GPU).
  uint32_t reservation = kNoId;
  int64_t reserved_gpu_milli = 0;
  // Victims were found but reclaim was not worth it (FairnessSettings::reclaim_cost_ratio):
  // what stopping them would waste, and what its queue goes without while it waits (GPU-s).
  double reclaim_price_gpu_seconds = 0;
  double reclaim_deficit_gpu_seconds = 0;
};

std::string describe(const PendingReason& r, const std::string& blocker_name = "",
                     const std::string& queue_path = "");
const char* to_string(PendingCode c);
// A short code for job tables, as Slurm's squeue REASON: Resources, GangFit, Reservation,
// HeadOfLine, Quota, FairShare, InferenceReserve, PowerCap, ReservedGpus.
const char* reason_code(PendingCode c);

struct Start {
  JobId job = 0;
  uint32_t pending_index = 0;  // index into Snapshot::pending
  Allocation alloc;
  bool backfilled = false;  // started ahead of a reservation
  // Started by reclaim as a starving gang (larger than its queue's share): the caller should
  // spare it from reclaim for the queue tree's min_runtime (RunningJob::reclaim_protected_until).
  bool starving = false;
  // The GPU power limit (W) it should run at (the energy knob, or lowered under a power cap);
  // 0: its GPUs' default (TDP). Only set when the snapshot has a power view.
  double power_limit_w = 0;
};

// A running job's GPU power limit changes (lowered to make room under a power cap, or raised
// back when power frees). Apply after starts.
struct PowerLimit {
  JobId job = 0;
  double limit_w = 0;
};

// Why a running job gives way: a higher rank (within its queue; inference-critical jobs across
// queues; best-effort jobs to anyone), a queue under its fair share or guarantee taking back
// what another borrowed, a per-GPU-type guarantee taken back, or (round-based scheduling in
// the simulator) a round's plan suspending the job or moving it to another GPU type.
enum class PreemptionCause : uint8_t { kPriority, kReclaim, kTypeReclaim, kRound };
inline constexpr int kPreemptionCauses = 4;
const char* to_string(PreemptionCause c);  // "priority", "reclaim", "type_reclaim", "round"

struct Preemption {
  JobId job = 0;  // the victim
  JobId for_job = 0;
  PreemptionCause cause = PreemptionCause::kPriority;
  // For a reclaim: what stopping this victim wastes (its GPUs x RunningJob::preemption_seconds
  // plus work lost since its checkpoint), and the GPU time the preempting job's queue would
  // have gone without waiting for running jobs to end (what it lacks of its share x the
  // expected wait; < 0: unknown, no expected ends), both in GPU-seconds.
  double price_gpu_seconds = 0;
  double deficit_gpu_seconds = 0;
};
// For a reclaim victim with a price: what it cost and against what ("" otherwise), for its event.
std::string describe_price(const Preemption& p);

// A running elastic gang (min_members < max_members) changes size: shrunk towards its minimum
// to make room for a pending job instead of being preempted whole, or grown into capacity no
// pending job can use. `alloc` is its whole new allocation: a shrink keeps a prefix of its
// members, a grow appends members. Apply shrinks after preemptions and before starts, grows
// after starts.
struct Resize {
  JobId job = 0;
  Allocation alloc;
  bool grow = false;
  JobId for_job = kNoId;  // a shrink: the pending job it makes room for
};

struct Decisions {
  std::vector<Preemption> preemptions;  // apply these first
  std::vector<Resize> resizes;          // shrinks, then (after starts) grows
  std::vector<Start> starts;
  std::vector<PendingReason> pending;  // one per job left pending
  std::vector<PowerLimit> power_limits;
};

}  // namespace tessera
