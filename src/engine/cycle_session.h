// One scheduling cycle's working state, shared by its walk (engine/cycle.cc) and its stages
// (engine/stages/): the scratch ledger where placements are tried, what every queue holds on it,
// the decisions so far, and which running jobs were evicted or resized. As Volcano's Session:
// the stages read and change it; the cycle commits starts.
//
// Invariants: `live` (and the per-type usage) is what every queue holds on `scratch`, always
// (add_usage is called with every allocate or release a stage keeps); a running job evicted or
// resized this cycle is neither preempted nor resized again in it; the caller's ledger
// (Snapshot::scratch) is given back unchanged when the session ends.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "engine/decisions.h"
#include "engine/fair_share.h"
#include "engine/pending_queue.h"
#include "engine/policy.h"
#include "engine/reserved_gpus.h"
#include "engine/rng.h"
#include "engine/snapshot.h"
#include "model/cluster_state.h"

namespace tessera {

// What makes two pending jobs equally hard to place; if one failed on the current scratch
// state, the other fails too (the state only fills up until a preemption frees something).
// Placement constraints are part of the shape: the GPU types, the span and the node restriction
// (JobSpec::eligible_nodes, compared by identity, else by content: two jobs of equal demand
// restricted to different nodes are different shapes).
// So are the reserved GPUs open to it (ReservedGpus::access): jobs that may use different ones
// see different free GPUs.
struct ShapeKey {
  MemberDemand demand;
  int32_t min_members, max_members;
  GpuTypeMask types;
  Level span;
  const NodeSet* nodes;  // null: every node
  uint64_t reserved_access = 0;
  bool operator==(const ShapeKey& o) const {
    return demand == o.demand && min_members == o.min_members && max_members == o.max_members &&
           types == o.types && span == o.span && same_restriction(nodes, o.nodes) &&
           reserved_access == o.reserved_access;
  }
};
struct ShapeHash {
  size_t operator()(const ShapeKey& k) const;
};
using ShapeSet = std::unordered_set<ShapeKey, ShapeHash>;

ShapeKey shape_of(const JobSpec& job);
ShapeKey shape_of(const GangShape& g);  // the ShapeKey of the jobs of a gang shape

// Milli-GPU of `a` on GPUs of the types in mask, on nodes of `only` (null: every node).
int64_t milli_on_types(const Cluster& c, const Allocation& a, GpuTypeMask mask,
                       const NodeSet* only = nullptr);

// Whether every share of `a` fits on `state` right now; with `held`, counting what the reserved
// GPUs hold as free (a running job's allocation put back: ReservedGpus::release_on lets go of
// the holds first).
bool fits(const ClusterState& state, const Allocation& a, const ReservedGpus* held = nullptr);

class CycleSession {
 public:
  CycleSession(const Snapshot& snap, const Policy& policy);
  ~CycleSession();  // gives the caller's ledger back
  CycleSession(const CycleSession&) = delete;
  CycleSession& operator=(const CycleSession&) = delete;

  const Snapshot& snap;
  const Policy& policy;
  const Cluster& cluster;

 private:
  // Where the cycle tries placements: the caller's ledger (Snapshot::scratch), journaled and
  // given back unchanged when the cycle ends, or else a copy of the snapshot's.
  std::optional<ClusterState> own_scratch_;

 public:
  ClusterState& scratch;
  Rng rng;
  // Reserved GPUs, held on scratch; a stage that considers a job opens those open to it.
  ReservedGpus reserved;
  // The reserved GPUs open to the job being considered (ReservedGpus::access): part of its
  // shape (shape()).
  uint64_t current_access = 0;
  Decisions out;
  const QueueShares shares;
  const QueueTree& tree;
  QueueId current_leaf = kRootQueue;  // the leaf of the job being considered
  // Shapes that found no room since capacity was last freed (a later one fails too), and
  // shapes no shrinking of elastic surplus could place since then.
  ShapeSet failed, shrink_failed;

  // The job's shape for this cycle's caches of failures: shape_of(job) and the reserved GPUs
  // open to it (current_access, for the job being considered).
  ShapeKey shape(const JobSpec& job) const {
    ShapeKey k = shape_of(job);
    k.reserved_access = current_access;
    return k;
  }

  // ---- queue usage ----
  const std::vector<Amounts>& live() const { return live_; }
  // By QueueId, then its by_type entries: milli-GPU held of each type with a per-type quota.
  const std::vector<std::vector<int64_t>>& type_live() const { return type_live_; }
  bool has_type_quotas() const { return has_type_quotas_; }
  void add_usage(QueueId leaf, const JobSpec& job, const Allocation& a, int sign);
  // The first queue on the leaf's path whose limit `need` more would exceed, or kNoId.
  QueueId over_limit(QueueId leaf, const Amounts& need) const;
  // Per-GPU-type limits, known only once the placement is: the first queue `a` would take past
  // its limit on a GPU type, or kNoId.
  QueueId over_type_limit(QueueId leaf, const Allocation& a) const;
  // The first queue on the leaf's path, below `top`, that `need` more would take past its fair
  // share, or kNoId.
  QueueId over_share_below(QueueId leaf, QueueId top, const Amounts& need) const;
  // The queue on the victim's side just below the lowest common ancestor of the two leaves:
  // the one whose borrowing a reclaim takes back.
  QueueId victim_side(QueueId reclaimer_leaf, QueueId victim_leaf) const;
  bool in_subtree(QueueId leaf, QueueId q) const;

  // ---- running jobs, by index in snap.running (filled on first use: most cycles preempt,
  // shrink and grow nobody) ----
  QueueId running_leaf(size_t i) const;
  bool evicted(size_t i) const { return i < evicted_.size() && evicted_[i]; }
  void set_evicted(size_t i);
  // The members an elastic gang was resized to this cycle (0: not resized).
  int32_t resized(size_t i) const { return i < resized_.size() ? resized_[i] : 0; }
  void set_resized(size_t i, int32_t members);
  // Releases (sign -1) or gives back (+1) `a`, running job i's allocation or a part of it (an
  // elastic gang's members), on the scratch ledger and in its queues' usage. Reserved GPUs not
  // open to the job being considered keep what a release frees of them.
  void toggle_running(size_t i, const Allocation& a, int sign);
  // Whether `a` (running, released this cycle) could be given back: it fits, counting what the
  // reserved GPUs hold of it as free.
  bool fits_back(const Allocation& a) const { return fits(scratch, a, &reserved); }

  // ---- free capacity ----
  // Free milli-GPU of `types` on the nodes of `only`, on the scratch state now.
  int64_t sum_free_on(GpuTypeMask types, const NodeSet& only) const;
  // sum_free_on for the scratch state as committed between decisions (not mid-preemption):
  // cached per node set and type mask until committed() says a start changed it.
  int64_t free_on_nodes(GpuTypeMask types, const NodeSet& only);
  void committed() {
    if (!free_on_nodes_.empty()) free_on_nodes_.clear();
  }
  // Capacity was freed (a preemption, a shrink): earlier failures to place may now fit.
  void capacity_freed() {
    failed.clear();
    shrink_failed.clear();
  }

 private:
  void init_type_usage();

  std::vector<Amounts> live_;
  std::vector<std::vector<int64_t>> type_live_;
  bool has_type_quotas_ = false;
  mutable std::vector<QueueId> running_leaf_;
  std::vector<bool> evicted_;
  std::vector<int32_t> resized_;
  struct FreeOnNodesHash {
    size_t operator()(const std::pair<const NodeSet*, GpuTypeMask>& k) const {
      return std::hash<const void*>()(k.first) * 31 + std::hash<uint64_t>()(k.second);
    }
  };
  std::unordered_map<std::pair<const NodeSet*, GpuTypeMask>, int64_t, FreeOnNodesHash>
      free_on_nodes_;
};

}  // namespace tessera
