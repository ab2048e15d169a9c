#include "engine/frag.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <stdexcept>
#include <tuple>

namespace tessera::frag {

int64_t NodeState::gpu_left_total() const {
  int64_t t = 0;
  for (int i = 0; i < num_gpus; ++i) t += gpu_left[static_cast<size_t>(i)];
  return t;
}

int NodeState::full_free_gpus() const {
  int k = 0;
  while (k < num_gpus && gpu_left[static_cast<size_t>(k)] == kMilli) ++k;  // sorted descending
  return k;
}

NodeState make_node(const NodeSpec& spec) {
  if (spec.num_gpus < 0 || spec.num_gpus > kMaxGpus) {
    throw std::invalid_argument("a node has at most 8 GPUs");
  }
  NodeState n;
  n.cpu_left = spec.cpu_milli;
  n.mem_left = spec.mem_mib;
  n.num_gpus = static_cast<uint8_t>(spec.num_gpus);
  n.model = static_cast<uint8_t>(spec.model);
  for (int i = 0; i < spec.num_gpus; ++i) n.gpu_left[static_cast<size_t>(i)] = kMilli;
  return n;
}

namespace {

// Whether the node has `count` GPUs with at least `milli` free (gpu_left sorted descending).
bool has_gpus(const NodeState& n, int count, int32_t milli) {
  return count <= n.num_gpus && n.gpu_left[static_cast<size_t>(count - 1)] >= milli;
}

bool model_ok(uint32_t models, int model) {
  return ((models >> model) & 1u) != 0;
}

// Restores the descending order after one entry changed.
void resort(NodeState& n) {
  std::sort(n.gpu_left.begin(), n.gpu_left.begin() + n.num_gpus, std::greater<>());
}

}  // namespace

bool fits(const NodeState& n, const PodSpec& p) {
  if (n.cpu_left < p.cpu_milli || n.mem_left < p.mem_mib) return false;
  if (!p.wants_gpu()) return true;
  return model_ok(p.models, n.model) && has_gpus(n, p.num_gpus, p.gpu_milli);
}

void place(NodeState& n, const PodSpec& p, GpuChoice choice) {
  n.cpu_left -= p.cpu_milli;
  n.mem_left -= p.mem_mib;
  if (!p.wants_gpu()) return;
  if (p.is_share()) {
    for (int i = n.num_gpus - 1; i >= 0; --i) {
      auto& g = n.gpu_left[static_cast<size_t>(i)];
      if (g == choice.share_gpu_left) {
        g = static_cast<int16_t>(g - p.gpu_milli);
        break;
      }
    }
    ++n.kinds[0];
  } else {
    // Whole GPUs: the least-free GPUs that still hold the request (for 1000-milli requests,
    // the fully free ones). With the descending order they are the last qualifying entries.
    int last = 0;
    while (last < n.num_gpus && n.gpu_left[static_cast<size_t>(last)] >= p.gpu_milli) ++last;
    for (int k = 0; k < p.num_gpus; ++k) {
      auto& g = n.gpu_left[static_cast<size_t>(last - 1 - k)];
      g = static_cast<int16_t>(g - p.gpu_milli);
    }
    ++n.kinds[static_cast<size_t>(std::min(p.num_gpus, kMaxGpus))];
  }
  resort(n);
}

std::vector<TargetShape> target_workload(const std::vector<PodSpec>& pods, double popularity) {
  // Count each shape; a CPU request of 0 counts as kube-scheduler's non-zero default (100m).
  std::map<std::tuple<int64_t, int32_t, int, uint32_t>, double> count;
  for (const PodSpec& p : pods) {
    const int64_t cpu = p.cpu_milli > 0 ? p.cpu_milli : 100;
    const uint32_t models = p.wants_gpu() ? p.models : kAnyModel;
    count[{cpu, p.wants_gpu() ? p.gpu_milli : 0, p.wants_gpu() ? p.num_gpus : 0, models}] += 1;
  }
  std::vector<TargetShape> shapes;
  for (const auto& [k, c] : count) {
    shapes.push_back({std::get<0>(k), std::get<1>(k), std::get<2>(k), std::get<3>(k), c});
  }
  // Most popular first; equal counts in a fixed order so that the cut is deterministic.
  std::stable_sort(shapes.begin(), shapes.end(),
                   [](const TargetShape& a, const TargetShape& b) { return a.freq > b.freq; });
  const double total = static_cast<double>(pods.size());
  double covered = 0;
  size_t keep = 0;
  while (keep < shapes.size() && covered < popularity * total) covered += shapes[keep++].freq;
  shapes.resize(keep);
  for (TargetShape& s : shapes) s.freq /= covered;
  return shapes;
}

double node_fragment(const NodeState& n, const std::vector<TargetShape>& target) {
  const int64_t total = n.gpu_left_total();
  if (total == 0) return 0;
  double frag = 0;
  for (const TargetShape& t : target) {
    if (t.num_gpus == 0 || t.gpu_milli == 0 || !model_ok(t.models, n.model) ||
        !has_gpus(n, t.num_gpus, t.gpu_milli) || n.cpu_left < t.cpu_milli) {
      frag += t.freq * static_cast<double>(total);
      continue;
    }
    // The shape fits: only GPUs with less free than one of its GPUs needs are fragment.
    int64_t small = 0;
    for (int i = n.num_gpus - 1; i >= 0; --i) {
      const int32_t g = n.gpu_left[static_cast<size_t>(i)];
      if (g >= t.gpu_milli) break;
      small += g;
    }
    frag += t.freq * static_cast<double>(small);
  }
  return frag;
}

size_t FragMemo::KeyHash::operator()(const Key& k) const {
  uint64_t h = k.a * 0x9e3779b97f4a7c15ULL;
  h ^= (k.b + 0xbf58476d1ce4e5b9ULL + (h << 6) + (h >> 2));
  h ^= (k.c + 0x94d049bb133111ebULL + (h << 6) + (h >> 2));
  return static_cast<size_t>(h ^ (h >> 31));
}

double FragMemo::operator()(const NodeState& n) {
  Key k{(static_cast<uint64_t>(n.cpu_left) << 16) | (uint64_t{n.model} << 8) | n.num_gpus, 0, 0};
  for (int i = 0; i < 4; ++i) {
    k.b |= static_cast<uint64_t>(static_cast<uint16_t>(n.gpu_left[static_cast<size_t>(i)]))
           << (16 * i);
    k.c |= static_cast<uint64_t>(static_cast<uint16_t>(n.gpu_left[static_cast<size_t>(i + 4)]))
           << (16 * i);
  }
  if (auto it = memo_.find(k); it != memo_.end()) return it->second;
  if (memo_.size() > (1u << 22)) memo_.clear();  // bound memory on very long runs
  const double v = node_fragment(n, *target_);
  memo_.emplace(k, v);
  return v;
}

namespace {

// The best candidate (a node, and for share pods a GPU on it) in visiting order; among equal
// scores the first one visited wins. The FGD simulator breaks ties the same way: its nodes are
// scored in name order and get a seeded random name prefix, so the order is a per-seed random
// permutation that stays fixed for the whole run (ties keep landing on the same nodes, which
// packs). Random tie-breaking per pod would instead spread equal-score pods over the cluster.
template <typename Score>
struct BestNode {
  int node = -1;
  Score score{};
  GpuChoice choice;
  void offer(int i, const Score& s, GpuChoice c = {}) {
    if (node < 0 || score < s) {
      node = i;
      score = s;
      choice = c;
    }
  }
};

// The share GPU with the least free that still holds the pod (best fit).
GpuChoice best_fit_gpu(const NodeState& n, const PodSpec& p) {
  GpuChoice c;
  if (!p.is_share()) return c;
  for (int i = n.num_gpus - 1; i >= 0; --i) {
    if (n.gpu_left[static_cast<size_t>(i)] >= p.gpu_milli) {
      c.share_gpu_left = n.gpu_left[static_cast<size_t>(i)];
      break;
    }
  }
  return c;
}

// A placer that scores every feasible node with an integer in [0, 100] (kube-scheduler's
// score range, truncated as the FGD simulator does) and takes the first best one in
// ctx.order; the GPU within the node is the best-fit one unless the policy says otherwise.
class ScoringPlacer : public PodPlacer {
 public:
  int choose(const PlacementContext& ctx, const PodSpec& pod, Rng& rng,
             GpuChoice& choice) override {
    const auto& nodes = *ctx.nodes;
    BestNode<int64_t> best;
    for (int i : *ctx.order) {
      const NodeState& n = nodes[static_cast<size_t>(i)];
      if (!fits(n, pod)) continue;
      best.offer(i, score(ctx, n, i, pod));
    }
    if (best.node >= 0) choice = gpu(ctx, nodes[static_cast<size_t>(best.node)], pod, rng);
    return best.node;
  }

 protected:
  virtual int64_t score(const PlacementContext& ctx, const NodeState& n, int index,
                        const PodSpec& p) = 0;
  virtual GpuChoice gpu(const PlacementContext&, const NodeState& n, const PodSpec& p, Rng&) {
    return best_fit_gpu(n, p);
  }
};

// Random: a uniformly random feasible node, and a uniformly random GPU that fits.
class RandomPlacer : public PodPlacer {
 public:
  std::string_view name() const override { return "random"; }
  int choose(const PlacementContext& ctx, const PodSpec& pod, Rng& rng,
             GpuChoice& choice) override {
    const auto& nodes = *ctx.nodes;
    feasible_.clear();
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (fits(nodes[i], pod)) feasible_.push_back(static_cast<int>(i));
    }
    if (feasible_.empty()) return -1;
    const int node = feasible_[rng.below(feasible_.size())];
    const NodeState& n = nodes[static_cast<size_t>(node)];
    if (pod.is_share()) {
      int fitting = 0;
      while (fitting < n.num_gpus && n.gpu_left[static_cast<size_t>(fitting)] >= pod.gpu_milli) {
        ++fitting;
      }
      choice.share_gpu_left = n.gpu_left[rng.below(static_cast<uint64_t>(fitting))];
    }
    return node;
  }

 private:
  std::vector<int> feasible_;
};

// DotProd (Tetris): the smaller the dot product of the node's free <CPU, GPU> and the pod's
// request, both normalised by the largest node, the better ("merge" GPU dimension).
class DotProdPlacer : public ScoringPlacer {
 public:
  std::string_view name() const override { return "dotprod"; }

 protected:
  int64_t score(const PlacementContext&, const NodeState& n, int, const PodSpec& p) override {
    const double dot = (static_cast<double>(n.cpu_left) / kMaxSpecCpu) *
                           (static_cast<double>(p.cpu_milli) / kMaxSpecCpu) +
                       (static_cast<double>(n.gpu_left_total()) / kMaxSpecGpu) *
                           (static_cast<double>(p.total_gpu_milli()) / kMaxSpecGpu);
    return static_cast<int64_t>(100.0 * (1.0 - dot / 2.0));
  }
};

// GpuClustering: pods of one kind (share, 1-GPU, 2-GPU, ...) together; within a band, fuller
// nodes first.
class GpuClusteringPlacer : public ScoringPlacer {
 public:
  std::string_view name() const override { return "gpuclustering"; }

 protected:
  int64_t score(const PlacementContext&, const NodeState& n, int, const PodSpec& p) override {
    if (!p.wants_gpu()) return 0;
    const size_t kind = p.is_share() ? 0 : static_cast<size_t>(std::min(p.num_gpus, kMaxGpus));
    int kinds_present = 0;
    for (uint16_t c : n.kinds) kinds_present += c > 0 ? 1 : 0;
    const int64_t fill = 25 * (8000 - n.gpu_left_total()) / 8000;
    if (n.kinds[kind] > 0) return fill + (kinds_present == 1 ? 75 : 50);
    return fill + (kinds_present == 0 ? 25 : 0);
  }
};

// GpuPacking: prefer a partly used GPU, then fully free GPUs on a used node, then an idle node.
class GpuPackingPlacer : public ScoringPlacer {
 public:
  std::string_view name() const override { return "gpupacking"; }

 protected:
  int64_t score(const PlacementContext&, const NodeState& n, int, const PodSpec& p) override {
    if (!p.wants_gpu()) return 0;
    const int full = n.full_free_gpus();
    if (full == n.num_gpus) return std::max<int64_t>(33 - full, full);
    // The GPUs the pod would use: least free first, among those that hold it.
    int need = p.num_gpus, full_used = 0;
    int64_t free_pct = 0;
    for (int i = n.num_gpus - 1; i >= 0 && need > 0; --i) {
      const int32_t g = n.gpu_left[static_cast<size_t>(i)];
      if (g < p.gpu_milli) continue;
      --need;
      if (g == kMilli) ++full_used;
      free_pct += int64_t{g} * 100 / kMilli;
    }
    if (full_used > 0) return std::max<int64_t>(50 - full_used, 33);
    return std::max<int64_t>(100 - free_pct / 10, 50);
  }
};

// BestFit: the node with the least free CPU and GPU left after placing, equally weighted.
class BestFitPlacer : public ScoringPlacer {
 public:
  std::string_view name() const override { return "bestfit"; }

 protected:
  int64_t score(const PlacementContext&, const NodeState& n, int, const PodSpec& p) override {
    const double left =
        static_cast<double>(n.cpu_left - p.cpu_milli) / kMaxSpecCpu * 0.5 +
        static_cast<double>(n.gpu_left_total() - p.total_gpu_milli()) / kMaxSpecGpu * 0.5;
    return static_cast<int64_t>((1.0 - left) * 100.0);
  }
};

// Fragment amount of the node after placing the pod there with `choice`.
double frag_after(const PlacementContext& ctx, const NodeState& n, const PodSpec& p,
                  GpuChoice choice) {
  NodeState m = n;
  place(m, p, choice);
  return (*ctx.frag)(m);
}

// For a share pod, the candidate GPUs (one per distinct free amount that holds it) and the
// fragment after each; calls f(choice, frag_after). For other pods one call.
template <typename F>
void for_each_option(const PlacementContext& ctx, const NodeState& n, const PodSpec& p, F&& f) {
  if (!p.is_share()) {
    f(GpuChoice{}, frag_after(ctx, n, p, GpuChoice{}));
    return;
  }
  int32_t prev = -1;
  for (int i = 0; i < n.num_gpus; ++i) {
    const int32_t g = n.gpu_left[static_cast<size_t>(i)];
    if (g < p.gpu_milli) break;
    if (g == prev) continue;
    prev = g;
    f(GpuChoice{g}, frag_after(ctx, n, p, GpuChoice{g}));
  }
}

double sigmoid(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}

// FGD: the node (and GPU) whose fragment amount grows least, scored as the FGD simulator
// does: sigmoid of the decrease in GPUs, truncated to an integer in [0, 100].
class FgdPlacer : public ScoringPlacer {
 public:
  std::string_view name() const override { return "fgd"; }

 protected:
  int64_t score(const PlacementContext& ctx, const NodeState& n, int, const PodSpec& p) override {
    const double before = (*ctx.frag)(n);
    double best_after = 0;
    bool any = false;
    for_each_option(ctx, n, p, [&](GpuChoice, double after) {
      if (!any || after < best_after) best_after = after;
      any = true;
    });
    return static_cast<int64_t>(sigmoid((before - best_after) / 1000.0) * 100.0);
  }
  GpuChoice gpu(const PlacementContext& ctx, const NodeState& n, const PodSpec& p, Rng&) override {
    GpuChoice best;
    double best_after = 0;
    bool any = false;
    for_each_option(ctx, n, p, [&](GpuChoice c, double after) {
      if (!any || after < best_after) {
        best = c;
        best_after = after;
      }
      any = true;
    });
    return best;
  }
};

// tessera-pack: FGD plus the CPU that keeps free GPUs usable.
//
// FGD measures fragmentation per target shape, so CPU only counts once a node's free CPU
// drops below what a whole shape needs; until that cliff, taking CPU from a node with free
// GPUs looks free. On the Alibaba trace CPU is the binding resource at the end (at 130 %
// demand the pods ask for more CPU than the cluster has), and most GPUs FGD leaves idle sit
// on 8-GPU nodes with 12 CPUs per GPU that ran out of CPU first. We add a gradient for that:
// a free GPU needs about R milli-CPU to be used (R = the target workload's CPU per GPU), so a
// node's "CPU-starved GPUs" are max(0, R x free GPU milli - free CPU) / (R x 1000). The score
// is FGD's (sigmoid of the fragment decrease in GPUs, as an integer 0..100, ties to the first
// node in the seeded order) with the growth of CPU-starved GPUs subtracted inside the
// sigmoid, weighted like fragment (lambda = 1). CPU-only pods are steered to nodes whose GPUs
// are gone or that have CPU to spare, and CPU-hungry GPU pods to CPU-rich nodes.
class TesseraPackPlacer : public PodPlacer {
 public:
  std::string_view name() const override { return "tessera-pack"; }
  int choose(const PlacementContext& ctx, const PodSpec& pod, Rng&, GpuChoice& choice) override {
    if (cpu_per_gpu_ <= 0) cpu_per_gpu_ = target_cpu_per_gpu(ctx.frag->target());
    const double r = cpu_per_gpu_;
    // CPU-starved free GPUs of a node state, in GPUs.
    auto starved = [r](double cpu_left, double gpu_left) {
      return std::max(0.0, r * gpu_left - cpu_left) / (r * kMilli);
    };
    const auto& nodes = *ctx.nodes;
    BestNode<int64_t> best;
    for (int i : *ctx.order) {
      const NodeState& n = nodes[static_cast<size_t>(i)];
      if (!fits(n, pod)) continue;
      const double before = (*ctx.frag)(n);
      const double starved_before =
          starved(static_cast<double>(n.cpu_left), static_cast<double>(n.gpu_left_total()));
      const double starved_after =
          starved(static_cast<double>(n.cpu_left - pod.cpu_milli),
                  static_cast<double>(n.gpu_left_total() - pod.total_gpu_milli()));
      // Within the node, the GPU with the largest exact gain (as FGD picks its GPU).
      double node_gain = 0;
      GpuChoice node_choice;
      bool any = false;
      for_each_option(ctx, n, pod, [&](GpuChoice c, double after) {
        const double gain = (before - after) / kMilli - kLambda * (starved_after - starved_before);
        if (!any || gain > node_gain) {
          node_gain = gain;
          node_choice = c;
        }
        any = true;
      });
      best.offer(i, static_cast<int64_t>(sigmoid(node_gain) * 100.0), node_choice);
    }
    if (best.node >= 0) choice = best.choice;
    return best.node;
  }

 private:
  static constexpr double kLambda = 1.0;
  // Milli-CPU per milli-GPU asked by the target's GPU shapes (frequency-weighted).
  static double target_cpu_per_gpu(const std::vector<TargetShape>& target) {
    double cpu = 0, gpu = 0;
    for (const TargetShape& t : target) {
      if (t.num_gpus == 0 || t.gpu_milli == 0) continue;
      cpu += t.freq * static_cast<double>(t.cpu_milli);
      gpu += t.freq * t.num_gpus * t.gpu_milli;
    }
    return gpu > 0 ? cpu / gpu : 1.0;
  }
  double cpu_per_gpu_ = 0;
};

}  // namespace

const std::vector<std::string>& placer_names() {
  static const std::vector<std::string> names = {
      "random", "dotprod", "gpuclustering", "gpupacking", "bestfit", "fgd", "tessera-pack"};
  return names;
}

std::unique_ptr<PodPlacer> make_placer(std::string_view name) {
  if (name == "random") return std::make_unique<RandomPlacer>();
  if (name == "dotprod") return std::make_unique<DotProdPlacer>();
  if (name == "gpuclustering") return std::make_unique<GpuClusteringPlacer>();
  if (name == "gpupacking") return std::make_unique<GpuPackingPlacer>();
  if (name == "bestfit") return std::make_unique<BestFitPlacer>();
  if (name == "fgd") return std::make_unique<FgdPlacer>();
  if (name == "tessera-pack") return std::make_unique<TesseraPackPlacer>();
  std::string known;
  for (const auto& n : placer_names()) known += (known.empty() ? "" : ", ") + n;
  throw std::invalid_argument("unknown placement policy '" + std::string(name) +
                              "' (known: " + known + ")");
}

}  // namespace tessera::frag
