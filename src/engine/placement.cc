#include "engine/placement.h"

#include <algorithm>
#include <numeric>

namespace tessera {

namespace {

// Places one member on node n (pick + allocate). Returns false if the node cannot host it.
bool place_member(ClusterState& state, NodeId n, const JobSpec& job, bool pack, Allocation& out) {
  const size_t before = out.shares.size();
  if (!state.pick_gpus(n, job.demand, pack, out.shares)) return false;
  state.allocate_member(n, std::span(out.shares).subspan(before), job.demand.cpu_milli,
                        job.demand.mem_mib);
  out.member_node.push_back(n);
  return true;
}

void begin(const JobSpec& job, Allocation& out) {
  out = Allocation{};
  out.gpus_per_member = job.demand.gpus;
  out.cpu_milli_per_member = job.demand.cpu_milli;
  out.mem_mib_per_member = job.demand.mem_mib;
}

// Undoes a partly placed gang (all-or-nothing).
bool fail(ClusterState& state, Allocation& out) {
  state.release(out);
  out = Allocation{};
  return false;
}

// The node types a job may use, as a list of GPU type ids present in the cluster.
std::vector<GpuTypeId> allowed_types(const ClusterState& state, const JobSpec& job) {
  std::vector<GpuTypeId> types;
  const GpuTypeMask present = state.cluster().present_types();
  for (GpuTypeId t = 0; t < state.cluster().gpu_types().size(); ++t) {
    if (((present >> t) & 1u) && type_allowed(job.allowed_types, t)) types.push_back(t);
  }
  return types;
}

// For whole-GPU members: the first node (over allowed types) in buckets k in [lo, hi] scanned in
// the given direction that can host one member.
NodeId scan_buckets(const ClusterState& state, const std::vector<GpuTypeId>& types,
                    const MemberDemand& d, int lo, int hi, bool ascending) {
  for (int step = 0; step <= hi - lo; ++step) {
    const int k = ascending ? lo + step : hi - step;
    for (GpuTypeId t : types) {
      for (NodeId n : state.bucket(t, k)) {
        if (state.can_host(n, d)) return n;
      }
    }
  }
  return kNoId;
}

// For fractional members: the node with the fullest (pack) or emptiest (spread) partially used
// GPU that fits; kNoId when no partial GPU fits.
NodeId scan_partial(const ClusterState& state, const std::vector<GpuTypeId>& types,
                    const MemberDemand& d, bool pack) {
  NodeId best = kNoId;
  int32_t best_free = 0;
  for (GpuTypeId t : types) {
    for (NodeId n : state.partial_nodes(t)) {
      if (!state.can_host(n, d)) continue;
      const Node& node = state.cluster().node(n);
      for (GpuId g = node.first_gpu; g < node.first_gpu + node.num_gpus; ++g) {
        const int32_t f = state.gpu_free(g);
        if (f >= d.gpu_milli && f < kMilliPerGpu &&
            (best == kNoId || (pack ? f < best_free : f > best_free) ||
             (f == best_free && n < best))) {
          best = n;
          best_free = f;
        }
      }
    }
  }
  return best;
}

int max_k(const ClusterState& state) {
  return state.cluster().max_node_gpus();
}

// Members that need no GPU (CPU-only pods) go to the first node with room.
NodeId scan_cpu_only(const ClusterState& state, const MemberDemand& d) {
  for (NodeId n = 0; n < state.cluster().nodes().size(); ++n) {
    if (state.can_host(n, d)) return n;
  }
  return kNoId;
}

class BestFit final : public PlacementScorer {
 public:
  std::string_view name() const override { return "bestfit"; }
  bool place(ClusterState& state, const JobSpec& job, int32_t members, Rng&,
             Allocation& out) const override {
    begin(job, out);
    const auto types = allowed_types(state, job);
    const MemberDemand& d = job.demand;
    int32_t remaining = members;
    while (remaining > 0) {
      NodeId n = kNoId;
      if (d.gpus == 0) {
        n = scan_cpu_only(state, d);
      } else if (d.whole_gpus()) {
        // Tightest node that takes every remaining member...
        const int64_t want = int64_t{remaining} * d.gpus;
        if (want <= max_k(state)) {
          n = scan_buckets(state, types, d, static_cast<int>(want), max_k(state), true);
        }
        // ...else the node that takes the most (fewest nodes spanned).
        if (n == kNoId) n = scan_buckets(state, types, d, d.gpus, max_k(state), false);
      } else {
        n = scan_partial(state, types, d, /*pack=*/true);
        if (n == kNoId) n = scan_buckets(state, types, d, 1, max_k(state), true);
      }
      if (n == kNoId) return fail(state, out);
      // Put as many of the remaining members on this node as fit.
      int32_t here = std::min(remaining, std::max(1, state.capacity_for(n, d)));
      for (; here > 0; --here, --remaining) {
        if (!place_member(state, n, job, true, out)) return fail(state, out);
      }
    }
    return true;
  }
};

class Spread final : public PlacementScorer {
 public:
  std::string_view name() const override { return "spread"; }
  bool place(ClusterState& state, const JobSpec& job, int32_t members, Rng&,
             Allocation& out) const override {
    begin(job, out);
    const auto types = allowed_types(state, job);
    const MemberDemand& d = job.demand;
    for (int32_t m = 0; m < members; ++m) {
      NodeId n = kNoId;
      if (d.gpus == 0) {
        n = scan_cpu_only(state, d);
      } else if (d.whole_gpus()) {
        n = scan_buckets(state, types, d, d.gpus, max_k(state), false);
      } else {
        n = scan_buckets(state, types, d, 1, max_k(state), false);
        if (n == kNoId) n = scan_partial(state, types, d, /*pack=*/false);
      }
      if (n == kNoId || !place_member(state, n, job, false, out)) return fail(state, out);
    }
    return true;
  }
};

class Topology final : public PlacementScorer {
 public:
  std::string_view name() const override { return "topology"; }
  bool place(ClusterState& state, const JobSpec& job, int32_t members, Rng& rng,
             Allocation& out) const override {
    const MemberDemand& d = job.demand;
    // CPU-only and fractional single-member jobs have no topology to speak of: pack them.
    if (d.gpus == 0 || !d.whole_gpus() || members == 1) {
      return bestfit_.place(state, job, members, rng, out);
    }
    const Cluster& c = state.cluster();
    const int64_t need = int64_t{members} * d.gpus;
    // Level 1: one node (best fit, which also keeps fuller NVLink domains whole).
    if (need <= max_k(state)) {
      const auto types = allowed_types(state, job);
      MemberDemand whole = d;
      whole.gpus = static_cast<int32_t>(need);
      whole.cpu_milli = d.cpu_milli * members;
      whole.mem_mib = d.mem_mib * members;
      const NodeId n =
          scan_buckets(state, types, whole, static_cast<int>(need), max_k(state), true);
      if (n != kNoId) return fill_nodes(state, job, members, std::vector<NodeId>{n}, out);
    }
    // Level 2: one rack, the one with the fewest free GPUs that hosts the gang.
    std::vector<RackId> racks;
    for (RackId r = 0; r < c.racks().size(); ++r) {
      if (state.rack_free_whole(r) >= need) racks.push_back(r);
    }
    std::stable_sort(racks.begin(), racks.end(), [&](RackId a, RackId b) {
      return state.rack_free_whole(a) < state.rack_free_whole(b);
    });
    for (RackId r : racks) {
      if (fill_nodes(state, job, members, rack_nodes(c, r), out)) return true;
    }
    // Level 3: one spine.
    std::vector<SpineId> spines;
    for (SpineId s = 0; s < c.spines().size(); ++s) {
      if (state.spine_free_whole(s) >= need) spines.push_back(s);
    }
    std::stable_sort(spines.begin(), spines.end(), [&](SpineId a, SpineId b) {
      return state.spine_free_whole(a) < state.spine_free_whole(b);
    });
    for (SpineId s : spines) {
      std::vector<NodeId> nodes;
      const Spine& sp = c.spines()[s];
      for (RackId r = sp.first_rack; r < sp.first_rack + sp.num_racks; ++r) {
        auto rn = rack_nodes(c, r);
        nodes.insert(nodes.end(), rn.begin(), rn.end());
      }
      if (fill_nodes(state, job, members, nodes, out)) return true;
    }
    // Level 4: the whole cluster, fewest nodes first.
    std::vector<NodeId> all(c.nodes().size());
    std::iota(all.begin(), all.end(), 0u);
    return fill_nodes(state, job, members, all, out);
  }

 private:
  static std::vector<NodeId> rack_nodes(const Cluster& c, RackId r) {
    std::vector<NodeId> v(c.racks()[r].num_nodes);
    std::iota(v.begin(), v.end(), c.racks()[r].first_node);
    return v;
  }
  // Fills the given nodes, those that host the most members first (fewest nodes spanned);
  // all-or-nothing.
  static bool fill_nodes(ClusterState& state, const JobSpec& job, int32_t members,
                         std::vector<NodeId> nodes, Allocation& out) {
    begin(job, out);
    std::vector<std::pair<int32_t, NodeId>> cap;
    cap.reserve(nodes.size());
    int64_t total = 0;
    for (NodeId n : nodes) {
      if (!type_allowed(job.allowed_types, state.cluster().node(n).gpu_type)) continue;
      const int32_t k = state.capacity_for(n, job.demand);
      if (k > 0) {
        cap.emplace_back(k, n);
        total += k;
      }
    }
    if (total < members) return false;
    // Most capacity first; among nodes that could take all remaining, the tightest is chosen
    // below, so the gang does not break up a larger free node than it needs.
    std::stable_sort(cap.begin(), cap.end(),
                     [](const auto& a, const auto& b) { return a.first > b.first; });
    int32_t remaining = members;
    std::vector<bool> used(cap.size(), false);
    while (remaining > 0) {
      size_t pick = cap.size();
      for (size_t i = 0; i < cap.size(); ++i) {  // tightest node that takes all remaining
        if (!used[i] && cap[i].first >= remaining) pick = i;
      }
      if (pick == cap.size()) {
        for (size_t i = 0; i < cap.size() && pick == cap.size(); ++i) {
          if (!used[i]) pick = i;
        }
      }
      if (pick == cap.size()) return fail(state, out);
      used[pick] = true;
      for (int32_t k = std::min(remaining, cap[pick].first); k > 0; --k, --remaining) {
        if (!place_member(state, cap[pick].second, job, true, out)) return fail(state, out);
      }
    }
    return true;
  }

  BestFit bestfit_;
};

class Random final : public PlacementScorer {
 public:
  std::string_view name() const override { return "random"; }
  bool place(ClusterState& state, const JobSpec& job, int32_t members, Rng& rng,
             Allocation& out) const override {
    begin(job, out);
    const auto types = allowed_types(state, job);
    const MemberDemand& d = job.demand;
    const Cluster& c = state.cluster();
    std::vector<NodeId> candidates;
    for (int32_t m = 0; m < members; ++m) {
      candidates.clear();
      if (d.gpus > 0 && d.whole_gpus()) {
        for (int k = d.gpus; k <= max_k(state); ++k) {
          for (GpuTypeId t : types) {
            for (NodeId n : state.bucket(t, k)) {
              if (state.can_host(n, d)) candidates.push_back(n);
            }
          }
        }
      } else {
        for (NodeId n = 0; n < c.nodes().size(); ++n) {
          const bool type_ok = d.gpus == 0 || type_allowed(job.allowed_types, c.node(n).gpu_type);
          if (type_ok && state.can_host(n, d)) candidates.push_back(n);
        }
      }
      if (candidates.empty()) return fail(state, out);
      // Bucket order depends on history; sort so the draw depends only on the seed and state.
      std::sort(candidates.begin(), candidates.end());
      const NodeId n = candidates[rng.below(candidates.size())];
      if (!place_member(state, n, job, rng.below(2) == 0, out)) return fail(state, out);
    }
    return true;
  }
};

}  // namespace

std::unique_ptr<PlacementScorer> make_bestfit_scorer() {
  return std::make_unique<BestFit>();
}
std::unique_ptr<PlacementScorer> make_spread_scorer() {
  return std::make_unique<Spread>();
}
std::unique_ptr<PlacementScorer> make_topology_scorer() {
  return std::make_unique<Topology>();
}
std::unique_ptr<PlacementScorer> make_random_scorer() {
  return std::make_unique<Random>();
}

std::unique_ptr<PlacementScorer> make_scorer(std::string_view name) {
  if (name == "bestfit") return make_bestfit_scorer();
  if (name == "spread") return make_spread_scorer();
  if (name == "topology") return make_topology_scorer();
  if (name == "random") return make_random_scorer();
  return nullptr;
}

std::vector<std::string> scorer_names() {
  return {"bestfit", "spread", "topology", "random"};
}

}  // namespace tessera
