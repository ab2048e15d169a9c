#include "engine/cycle_session.h"

#include <algorithm>

#include "engine/gates/admission_gate.h"
#include "engine/queue_order.h"

namespace tessera {

namespace {

// Quota admission needs usage, reclaim and the fair order need entitlements; a cycle that
// needs neither skips computing them.
SharesNeeded shares_needed(const Snapshot& snap, const Policy& policy) {
  const bool limits = snap.queues != nullptr && has_limits(*snap.queues);
  return limits || policy.reclaim || policy.order->reads_shares() ? SharesNeeded::kFull
                                                                  : SharesNeeded::kTreeOnly;
}

}  // namespace

size_t ShapeHash::operator()(const ShapeKey& k) const {
  size_t h = std::hash<int64_t>()(k.demand.gpus * 1009 + k.demand.gpu_milli);
  h = h * 31 + std::hash<int64_t>()(k.demand.cpu_milli ^ (k.demand.mem_mib << 20));
  h = h * 31 + std::hash<int64_t>()(k.min_members * 65537 + k.max_members);
  h = h * 31 + std::hash<uint64_t>()(k.types);
  h = h * 31 + static_cast<size_t>(k.span);
  h = h * 31 + std::hash<uint64_t>()(k.reserved_access);
  return h * 31 + restriction_hash(k.nodes);
}

ShapeKey shape_of(const JobSpec& job) {
  return ShapeKey{job.demand,
                  job.min_members,
                  job.max_members,
                  job.allowed_types,
                  job.max_span,
                  job.eligible_nodes.get(),
                  0};
}

ShapeKey shape_of(const GangShape& g) {
  const MemberDemand demand{g.gpus, g.gpu_milli, g.cpu_milli, g.mem_mib};
  return ShapeKey{demand,
                  g.min_members,
                  g.max_members,
                  g.types,
                  static_cast<Level>(g.span),
                  reinterpret_cast<const NodeSet*>(g.nodes),
                  0};
}

int64_t milli_on_types(const Cluster& c, const Allocation& a, GpuTypeMask mask,
                       const NodeSet* only) {
  int64_t m = 0;
  for (const GpuShare& s : a.shares) {
    const NodeId n = c.node_of_gpu(s.gpu);
    if (type_allowed(mask, c.node(n).gpu_type) && node_eligible(only, n)) m += s.milli;
  }
  return m;
}

bool fits(const ClusterState& state, const Allocation& a, const ReservedGpus* held) {
  // Shares of one allocation are on distinct GPUs per member, but two members may share a GPU
  // (fractional gangs), so accumulate per GPU before comparing.
  std::vector<std::pair<GpuId, int32_t>> need;
  for (const GpuShare& s : a.shares) need.emplace_back(s.gpu, s.milli);
  std::sort(need.begin(), need.end());
  for (size_t i = 0; i < need.size();) {
    int32_t sum = 0;
    size_t j = i;
    for (; j < need.size() && need[j].first == need[i].first; ++j) sum += need[j].second;
    const GpuId g = need[i].first;
    if (state.gpu_free(g) + (held != nullptr ? held->held_on(g) : 0) < sum) return false;
    i = j;
  }
  std::vector<std::pair<NodeId, int32_t>> nodes;
  for (NodeId n : a.member_node) nodes.emplace_back(n, 1);
  std::sort(nodes.begin(), nodes.end());
  for (size_t i = 0; i < nodes.size();) {
    int64_t k = 0;
    size_t j = i;
    for (; j < nodes.size() && nodes[j].first == nodes[i].first; ++j) ++k;
    if (state.node_free_cpu(nodes[i].first) < a.cpu_milli_per_member * k ||
        state.node_free_mem(nodes[i].first) < a.mem_mib_per_member * k) {
      return false;
    }
    i = j;
  }
  return true;
}

CycleSession::CycleSession(const Snapshot& snap_in, const Policy& policy_in)
    : snap(snap_in),
      policy(policy_in),
      cluster(snap_in.state->cluster()),
      own_scratch_(snap_in.scratch == nullptr ? std::optional<ClusterState>(*snap_in.state)
                                              : std::nullopt),
      scratch(snap_in.scratch != nullptr ? *snap_in.scratch : *own_scratch_),
      rng(mix_seed(policy_in.seed, snap_in.cycle)),
      reserved(snap_in.reservations, snap_in.now, scratch),
      shares(compute_queue_shares(snap_in, shares_needed(snap_in, policy_in))),
      tree(*shares.tree),
      live_(shares.usage) {
  init_type_usage();
  // Last: from here on the destructor gives the caller's ledger back.
  if (snap.scratch != nullptr) scratch.start_journal();
  reserved.close();  // holds every reserved GPU's free capacity (journaled)
}

CycleSession::~CycleSession() {
  if (snap.scratch != nullptr) scratch.undo_journal();
}

void CycleSession::add_usage(QueueId leaf, const JobSpec& job, const Allocation& a, int sign) {
  const Amounts amt = fair_amounts_of(tree.settings(), cluster, job, a);
  for (QueueId q = leaf; q != kNoId; q = tree.queue(q).parent) {
    for (size_t d = 0; d < kNumDims; ++d) live_[q][d] += sign * amt[d];
    const auto& types = tree.queue(q).by_type;
    for (size_t k = 0; k < types.size(); ++k) {
      type_live_[q][k] += sign * milli_on_types(cluster, a, GpuTypeMask{1} << types[k].type);
    }
  }
}

void CycleSession::init_type_usage() {
  type_live_.resize(tree.size());
  for (QueueId q = 0; q < tree.size(); ++q) {
    type_live_[q].assign(tree.queue(q).by_type.size(), 0);
    has_type_quotas_ = has_type_quotas_ || !tree.queue(q).by_type.empty();
  }
  if (!has_type_quotas_) return;
  for (size_t i = 0; i < snap.running.size(); ++i) {
    for (QueueId q = running_leaf(i); q != kNoId; q = tree.queue(q).parent) {
      const auto& types = tree.queue(q).by_type;
      for (size_t k = 0; k < types.size(); ++k) {
        type_live_[q][k] +=
            milli_on_types(cluster, *snap.running[i].alloc, GpuTypeMask{1} << types[k].type);
      }
    }
  }
}

QueueId CycleSession::over_limit(QueueId leaf, const Amounts& need) const {
  return first_over_limit(tree, live_, leaf, need);
}

QueueId CycleSession::over_type_limit(QueueId leaf, const Allocation& a) const {
  for (QueueId q = leaf; q != kNoId; q = tree.queue(q).parent) {
    const auto& types = tree.queue(q).by_type;
    for (size_t k = 0; k < types.size(); ++k) {
      if (type_live_[q][k] + milli_on_types(cluster, a, GpuTypeMask{1} << types[k].type) >
          types[k].limit_milli) {
        return q;
      }
    }
  }
  return kNoId;
}

QueueId CycleSession::over_share_below(QueueId leaf, QueueId top, const Amounts& need) const {
  return first_over_share(tree, shares, live_, leaf, top, need);
}

QueueId CycleSession::victim_side(QueueId reclaimer_leaf, QueueId victim_leaf) const {
  QueueId v = victim_leaf;
  while (v != kNoId) {
    const QueueId parent = tree.queue(v).parent;
    bool common = false;
    for (QueueId a = reclaimer_leaf; a != kNoId; a = tree.queue(a).parent) {
      common = common || a == parent;
    }
    if (common) return v;
    v = parent;
  }
  return kRootQueue;
}

bool CycleSession::in_subtree(QueueId leaf, QueueId q) const {
  for (QueueId a = leaf; a != kNoId; a = tree.queue(a).parent) {
    if (a == q) return true;
  }
  return false;
}

QueueId CycleSession::running_leaf(size_t i) const {
  if (running_leaf_.empty()) {
    running_leaf_.reserve(snap.running.size());
    for (const RunningJob& r : snap.running)
      running_leaf_.push_back(shares.leaf_of(r.spec->tenant));
  }
  return running_leaf_[i];
}

void CycleSession::set_evicted(size_t i) {
  if (evicted_.empty()) evicted_.assign(snap.running.size(), false);
  evicted_[i] = true;
}

void CycleSession::set_resized(size_t i, int32_t members) {
  if (resized_.empty()) resized_.assign(snap.running.size(), 0);
  resized_[i] = members;
}

void CycleSession::toggle_running(size_t i, const Allocation& a, int sign) {
  if (sign < 0) {
    scratch.release(a);
  } else {
    reserved.release_on(a);
    scratch.allocate(a);
  }
  if (reserved.any()) reserved.hold_freed();
  add_usage(running_leaf(i), *snap.running[i].spec, a, sign);
}

int64_t CycleSession::sum_free_on(GpuTypeMask types, const NodeSet& only) const {
  int64_t free = 0;
  const auto num_nodes = static_cast<NodeId>(cluster.nodes().size());
  only.for_each([&](NodeId n) {
    if (n >= num_nodes) return;
    const Node& node = cluster.node(n);
    if (!type_allowed(types, node.gpu_type)) return;
    for (GpuId g = node.first_gpu; g < node.first_gpu + node.num_gpus; ++g) {
      free += scratch.gpu_free(g);
    }
  });
  return free;
}

int64_t CycleSession::free_on_nodes(GpuTypeMask types, const NodeSet& only) {
  const auto [it, fresh] = free_on_nodes_.try_emplace({&only, types}, 0);
  if (fresh) it->second = sum_free_on(types, only);
  return it->second;
}

}  // namespace tessera
