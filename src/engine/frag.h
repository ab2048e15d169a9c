// Fragmentation-aware placement of GPU-sharing pods, after Weng et al., "Beware of
// Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation Gradient Descent"
// (USENIX ATC'23). Pure functions and small value types: no I/O, no clock; randomness only
// through an injected Rng, so the same seed gives the same placements everywhere.
//
// Why a compact node state of its own instead of model/ClusterState: the capacity experiment
// asks "where would this pod go, and how fragmented would that node be afterwards" for every
// node and every candidate GPU, ten thousand times per run. A node here is one small struct
// whose GPUs are kept as a sorted multiset of free milli-GPUs (which device index a share lands
// on does not change any metric), so a node's state is its own hash key for the fragmentation
// memo and a share pod has at most as many candidate GPUs as distinct free amounts.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/rng.h"

namespace tessera::frag {

inline constexpr int kMaxGpus = 8;       // per node (the Alibaba 2023 nodes have 1, 2, 4 or 8)
inline constexpr int32_t kMilli = 1000;  // milli-GPU per GPU
inline constexpr uint32_t kAnyModel = 0xffffffffu;
// The FGD simulator's normalisation constants (largest node: 128 CPUs, 8 GPUs).
inline constexpr double kMaxSpecCpu = 128000;
inline constexpr double kMaxSpecGpu = 8000;

// A node as read: capacity and GPU model (index into the trace's model table).
struct NodeSpec {
  int64_t cpu_milli = 0;
  int64_t mem_mib = 0;
  int num_gpus = 0;
  int model = 0;
};

// A pod's request. gpu_milli is per GPU: a share pod has num_gpus 1 and gpu_milli < 1000; a
// whole-GPU pod has gpu_milli 1000. models: bit m set when GPU model m is acceptable
// (kAnyModel: no constraint; 0: none of the cluster's models, it can never be placed).
struct PodSpec {
  int64_t cpu_milli = 0;
  int64_t mem_mib = 0;
  int num_gpus = 0;
  int32_t gpu_milli = 0;
  uint32_t models = kAnyModel;

  bool wants_gpu() const { return num_gpus > 0 && gpu_milli > 0; }
  bool is_share() const { return num_gpus == 1 && gpu_milli < kMilli; }
  int64_t total_gpu_milli() const { return wants_gpu() ? int64_t{num_gpus} * gpu_milli : 0; }
};

// Free resources of one node. Invariant: gpu_left[0..num_gpus) is sorted descending, each in
// [0, 1000]; entries past num_gpus are 0. cpu_left, mem_left >= 0.
struct NodeState {
  int64_t cpu_left = 0;
  int64_t mem_left = 0;
  std::array<int16_t, kMaxGpus> gpu_left{};
  uint8_t num_gpus = 0;
  uint8_t model = 0;
  // GPU pods on the node by kind (GpuClustering's "affinity"): [0] share pods, [k] k-GPU pods.
  std::array<uint16_t, kMaxGpus + 1> kinds{};

  int64_t gpu_left_total() const;
  int full_free_gpus() const;
};

static_assert(sizeof(NodeState) <= 64, "a node state should stay within a cache line");

NodeState make_node(const NodeSpec& spec);

// Whether the node can host the pod now: CPU, memory, GPU model and enough GPUs with enough
// free share (whole-GPU pods need fully free GPUs).
bool fits(const NodeState& n, const PodSpec& p);

// Where on a node a pod goes: for a share pod the free amount of the GPU it takes (any GPU
// with that amount; they are interchangeable); ignored otherwise (whole-GPU pods take fully
// free GPUs, CPU pods no GPU).
struct GpuChoice {
  int32_t share_gpu_left = -1;
};

// Applies a placement. Precondition: fits(n, p), and for a share pod some GPU has exactly
// choice.share_gpu_left free with share_gpu_left >= p.gpu_milli. Keeps the sort invariant.
void place(NodeState& n, const PodSpec& p, GpuChoice choice);

// The target workload: the most popular pod shapes of the trace (CPU, per-GPU milli, GPU
// count, model set) until they cover `popularity` of all pods, with their frequencies
// renormalised to sum to 1 (the FGD simulator's "typical pods", threshold 95 %, CPU-only pods
// included). Memory is not part of a shape, as in the paper.
struct TargetShape {
  int64_t cpu_milli = 0;
  int32_t gpu_milli = 0;
  int num_gpus = 0;
  uint32_t models = kAnyModel;
  double freq = 0;
};
std::vector<TargetShape> target_workload(const std::vector<PodSpec>& pods,
                                         double popularity = 0.95);

// Fragment amount of one node w.r.t. the target workload, in milli-GPU: the expected number of
// the node's free milli-GPUs that an arriving target pod could not use. For a shape the node
// can host (CPU, model, enough GPUs), the free GPUs too small for one of its GPUs are fragment;
// for a shape it cannot host, all free GPUs are (CPU-only shapes also count all free GPUs:
// they never use them). Weighted by shape frequency.
double node_fragment(const NodeState& n, const std::vector<TargetShape>& target);

// Memoised node_fragment: nodes in the same state (model, CPU left, free GPU multiset) share
// one value, so a run computes each distinct state once.
class FragMemo {
 public:
  explicit FragMemo(const std::vector<TargetShape>* target) : target_(target) {}
  double operator()(const NodeState& n);
  size_t size() const { return memo_.size(); }
  const std::vector<TargetShape>& target() const { return *target_; }

 private:
  struct Key {
    uint64_t a, b, c;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const;
  };
  const std::vector<TargetShape>* target_;
  std::unordered_map<Key, double, KeyHash> memo_;
};

// What a placer sees: every node's state plus the fragmentation memo (for policies that score
// by fragmentation).
struct PlacementContext {
  const std::vector<NodeState>* nodes = nullptr;
  FragMemo* frag = nullptr;
  // The order in which nodes are scored (a permutation of their indices); among equally
  // scored nodes the first in this order wins.
  const std::vector<int>* order = nullptr;
};

// A placement policy: picks a node (and GPU) for one pod, or returns -1 when no node fits.
// Ties between equally scored nodes go to the first in ctx.order; `rng` is for policies that
// draw (random).
class PodPlacer {
 public:
  virtual ~PodPlacer() = default;
  virtual std::string_view name() const = 0;
  virtual int choose(const PlacementContext& ctx, const PodSpec& pod, Rng& rng,
                     GpuChoice& choice) = 0;
};

// random, dotprod, gpuclustering, gpupacking, bestfit, fgd (the paper's baselines and FGD),
// tessera-pack (ours). Throws std::invalid_argument naming the known ones for anything else.
std::unique_ptr<PodPlacer> make_placer(std::string_view name);
const std::vector<std::string>& placer_names();

}  // namespace tessera::frag
