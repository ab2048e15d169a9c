// A job: a gang of identical members, all placed or none.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "model/cluster.h"
#include "model/dataset.h"
#include "model/gpu_type.h"
#include "model/ids.h"
#include "model/inference_service.h"
#include "model/interner.h"
#include "model/node_set.h"
#include "model/resources.h"

namespace tessera {

// Priority classes, highest first in importance. The numeric value orders preemption: a job
// may preempt only jobs of a strictly lower class (queues may add per-class rules).
enum class PriorityClass : uint8_t {
  kBestEffort = 0,
  kResearch = 1,
  kProduction = 2,
  kInferenceCritical = 3,
};
std::string_view to_string(PriorityClass p);
bool parse_priority_class(std::string_view s, PriorityClass& out);

inline constexpr double kUnknown = -1.0;

struct JobSpec {
  std::string name;
  TenantId tenant = 0;
  // Who submitted it inside its tenant (the front end's user id), or kNoId: what a reservation
  // for one user (model/gpu_reservation.h) is matched against.
  uint32_t user = kNoId;
  PriorityClass priority = PriorityClass::kResearch;
  bool priority_given = false;  // the trace named the class (else its queue's default applies)
  // Latency SLA: the most the job may wait from submission to its first start, or kUnknown.
  double sla_max_queueing = -1;
  double submit_time = 0;  // seconds since the start of the trace

  int32_t min_members = 1;  // elastic gangs run with min..max members
  int32_t max_members = 1;
  MemberDemand demand;
  GpuTypeMask allowed_types = kAnyGpuType;
  // Hard placement constraint: all members inside one subtree of this level (kNvlDomain: one
  // NVLink domain, kNode: one node, kRack, kSpine); kCluster: none. Every scorer honours it.
  Level max_span = Level::kCluster;
  // Hard placement constraint: the nodes its members may run on (a Kubernetes pod's
  // nodeSelector, required node affinity and tolerated taints); null: every node (the default;
  // the simulator and `serve` never set it). Shared, since thousands of pods share the same
  // constraints; caches keyed by job shape compare it by identity or content (same_restriction).
  // Every scorer honours it together with allowed_types and max_span (a member goes to a node
  // of an allowed type, in the set, inside the span's subtree), and so do admission
  // (infeasible_reason), preemption (victims only on these nodes) and backfill reservations.
  std::shared_ptr<const NodeSet> eligible_nodes;

  // Work to do, in seconds of running on the job's reference placement (consolidated, on the
  // reference GPU type): the simulator's execution model scales it by the placement's speed.
  double work_seconds = 0;
  // What the scheduler is told about the duration (user estimate or trace), or kUnknown.
  double duration_estimate = kUnknown;
  // The most it may run before it is stopped (a hard limit, unlike the estimate), or kUnknown:
  // what lets it run on reserved GPUs before their window begins.
  double time_limit = kUnknown;

  // Throughput on one GPU of each type relative to V100, by GpuTypeId (filled by the
  // simulator's execution model from measurements; empty: unknown). What heterogeneity-aware
  // placement (Policy::heterogeneity) ranks GPU types by for this job.
  std::vector<float> type_speed;

  uint32_t model = kNoId;  // interned model/application class (Workload::models), or kNoId
  int32_t batch_size = 0;  // global batch size where the trace gives one
  // What the communication model needs of a job whose model it does not know (both 0 when
  // not given): its parameters (fp32 gradients all-reduced every step) and its step time on
  // the reference placement.
  double model_params = 0;
  double step_seconds = 0;

  // Checkpointing: 0 means the job checkpoints when preempted (nothing lost); otherwise work
  // since the last periodic checkpoint is lost on preemption or failure.
  double checkpoint_interval = 0;
  double restart_cost = 0;  // seconds of no progress after every (re)start

  // The dataset it trains on (Workload::datasets), or kNoId: with a cluster's storage tiers
  // (docs/data.md) it is staged to the job's nodes before it runs.
  uint32_t dataset = kNoId;

  // Edge sites (docs/edge.md; `tessera edge`): a latency-bound inference job's service
  // (Workload::services), or kNoId; and the site it must run at ("" = the policy's choice:
  // a service's region or the main site, every other job the main site).
  uint32_t service = kNoId;
  std::string site;

  std::string source;  // "file:line" the job came from, for error messages

  int64_t gpu_milli_per_gang(int32_t members) const { return demand.total_gpu_milli() * members; }
};

struct Workload {
  std::vector<JobSpec> jobs;  // sorted by submit_time (stable) once loaded
  Interner tenants;
  Interner models;
  std::vector<Dataset> datasets;           // what JobSpec::dataset indexes
  std::vector<InferenceService> services;  // what JobSpec::service indexes
  // The dataset named `d` (appended unless one of that name is there); its index.
  uint32_t add_dataset(const Dataset& d) {
    for (size_t i = 0; i < datasets.size(); ++i) {
      if (datasets[i].name == d.name) return static_cast<uint32_t>(i);
    }
    datasets.push_back(d);
    return static_cast<uint32_t>(datasets.size() - 1);
  }
};

// Sorts jobs by submit time, keeping file order among equal times.
void sort_by_submit(Workload& w);

}  // namespace tessera
