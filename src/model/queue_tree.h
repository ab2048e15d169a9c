// The tree of tenant queues: who is entitled to what. Leaves hold jobs (a workload's tenants
// bind to leaves by name); inner queues group teams. Every queue has a weight (its share of
// what its parent gets beyond guarantees), a guaranteed quota, and a limit (guarantee plus
// borrowing limit: the most it may hold).
//
// YAML (load_queue_tree):
//   fairness:                      # optional
//     half_life: 24h               # decayed-usage half-life (s, m, h, d suffixes); 0 = off
//     long_term_weight: 0.5        # 0..1: how much decayed usage counts against instant usage
//     count: gpus                  # gpus (default) | throughput: GPU usage in V100-equivalents
//   preemption:                    # optional
//     checkpoint_grace: 30s        # a victim is asked to checkpoint; its GPUs free after this
//     starving_after: 1h           # a gang larger than its queue's share may reclaim after
//                                  # waiting this long (0 = never)
//     min_runtime: 30m             # a starving gang is not reclaimed before it ran this long
//   queues:
//     - name: research
//       weight: 2                  # > 0, default 1
//       guarantee: {gpus: 16, cpu: 64, memory: 256Gi, gpu_types: {A100-80G: 8}}
//       borrow_limit: {gpus: 16}   # most it may hold beyond its guarantee; absent = no limit
//       priority_classes: [research, best-effort]   # absent: in a replay all classes; in
//                                  # serve and kube the default class and lower ones
//       default_priority_class: research            # for jobs that name none
//       default_sla: 10m           # max queueing delay for its jobs that name none
//       time_limit: {default: 4h, max: 24h}   # run-time limits of its jobs (tessera serve)
//       memory: {default: 16Gi, max: 128Gi}   # memory per member of its jobs (tessera serve)
//       tenant_limits: {max_pending_jobs: 1000, max_pending_jobs_per_user: 200, ...}
//       queues: [...]              # children (a queue with children holds no jobs)
//
// Invariants after loading (finish() checks them, naming the queue and field):
//  - queue 0 is the root; every other queue's parent precedes it (parents before children);
//  - sibling names are unique and contain no '/';
//  - limit >= guarantee on every dimension;
//  - a parent's guarantee is at least the sum of its children's (a parent that names none
//    takes that sum), per dimension and per GPU type.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "model/cluster.h"
#include "model/ids.h"
#include "model/job.h"

namespace tessera {

using QueueId = uint32_t;  // index into QueueTree::queues(); 0 is the root
inline constexpr QueueId kRootQueue = 0;

// The dimensions a quota speaks about. GPUs count all types together (milli-GPU); per-type
// guarantees and limits refine them (QueueSpec::by_type).
enum Dim : uint8_t { kGpuDim = 0, kCpuDim = 1, kMemDim = 2 };
inline constexpr size_t kNumDims = 3;
using Amounts = std::array<int64_t, kNumDims>;  // milli-GPU, milli-CPU, MiB
// A limit that never binds; small enough that adding two of them cannot overflow.
inline constexpr int64_t kUnlimited = std::numeric_limits<int64_t>::max() / 4;
inline constexpr Amounts kZeroAmounts{0, 0, 0};
inline constexpr Amounts kUnlimitedAmounts{kUnlimited, kUnlimited, kUnlimited};

inline Amounts operator+(Amounts a, const Amounts& b) {
  for (size_t d = 0; d < kNumDims; ++d) a[d] += b[d];
  return a;
}
inline Amounts operator-(Amounts a, const Amounts& b) {
  for (size_t d = 0; d < kNumDims; ++d) a[d] -= b[d];
  return a;
}
inline bool all_le(const Amounts& a, const Amounts& b) {
  for (size_t d = 0; d < kNumDims; ++d) {
    if (a[d] > b[d]) return false;
  }
  return true;
}

// What one member-set of a job asks for, in quota dimensions.
inline Amounts amounts_of(const JobSpec& job, int32_t members) {
  return Amounts{job.gpu_milli_per_gang(members), job.demand.cpu_milli * members,
                 job.demand.mem_mib * members};
}

struct TypeQuota {
  GpuTypeId type = 0;
  int64_t guarantee_milli = 0;
  int64_t limit_milli = kUnlimited;
};

// Bit per PriorityClass (1 << value).
using ClassMask = uint8_t;
inline constexpr ClassMask kAllClasses = 0x0f;
inline constexpr ClassMask class_bit(PriorityClass p) {
  return static_cast<ClassMask>(1u << static_cast<unsigned>(p));
}

struct QueueSpec {
  std::string name;  // "" for the root
  std::string path;  // "research/nlp"; "" for the root
  QueueId parent = kNoId;
  std::vector<QueueId> children;
  uint32_t depth = 0;  // root 0
  double weight = 1;
  Amounts guarantee = kZeroAmounts;
  Amounts limit = kUnlimitedAmounts;  // guarantee + borrowing limit
  std::vector<TypeQuota> by_type;     // sorted by type; types not listed: no refinement
  ClassMask allowed_classes = kAllClasses;
  // Whether it or a queue above it lists priority_classes (shared front ends gate on this:
  // shared_classes()).
  bool classes_given = false;
  bool has_default_class = false;
  PriorityClass default_class = PriorityClass::kResearch;
  double default_sla_seconds = kUnknown;  // max queueing delay; kUnknown = none
  // Time limits of its jobs' runs (`time_limit: {default, max}`), inherited from the nearest
  // queue above that sets them; kUnknown = none. default <= max.
  double default_time_limit_seconds = kUnknown;
  double max_time_limit_seconds = kUnknown;
  // Memory of each of its jobs' members (`memory: {default, max}`, tessera serve): what a job
  // that asks for none gets (its cgroup's limit, and its demand in placement), and the most
  // one may ask for; inherited as the time limits are; -1 = not set. default <= max.
  int64_t default_memory_mib = -1;
  int64_t max_memory_mib = -1;
  // The Kubernetes namespaces whose pods may use it (`namespaces: [ml, ml-dev]`, "*" for any),
  // as Kueue's ClusterQueue namespaceSelector: a queue admits the namespaces it or a queue
  // above it lists; where none lists any, only the namespace named as the queue itself
  // (QueueTree::admits_namespace).
  std::vector<std::string> namespaces;
  // Zeus's energy knob for its jobs (`energy_weight`, 0..1: 0 runs them at full power, 1 at the
  // power limit that spends least energy per unit of work; docs/energy.md), inherited from the
  // nearest queue above that sets it; kUnknown: not set (the caller's default applies).
  double energy_weight = kUnknown;
  // Carbon-aware deferral (`carbon_defer: 6h`): with a carbon-intensity series, this queue's
  // best-effort jobs may wait up to this long after submission for a cleaner hour; inherited;
  // kUnknown: not set (no deferral).
  double carbon_defer_seconds = kUnknown;
  // What each tenant under this queue may ask of `tessera serve` (`tenant_limits:`); -1: not
  // set here (the nearest queue above that sets it, else the server's flag, applies).
  int64_t max_pending_jobs = -1;
  int64_t max_pending_jobs_per_user = -1;  // each user of such a tenant (as Slurm's per user)
  int64_t max_gang_size = -1;
  int64_t max_processes = -1;
  double submissions_per_second = -1;
  std::string source;  // "file:line" of its definition

  bool leaf() const { return children.empty(); }
};

// What a queue's GPU usage counts for fair shares: raw milli-GPUs, or milli-GPUs weighted by
// the job's speed on each GPU's type relative to V100 (engine/fair_share.h, fair_amounts_of).
enum class FairCount : uint8_t { kGpus, kThroughput };

struct FairnessSettings {
  FairCount count = FairCount::kGpus;
  double half_life_seconds = 0;          // decayed-usage half-life; 0 = long-term fairness off
  double long_term_weight = 0;           // 0..1; defaults to 0.5 when a half-life is set
  double checkpoint_grace_seconds = -1;  // < 0: not set (the caller's default applies)
  // A gang larger than what its queue is entitled to can never start by reclaim and may wait
  // behind borrowers indefinitely: once it has waited this long (and its queue holds less than
  // its share) it may reclaim anyway. 0: never.
  double starving_after_seconds = 3600;
  // Reclaim spares a starving gang that has run for less than this, so that it and the queues
  // it took from take turns instead of thrashing.
  double min_runtime_seconds = 1800;
  // Reclaim for a fair share above guarantees spares jobs that have run less than this, so
  // that shares shifting with demand do not stop jobs again and again (churn). Reclaim up to a
  // queue's guarantee (and for per-type guarantees) is never delayed. 0: no delay.
  double reclaim_min_runtime_seconds = 0;
  // Reclaim for a fair share above guarantees only for a job that has waited this long: a
  // deficit that lasts less (a borrower's jobs end, or the burst that caused it does) is not
  // worth stopping anyone for. Reclaim up to a guarantee is never delayed. 0: at once.
  double reclaim_after_seconds = 0;
  // Reclaim above guarantees takes only from queues holding more than (1 + this) x their fair
  // share of GPUs: a band that absorbs shares moving with demand, so that a queue a little
  // over its share (often only until its next job ends) is not stopped. 0: none.
  double reclaim_tolerance = 0;
  // A job that would take its queue past its fair share (borrowing what other queues are
  // entitled to) starts only if it is expected to end within this long (its duration
  // estimate; a job without one is not lent to): what is lent comes back by itself, so the
  // owner rarely has to reclaim it. 0: no bound.
  double borrow_max_runtime_seconds = 0;
  // Reclaim above guarantees only when it is worth its price: the GPU time the job's queue
  // would go without while waiting instead (what it lacks of its share x the expected wait for
  // the jobs that could give way to end and free the job's GPUs; unknown ends: forever) must be
  // at least this times what stopping the victims wastes (their GPUs x
  // RunningJob::preemption_seconds, plus work lost since their checkpoints). A guarantee is
  // always taken back. 0: reclaim whatever it costs.
  double reclaim_cost_ratio = 0;
};

class QueueTree {
 public:
  // One leaf per tenant of `tenants`, weight 1, no guarantees, no limits, all classes.
  static QueueTree flat(const Interner& tenants);
  // One leaf per name in `names`, in order (tests, generated experiments).
  static QueueTree flat(const std::vector<std::string>& names,
                        const std::vector<double>& weights = {});

  const std::vector<QueueSpec>& queues() const { return queues_; }
  const QueueSpec& queue(QueueId q) const { return queues_[q]; }
  size_t size() const { return queues_.size(); }
  const FairnessSettings& settings() const { return settings_; }
  FairnessSettings& settings() { return settings_; }

  // Binds tenant ids to leaves: a tenant named "nlp" or "research/nlp" binds to that leaf.
  // Throws InputError naming the tenant (and `where`, e.g. the workload file) if a tenant
  // names no leaf or an ambiguous one.
  void bind(const Interner& tenants, const std::string& where);
  // The tenants bind() would refuse (no leaf, or an ambiguous one), all of them.
  std::vector<TenantId> tenants_without_leaf(const Interner& tenants) const;
  // The leaf of tenant t; kNoId if unbound.
  QueueId leaf_of(TenantId t) const {
    return t < leaf_of_tenant_.size() ? leaf_of_tenant_[t] : kNoId;
  }
  size_t bound_tenants() const { return leaf_of_tenant_.size(); }
  // Whether pods of namespace `ns` may use queue q (QueueSpec::namespaces).
  bool admits_namespace(QueueId q, std::string_view ns) const;

  // Checks the tree against a cluster: guarantees (top-level sums, per GPU type) must fit its
  // capacity. Throws InputError naming the queue and the resource.
  void validate_against(const Cluster& c) const;

  // Building (readers and tests): add a queue under `parent`; returns its id. Call finish()
  // once every queue is added: it derives inner guarantees and checks the invariants above.
  QueueId add(QueueId parent, QueueSpec spec);
  void finish();

 private:
  std::vector<QueueSpec> queues_{QueueSpec{}};
  std::vector<QueueId> leaf_of_tenant_;  // by TenantId
  FairnessSettings settings_;
};

// Reads the YAML format above. Throws InputError naming the file, line and field.
QueueTree load_queue_tree(const std::string& path);
QueueTree parse_queue_tree_yaml(std::string_view text, const std::string& origin);

// Gives jobs of `w` whose trace named no priority class or SLA their queue's defaults, and
// rejects (InputError naming the job's source) a job whose class its queue does not allow.
// `tree` must be bound to w.tenants.
void apply_queue_defaults(const QueueTree& tree, Workload& w);
// The same for one job of leaf queue `leaf`: false when its class is not allowed there.
bool apply_queue_defaults(const QueueSpec& leaf, JobSpec& job);

// The classes a tenant of `leaf` may ask for where tenants share a cluster (tessera serve,
// tessera kube): those a queue on its path lists, else its default class and lower ones
// (research and best-effort where it names no default). So no tenant outranks, and so
// preempts, another unless the operator says it may, as Slurm gates QOS per association.
// A replay (simulate) takes the trace's classes as given: allowed_classes.
ClassMask shared_classes(const QueueSpec& leaf);
// "" when a job of class `p` may run in `leaf` (shared_classes), else why not, naming the
// class, the queue and the classes it allows.
std::string class_refusal(const QueueSpec& leaf, PriorityClass p);
// "best-effort, research" (lowest first); "none" for an empty mask.
std::string class_list(ClassMask mask);

}  // namespace tessera
