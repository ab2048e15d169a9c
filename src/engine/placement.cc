#include "engine/placement.h"

#include <algorithm>
#include <climits>
#include <numeric>
#include <span>
#include <utility>

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

// A contiguous range of node ids: one subtree of the topology (nodes of a rack, and racks of
// a spine, are contiguous), or the whole cluster; and the job's node restriction
// (JobSpec::eligible_nodes, null: none). A member may go to node n only if eligible(n).
struct NodeRange {
  NodeId lo = 0, hi = 0;
  const NodeSet* only = nullptr;
  // Whether n lies in the range (whatever the restriction).
  bool contains(NodeId n) const { return n >= lo && n < hi; }
  // Whether n is in the range and allowed by the restriction: one branch on a null pointer
  // for unrestricted jobs.
  bool eligible(NodeId n) const { return contains(n) && (only == nullptr || only->contains(n)); }
};

NodeRange all_nodes(const Cluster& c, const JobSpec& job) {
  return {0, static_cast<NodeId>(c.nodes().size()), job.eligible_nodes.get()};
}

// The racks [first, end) wholly inside r (nodes of a rack, and racks of a spine, are
// contiguous), and the spines wholly inside racks [lo, hi).
std::pair<RackId, RackId> racks_within(const Cluster& c, NodeRange r) {
  if (r.lo >= r.hi) return {0, 0};
  RackId first = c.node(r.lo).rack;
  if (c.racks()[first].first_node < r.lo) ++first;
  RackId end = c.node(r.hi - 1).rack;
  const Rack& last = c.racks()[end];
  if (last.first_node + last.num_nodes <= r.hi) ++end;
  return {first, std::max(first, end)};
}
std::pair<SpineId, SpineId> spines_within(const Cluster& c, RackId lo, RackId hi) {
  if (lo >= hi) return {0, 0};
  SpineId first = c.racks()[lo].spine;
  if (c.spines()[first].first_rack < lo) ++first;
  SpineId end = c.racks()[hi - 1].spine;
  const Spine& last = c.spines()[end];
  if (last.first_rack + last.num_racks <= hi) ++end;
  return {first, std::max(first, end)};
}

// Calls f(n) for every eligible node of r, ascending, until it returns true; returns that node,
// or kNoId. With a restriction it walks the set's members, not the whole range.
template <class F>
NodeId find_eligible(NodeRange r, F&& f) {
  if (r.only == nullptr) {
    for (NodeId n = r.lo; n < r.hi; ++n) {
      if (f(n)) return n;
    }
    return kNoId;
  }
  for (NodeId n = r.only->next(r.lo); n != kNoId && n < r.hi; n = r.only->next(n + 1)) {
    if (f(n)) return n;
  }
  return kNoId;
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

// Whether node n of range r may be used: kRestricted is r.only != nullptr, so that the scans
// below branch once per call on the restriction, not once per node, for unrestricted jobs.
template <bool kRestricted>
bool usable(NodeRange r, NodeId n) {
  if constexpr (kRestricted) {
    return r.eligible(n);
  } else {
    return r.contains(n);
  }
}

template <bool kRestricted>
NodeId scan_buckets_in(const ClusterState& state, const std::vector<GpuTypeId>& types,
                       const MemberDemand& d, int lo, int hi, bool ascending, NodeRange r) {
  for (int step = 0; step <= hi - lo; ++step) {
    const int k = ascending ? lo + step : hi - step;
    for (GpuTypeId t : types) {
      for (NodeId n : state.bucket(t, k)) {
        if (usable<kRestricted>(r, n) && state.can_host(n, d)) return n;
      }
    }
  }
  return kNoId;
}

// The restricted scans stay out of line, so that the unrestricted one inlines into its callers
// as it did before restrictions existed.
[[gnu::noinline]] NodeId scan_buckets_restricted(const ClusterState& state,
                                                 const std::vector<GpuTypeId>& types,
                                                 const MemberDemand& d, int lo, int hi,
                                                 bool ascending, NodeRange r) {
  return scan_buckets_in<true>(state, types, d, lo, hi, ascending, r);
}

// For whole-GPU members: the first eligible node (over allowed types) in buckets k in [lo, hi]
// scanned in the given direction that can host one member.
inline NodeId scan_buckets(const ClusterState& state, const std::vector<GpuTypeId>& types,
                           const MemberDemand& d, int lo, int hi, bool ascending, NodeRange r) {
  return r.only == nullptr ? scan_buckets_in<false>(state, types, d, lo, hi, ascending, r)
                           : scan_buckets_restricted(state, types, d, lo, hi, ascending, r);
}

template <bool kRestricted>
NodeId scan_partial_in(const ClusterState& state, const std::vector<GpuTypeId>& types,
                       const MemberDemand& d, bool pack, NodeRange r) {
  NodeId best = kNoId;
  int32_t best_free = 0;
  for (GpuTypeId t : types) {
    for (NodeId n : state.partial_nodes(t)) {
      if (!usable<kRestricted>(r, n) || !state.can_host(n, d)) continue;
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

// For fractional members: the eligible node with the fullest (pack) or emptiest (spread)
// partially used GPU that fits; kNoId when no partial GPU fits.
[[gnu::noinline]] NodeId scan_partial_restricted(const ClusterState& state,
                                                 const std::vector<GpuTypeId>& types,
                                                 const MemberDemand& d, bool pack, NodeRange r) {
  return scan_partial_in<true>(state, types, d, pack, r);
}
inline NodeId scan_partial(const ClusterState& state, const std::vector<GpuTypeId>& types,
                           const MemberDemand& d, bool pack, NodeRange r) {
  return r.only == nullptr ? scan_partial_in<false>(state, types, d, pack, r)
                           : scan_partial_restricted(state, types, d, pack, r);
}

int max_k(const ClusterState& state) {
  return state.cluster().max_node_gpus();
}

// Members that need no GPU (CPU-only pods) go to the first node with room.
NodeId scan_cpu_only(const ClusterState& state, const MemberDemand& d, NodeRange r) {
  return find_eligible(r, [&](NodeId n) { return state.can_host(n, d); });
}

// The subtrees of `level` as node ranges: one per node for kNvlDomain and kNode, one per rack
// or spine, or the whole cluster.
std::vector<NodeRange> subtrees(const Cluster& c, Level level) {
  std::vector<NodeRange> out;
  if (level <= Level::kNode) {
    for (NodeId n = 0; n < c.nodes().size(); ++n) out.push_back({n, n + 1});
  } else if (level == Level::kRack) {
    for (const Rack& r : c.racks()) out.push_back({r.first_node, r.first_node + r.num_nodes});
  } else if (level == Level::kSpine) {
    for (const Spine& sp : c.spines()) {
      if (sp.num_racks == 0) continue;
      const Rack& last = c.racks()[sp.first_rack + sp.num_racks - 1];
      out.push_back({c.racks()[sp.first_rack].first_node, last.first_node + last.num_nodes});
    }
  } else {
    out.push_back({0, static_cast<NodeId>(c.nodes().size())});
  }
  return out;
}

// Free whole GPUs of the job's allowed types on the eligible nodes of a range.
int64_t free_in(const ClusterState& state, const JobSpec& job, NodeRange r) {
  int64_t free = 0;
  find_eligible(r, [&](NodeId n) {
    if (type_allowed(job.allowed_types, state.cluster().node(n).gpu_type)) {
      free += state.node_free_whole(n);
    }
    return false;
  });
  return free;
}

// The NVLink domain of node n (its first GPU) with the fewest free whole GPUs that still holds
// `need`, and that free count; kNoId when none does.
std::pair<GpuId, int> tightest_domain(const ClusterState& state, NodeId n, int64_t need) {
  const Node& node = state.cluster().node(n);
  const int dom = node.nvl_domain_size();
  GpuId best = kNoId;
  int best_free = INT32_MAX;
  if (dom <= 0 || need > dom) return {best, best_free};
  for (GpuId s = node.first_gpu; s < node.first_gpu + node.num_gpus; s += dom) {
    int free = 0;
    for (GpuId g = s; g < std::min<GpuId>(s + dom, node.first_gpu + node.num_gpus); ++g) {
      free += state.gpu_free(g) == kMilliPerGpu;
    }
    if (free >= need && free < best_free) {
      best = s;
      best_free = free;
    }
  }
  return {best, best_free};
}

// Places every member of a whole-GPU gang inside the NVLink domain starting at GPU `first` of
// node n; all-or-nothing.
bool place_in_domain(ClusterState& state, const JobSpec& job, int32_t members, NodeId n,
                     GpuId first, Allocation& out) {
  const MemberDemand& d = job.demand;
  begin(job, out);
  if (state.capacity_for(n, d) < members) return false;
  const Node& node = state.cluster().node(n);
  const GpuId end = std::min<GpuId>(first + node.nvl_domain_size(), node.first_gpu + node.num_gpus);
  std::vector<GpuId> free;
  for (GpuId g = first; g < end; ++g) {
    if (state.gpu_free(g) == kMilliPerGpu) free.push_back(g);
  }
  if (static_cast<int64_t>(free.size()) < int64_t{members} * d.gpus) return false;
  size_t next = 0;
  for (int32_t m = 0; m < members; ++m) {
    const size_t before = out.shares.size();
    for (int32_t k = 0; k < d.gpus; ++k) out.shares.push_back({free[next++], kMilliPerGpu});
    state.allocate_member(n, std::span(out.shares).subspan(before), d.cpu_milli, d.mem_mib);
    out.member_node.push_back(n);
  }
  return true;
}

// The tightest NVLink domain on an eligible node of `r` (of an allowed type, with CPU and
// memory for the gang) that holds the whole gang, then places it there. False (state
// unchanged) when none does.
bool place_in_tightest_domain(ClusterState& state, const JobSpec& job, int32_t members, NodeRange r,
                              Allocation& out) {
  const MemberDemand& d = job.demand;
  const int64_t need = int64_t{members} * d.gpus;
  if (need > max_k(state)) return false;
  NodeId best_node = kNoId;
  GpuId best_first = kNoId;
  int64_t best_free = INT32_MAX;
  // A node with k free GPUs has at most `slack` of them outside any one domain, so its
  // tightest domain that fits has at least max(need, k - slack) free: scanning nodes by free
  // GPUs ascending, stop once that bound reaches the best found (at the first fit when every
  // node is a single NVLink domain). The cluster's slack bounds the range's (kept by the
  // cluster, not scanned per gang: the scan was O(nodes) per gang); a looser bound
  // only scans further, and what it scans cannot beat the best found, so the choice is the same.
  const int64_t slack = state.cluster().max_nvl_slack();
  const auto types = allowed_types(state, job);
  for (int k = static_cast<int>(need); k <= max_k(state); ++k) {
    if (std::max<int64_t>(need, k - slack) >= best_free) break;
    for (GpuTypeId t : types) {
      for (NodeId n : state.bucket(t, k)) {
        if (std::max<int64_t>(need, k - slack) >= best_free) break;
        if (!r.eligible(n) || state.capacity_for(n, d) < members) continue;
        const auto [first, free] = tightest_domain(state, n, need);
        if (first != kNoId && free < best_free) {
          best_node = n;
          best_first = first;
          best_free = free;
        }
      }
    }
  }
  if (best_node == kNoId) return false;
  return place_in_domain(state, job, members, best_node, best_first, out);
}

using Candidates = std::vector<std::pair<int64_t, NodeRange>>;  // (free GPUs, subtree)

// A scorer restricted to a range of nodes; place() honours JobSpec::max_span by trying the
// subtrees of that level, in the scorer's own order, until one hosts the gang.
class RangeScorer : public PlacementScorer {
 public:
  bool place(ClusterState& state, const JobSpec& job, int32_t members, Rng& rng,
             Allocation& out) const final {
    const Cluster& c = state.cluster();
    if (job.max_span == Level::kCluster) {
      return place_in(state, job, members, rng, out, all_nodes(c, job));
    }
    const MemberDemand& d = job.demand;
    const bool whole = d.gpus > 0 && d.whole_gpus();
    const int64_t need = whole ? int64_t{members} * d.gpus : 0;
    const NodeSet* only = job.eligible_nodes.get();
    Candidates cands;
    for (NodeRange r : subtrees(c, job.max_span)) {
      r.only = only;
      if (only != nullptr && only->count_in(r.lo, r.hi) == 0) continue;  // no eligible node
      const int64_t free = d.gpus > 0 ? free_in(state, job, r) : 0;
      if (free >= need) cands.emplace_back(free, r);
    }
    order(cands, rng);
    for (const auto& [free, r] : cands) {
      if (job.max_span == Level::kNvlDomain && whole) {
        // Every member inside one NVLink domain of this node.
        if (place_in_tightest_domain(state, job, members, r, out)) return true;
      } else if (place_in(state, job, members, rng, out, r)) {
        return true;
      }
    }
    out = Allocation{};
    return false;
  }

  // Places the gang on eligible nodes of `r` only (r.only is the job's eligible_nodes); same
  // contract as place().
  virtual bool place_in(ClusterState& state, const JobSpec& job, int32_t members, Rng& rng,
                        Allocation& out, NodeRange r) const = 0;

 protected:
  // The order in which subtrees are tried for a span-constrained gang: tightest first.
  virtual void order(Candidates& cands, Rng&) const {
    std::stable_sort(cands.begin(), cands.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
  }
};

class BestFit final : public RangeScorer {
 public:
  std::string_view name() const override { return "bestfit"; }
  bool place_in(ClusterState& state, const JobSpec& job, int32_t members, Rng&, Allocation& out,
                NodeRange r) const override {
    begin(job, out);
    const auto types = allowed_types(state, job);
    const MemberDemand& d = job.demand;
    int32_t remaining = members;
    while (remaining > 0) {
      NodeId n = kNoId;
      if (d.gpus == 0) {
        n = scan_cpu_only(state, d, r);
      } else if (d.whole_gpus()) {
        // Tightest node that takes every remaining member...
        const int64_t want = int64_t{remaining} * d.gpus;
        if (want <= max_k(state)) {
          n = scan_buckets(state, types, d, static_cast<int>(want), max_k(state), true, r);
        }
        // ...else the node that takes the most (fewest nodes spanned).
        if (n == kNoId) n = scan_buckets(state, types, d, d.gpus, max_k(state), false, r);
      } else {
        n = scan_partial(state, types, d, /*pack=*/true, r);
        if (n == kNoId) n = scan_buckets(state, types, d, 1, max_k(state), true, r);
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

class Spread final : public RangeScorer {
 public:
  std::string_view name() const override { return "spread"; }
  bool place_in(ClusterState& state, const JobSpec& job, int32_t members, Rng&, Allocation& out,
                NodeRange r) const override {
    begin(job, out);
    const auto types = allowed_types(state, job);
    const MemberDemand& d = job.demand;
    for (int32_t m = 0; m < members; ++m) {
      NodeId n = kNoId;
      if (d.gpus == 0) {
        n = scan_cpu_only(state, d, r);
      } else if (d.whole_gpus()) {
        n = scan_buckets(state, types, d, d.gpus, max_k(state), false, r);
      } else {
        n = scan_buckets(state, types, d, 1, max_k(state), false, r);
        if (n == kNoId) n = scan_partial(state, types, d, /*pack=*/false, r);
      }
      if (n == kNoId || !place_member(state, n, job, false, out)) return fail(state, out);
    }
    return true;
  }

 protected:
  // Emptiest subtree first.
  void order(Candidates& cands, Rng&) const override {
    std::stable_sort(cands.begin(), cands.end(),
                     [](const auto& a, const auto& b) { return a.first > b.first; });
  }
};

// Levels in order of the all-reduce cost of a ring confined to them (comm_cost.h): one NVLink
// domain, one node, one rack, one spine, the cluster. The gang goes to the innermost level
// that can host it, best fit among the subtrees of that level, so that small gangs fill
// partly used domains, nodes and racks and whole ones stay free for larger gangs.
class Topology final : public RangeScorer {
 public:
  std::string_view name() const override { return "topology"; }
  bool place_in(ClusterState& state, const JobSpec& job, int32_t members, Rng& rng, Allocation& out,
                NodeRange range) const override {
    const MemberDemand& d = job.demand;
    // CPU-only and fractional jobs have no topology to speak of, and a single member goes to
    // the tightest node, its GPUs to the fullest NVLink domain there that fits (pick_gpus):
    // pack them as bestfit does, which keeps the hot path of 1-GPU jobs cheap.
    if (d.gpus == 0 || !d.whole_gpus() || members == 1) {
      return bestfit_.place_in(state, job, members, rng, out, range);
    }
    const Cluster& c = state.cluster();
    const int64_t need = int64_t{members} * d.gpus;
    // Level 0: one NVLink domain, the fullest that holds the gang.
    if (place_in_tightest_domain(state, job, members, range, out)) return true;
    // Level 1: one node (best fit).
    if (need <= max_k(state)) {
      const auto types = allowed_types(state, job);
      MemberDemand whole = d;
      whole.gpus = static_cast<int32_t>(need);
      whole.cpu_milli = d.cpu_milli * members;
      whole.mem_mib = d.mem_mib * members;
      const NodeId n =
          scan_buckets(state, types, whole, static_cast<int>(need), max_k(state), true, range);
      if (n != kNoId) return fill_nodes(state, job, members, std::vector<NodeId>{n}, out);
    }
    // Levels 2 and 3 consider only the racks and spines wholly inside the range: a gang whose
    // span is one node or rack must not spill over into the rest of its rack or spine. The rack
    // and spine aggregates count every free GPU, an upper bound on what the job may use (its GPU
    // types) that fill_nodes checks exactly; a job restricted to a node set ranks them by what
    // is free on its eligible nodes instead.
    // Level 2: one rack, the one with the fewest free GPUs that hosts the gang.
    std::vector<int64_t> eligible_free;  // restricted: free on eligible nodes, by rack/spine id
    std::vector<RackId> racks;
    if (range.only != nullptr) eligible_free.assign(c.racks().size(), 0);
    const auto [rack_lo, rack_hi] = racks_within(c, range);
    for (RackId r = rack_lo; r < rack_hi; ++r) {
      const Rack& rk = c.racks()[r];
      if (rk.num_nodes == 0) continue;
      if (range.only == nullptr) {
        if (state.rack_free_whole(r) >= need) racks.push_back(r);
        continue;
      }
      eligible_free[r] =
          free_in(state, job, {rk.first_node, rk.first_node + rk.num_nodes, range.only});
      if (eligible_free[r] >= need) racks.push_back(r);
    }
    if (range.only == nullptr) {
      std::stable_sort(racks.begin(), racks.end(), [&](RackId a, RackId b) {
        return state.rack_free_whole(a) < state.rack_free_whole(b);
      });
    } else {
      std::stable_sort(racks.begin(), racks.end(),
                       [&](RackId a, RackId b) { return eligible_free[a] < eligible_free[b]; });
    }
    for (RackId r : racks) {
      if (fill_nodes(state, job, members, rack_nodes(c, r), out)) return true;
    }
    // Level 3: one spine.
    std::vector<SpineId> spines;
    if (range.only != nullptr) eligible_free.assign(c.spines().size(), 0);
    const auto [spine_lo, spine_hi] = spines_within(c, rack_lo, rack_hi);
    for (SpineId s = spine_lo; s < spine_hi; ++s) {
      const Spine& sp = c.spines()[s];
      if (sp.num_racks == 0) continue;
      if (range.only == nullptr) {
        if (state.spine_free_whole(s) >= need) spines.push_back(s);
        continue;
      }
      const Rack& last = c.racks()[sp.first_rack + sp.num_racks - 1];
      eligible_free[s] = free_in(
          state, job,
          {c.racks()[sp.first_rack].first_node, last.first_node + last.num_nodes, range.only});
      if (eligible_free[s] >= need) spines.push_back(s);
    }
    if (range.only == nullptr) {
      std::stable_sort(spines.begin(), spines.end(), [&](SpineId a, SpineId b) {
        return state.spine_free_whole(a) < state.spine_free_whole(b);
      });
    } else {
      std::stable_sort(spines.begin(), spines.end(),
                       [&](SpineId a, SpineId b) { return eligible_free[a] < eligible_free[b]; });
    }
    for (SpineId s : spines) {
      std::vector<NodeId> nodes;
      const Spine& sp = c.spines()[s];
      for (RackId r = sp.first_rack; r < sp.first_rack + sp.num_racks; ++r) {
        auto rn = rack_nodes(c, r);
        nodes.insert(nodes.end(), rn.begin(), rn.end());
      }
      if (fill_nodes(state, job, members, nodes, out)) return true;
    }
    // Level 4: the whole range (its eligible nodes), fewest nodes first.
    std::vector<NodeId> all;
    if (range.only == nullptr) {
      all.resize(range.hi - range.lo);
      std::iota(all.begin(), all.end(), range.lo);
    } else {
      find_eligible(range, [&](NodeId n) {
        all.push_back(n);
        return false;
      });
    }
    return fill_nodes(state, job, members, all, out);
  }

 private:
  static std::vector<NodeId> rack_nodes(const Cluster& c, RackId r) {
    std::vector<NodeId> v(c.racks()[r].num_nodes);
    std::iota(v.begin(), v.end(), c.racks()[r].first_node);
    return v;
  }
  // Fills the given nodes (those of an allowed type the job is eligible for), those that host
  // the most members first (fewest nodes spanned); all-or-nothing.
  static bool fill_nodes(ClusterState& state, const JobSpec& job, int32_t members,
                         std::vector<NodeId> nodes, Allocation& out) {
    begin(job, out);
    std::vector<std::pair<int32_t, NodeId>> cap;
    cap.reserve(nodes.size());
    int64_t total = 0;
    const NodeSet* only = job.eligible_nodes.get();
    for (NodeId n : nodes) {
      if (!type_allowed(job.allowed_types, state.cluster().node(n).gpu_type)) continue;
      if (!node_eligible(only, n)) continue;
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

class Random final : public RangeScorer {
 public:
  std::string_view name() const override { return "random"; }
  bool place_in(ClusterState& state, const JobSpec& job, int32_t members, Rng& rng, Allocation& out,
                NodeRange r) const override {
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
              if (r.eligible(n) && state.can_host(n, d)) candidates.push_back(n);
            }
          }
        }
      } else {
        find_eligible(r, [&](NodeId n) {
          const bool type_ok = d.gpus == 0 || type_allowed(job.allowed_types, c.node(n).gpu_type);
          if (type_ok && state.can_host(n, d)) candidates.push_back(n);
          return false;
        });
      }
      if (candidates.empty()) return fail(state, out);
      // Bucket order depends on history; sort so the draw depends only on the seed and state.
      std::sort(candidates.begin(), candidates.end());
      const NodeId n = candidates[rng.below(candidates.size())];
      if (!place_member(state, n, job, rng.below(2) == 0, out)) return fail(state, out);
    }
    return true;
  }

 protected:
  // A seeded random order (Fisher-Yates).
  void order(Candidates& cands, Rng& rng) const override {
    for (size_t i = cands.size(); i > 1; --i) std::swap(cands[i - 1], cands[rng.below(i)]);
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
