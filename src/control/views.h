// What the read API shows of queues and nodes, built the same way by `tessera serve`'s Service
// and the Kubernetes scheduler.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "engine/decayed_usage.h"
#include "engine/snapshot.h"

namespace tessera {

struct QueueView {
  std::string path;
  double weight = 1;
  double guarantee_gpus = 0;
  double limit_gpus = -1;  // -1 = none
  double holds_gpus = 0;
  double fair_share_gpus = 0;
  double decayed_gpus = 0;  // long-term usage (0 unless the tree sets fairness.half_life)
  int64_t pending_jobs = 0;
  int64_t running_jobs = 0;
};

// GPUs set aside for a tenant or user over a window (model/gpu_reservation.h), as listed.
struct ReservationView {
  std::string name;
  std::string tenant, user;  // "" where the caller may not know them (another tenant's), user
                             // "" also for a reservation for the whole tenant
  double start = 0, end = 0;
  std::string state;               // upcoming | active | ended
  std::vector<std::string> gpus;   // "NODE/INDEX", as tessera nodes shows them
  int32_t missing_gpus = 0;        // reserved GPUs no longer in the cluster (a restart)
  std::vector<int64_t> busy_jobs;  // jobs not its own that hold its GPUs now
  std::string created_by;
  double created_at = 0;
};

// A tenant as the admin sees it: those created with a token and those that exist only because
// the admin submitted for them (the list once left those out).
struct TenantView {
  std::string name;
  bool has_token = false;
  double created_at = -1;  // when its token was made; -1 for a tenant without one
  std::string queue;       // its leaf queue's path
  int64_t pending_jobs = 0;
  int64_t running_jobs = 0;
};

// A job's share of one GPU.
struct GpuHolder {
  int64_t job = 0;
  std::string tenant;  // "" where the caller may not know it
  std::string name;    // the job's name; "" as the tenant
  int32_t milli = 0;
};
struct GpuView {
  int32_t index = 0;
  int32_t free_milli = 0;
  // The reservation in force that holds it (in its window now, else the next to begin), and
  // whether its window has begun; "" when none.
  std::string reservation;
  bool reservation_active = false;
  std::vector<int64_t> jobs;       // the jobs holding a share of it, by id
  std::vector<GpuHolder> holders;  // the same jobs with their tenant and share, by id
};
struct NodeView {
  std::string name;
  std::string rack;          // its rack's name (the dashboard groups nodes by it)
  std::string state = "up";  // up | draining (drained, jobs still on it) | drained
  std::string gpu_type;
  std::vector<GpuView> gpus;
  int64_t cpu_milli = 0, free_cpu_milli = 0, mem_mib = 0, free_mem_mib = 0;
};

// Every queue of snap.queues: weight, guarantee, limit, what it holds and its fair share as of
// `snap`, its long-term usage, and the pending and running jobs of the tenants below it
// (`jobs_of_tenant[t]` = {pending, running} of tenant t; missing tenants count 0).
std::vector<QueueView> queue_views(const Snapshot& snap, const DecayedUsage& decayed,
                                   const std::vector<std::pair<int64_t, int64_t>>& jobs_of_tenant);
// Every node of the ledger's cluster with each GPU's free share; `index` gives a GPU's index on
// its host.
std::vector<NodeView> node_views(const ClusterState& st,
                                 const std::function<int32_t(GpuId)>& index);
// A job's allocation, for mark_gpu_holders.
struct HeldAllocation {
  int64_t job = 0;
  std::string tenant, name;
  const Allocation* alloc = nullptr;
};
// Marks on each GPU of `nodes` (as node_views made them) the jobs whose allocation holds it,
// with their tenant and share.
void mark_gpu_holders(std::vector<NodeView>& nodes, const Cluster& c,
                      const std::vector<HeldAllocation>& allocations);
// Puts each GPU's jobs and holders of `nodes` in job-id order (after add_gpu_holder calls).
void sort_gpu_holders(std::vector<NodeView>& nodes);
// Adds `milli` of the GPU `v` held by `job` (of `tenant`, named `name`): jobs and holders, once
// per job.
void add_gpu_holder(GpuView& v, int64_t job, const std::string& tenant, const std::string& name,
                    int32_t milli);

// Counters and gauges for /metrics (and the dashboard's history).
struct ServiceMetrics {
  struct Tenant {
    std::string name;
    int64_t pending = 0;
    int64_t running = 0;
    double gpus_allocated = 0;
  };
  std::vector<Tenant> tenants;
  int64_t running_jobs = 0;
  int64_t pending_jobs = 0;
  double gpus_total = 0;
  double gpus_allocated = 0;
  std::vector<double> cycle_bucket_bounds;    // seconds (Prometheus "le")
  std::vector<uint64_t> cycle_bucket_counts;  // cumulative, one per bound
  uint64_t cycles = 0;
  double cycle_seconds_sum = 0;
  uint64_t starts = 0, preemptions = 0, completions = 0;
  // --policy goodput: rounds run, and running jobs they stopped to run at another size (or none).
  uint64_t goodput_rounds = 0, resizes = 0;
  // serve --dataset-dir: stagings that ended (ok or failed), datasets evicted, the cache's use
  // and capacity (GB; 0: no bound). `datasets` false: none of it is shown.
  bool datasets = false;
  uint64_t stagings_ok = 0, stagings_failed = 0, dataset_evictions = 0;
  double dataset_cache_used_gb = 0, dataset_cache_capacity_gb = 0;
  uint64_t jobs_in_memory = 0;        // jobs the server holds (retention evicts finished ones)
  uint64_t jobs_evicted = 0;          // finished jobs retention moved out of memory
  uint64_t audit_suppressed = 0;      // refused anonymous calls beyond the audit budget
  uint64_t store_write_failures = 0;  // database writes that failed (a full disk)
  bool store_writable = true;
  // Energy (serve; control/energy.h; tessera kube fills power_watts only). `energy` false:
  // none of it is shown.
  bool energy = false;
  struct GpuPower {
    std::string node;
    int32_t gpu = 0;  // its host index
    double watts = 0;
    bool measured = false;      // nvidia-smi's power.draw; else the estimate
    double temperature_c = -1;  // nvidia-smi's temperature.gpu; -1: none read
  };
  std::vector<GpuPower> gpu_power;
  std::map<std::string, double> energy_joules;  // by tenant: estimated GPU energy so far
  double power_watts = 0;                       // the cluster: GPUs + node base power, x PUE
  // By node: the thermal headroom the engine schedules under (W above idle; --thermal-limit).
  std::map<std::string, double> thermal_headroom_w;
};

}  // namespace tessera
