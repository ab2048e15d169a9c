#include "model/cluster_state.h"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>

namespace tessera {

ClusterState::ClusterState(const Cluster& cluster)
    : cluster_(&cluster), max_k_(cluster.max_node_gpus()) {
  const auto& nodes = cluster.nodes();
  const size_t types = cluster.gpu_types().size();
  gpu_free_.assign(cluster.num_gpus(), kMilliPerGpu);
  node_free_whole_.resize(nodes.size());
  node_partial_gpus_.assign(nodes.size(), 0);
  node_free_cpu_.resize(nodes.size());
  node_free_mem_.resize(nodes.size());
  rack_free_whole_.assign(cluster.racks().size(), 0);
  spine_free_whole_.assign(cluster.spines().size(), 0);
  type_free_whole_.assign(types, 0);
  type_free_milli_.assign(types, 0);
  buckets_.assign(types * (max_k_ + 1), {});
  partial_.assign(types, {});
  for (NodeId n = 0; n < nodes.size(); ++n) {
    const Node& node = nodes[n];
    node_free_whole_[n] = node.num_gpus;
    node_free_cpu_[n] = node.cpu_milli;
    node_free_mem_[n] = node.mem_mib;
    rack_free_whole_[node.rack] += node.num_gpus;
    spine_free_whole_[cluster.racks()[node.rack].spine] += node.num_gpus;
    type_free_whole_[node.gpu_type] += node.num_gpus;
    type_free_milli_[node.gpu_type] += int64_t{node.num_gpus} * kMilliPerGpu;
    buckets_[bucket_index(node.gpu_type, node.num_gpus)].push_back(n);  // ascending n
  }
}

uint32_t ClusterState::free_whole_matching(GpuTypeMask mask) const {
  uint32_t total = 0;
  for (size_t t = 0; t < type_free_whole_.size(); ++t) {
    if (type_allowed(mask, static_cast<GpuTypeId>(t))) total += type_free_whole_[t];
  }
  return total;
}

int64_t ClusterState::free_milli_matching(GpuTypeMask mask) const {
  int64_t total = 0;
  for (size_t t = 0; t < type_free_milli_.size(); ++t) {
    if (type_allowed(mask, static_cast<GpuTypeId>(t))) total += type_free_milli_[t];
  }
  return total;
}

int32_t ClusterState::capacity_for(NodeId n, const MemberDemand& d) const {
  int32_t by_cpu =
      d.cpu_milli > 0 ? static_cast<int32_t>(node_free_cpu_[n] / d.cpu_milli) : INT32_MAX;
  int32_t by_mem = d.mem_mib > 0 ? static_cast<int32_t>(node_free_mem_[n] / d.mem_mib) : INT32_MAX;
  int32_t by_gpu;
  if (d.gpus == 0) {
    by_gpu = INT32_MAX;
  } else if (d.whole_gpus()) {
    by_gpu = node_free_whole_[n] / d.gpus;
  } else {
    // Shares: each GPU hosts floor(free / milli) shares of this size.
    const Node& node = cluster_->node(n);
    int32_t slots = 0;
    for (GpuId g = node.first_gpu; g < node.first_gpu + node.num_gpus; ++g) {
      slots += gpu_free_[g] / d.gpu_milli;
    }
    by_gpu = d.gpus == 1 ? slots : 0;
    if (d.gpus > 1) {
      // Several fractional GPUs per member: count GPUs that fit at least one share.
      int32_t fitting = 0;
      for (GpuId g = node.first_gpu; g < node.first_gpu + node.num_gpus; ++g) {
        fitting += gpu_free_[g] >= d.gpu_milli ? 1 : 0;
      }
      by_gpu = fitting / d.gpus;
    }
  }
  return std::min({by_cpu, by_mem, by_gpu});
}

bool ClusterState::can_host(NodeId n, const MemberDemand& d) const {
  if (node_free_cpu_[n] < d.cpu_milli || node_free_mem_[n] < d.mem_mib) return false;
  if (d.gpus == 0) return true;
  if (d.whole_gpus()) return node_free_whole_[n] >= d.gpus;
  const Node& node = cluster_->node(n);
  int32_t fitting = 0;
  for (GpuId g = node.first_gpu; g < node.first_gpu + node.num_gpus; ++g) {
    fitting += gpu_free_[g] >= d.gpu_milli ? 1 : 0;
  }
  return fitting >= d.gpus;
}

bool ClusterState::pick_gpus(NodeId n, const MemberDemand& d, bool pack,
                             std::vector<GpuShare>& out) const {
  if (!can_host(n, d)) return false;
  const Node& node = cluster_->node(n);
  const GpuId first = node.first_gpu;
  const GpuId end = first + node.num_gpus;
  if (d.whole_gpus()) {
    // Prefer a single NVLink domain: the one with the fewest whole-free GPUs that still fits,
    // so that emptier domains stay whole for larger members.
    const int dom = node.gpus_per_nvl_domain;
    int best_dom = -1, best_free = INT32_MAX;
    if (d.gpus <= dom) {
      for (GpuId s = first; s < end; s += dom) {
        int free = 0;
        for (GpuId g = s; g < std::min<GpuId>(s + dom, end); ++g)
          free += gpu_free_[g] == kMilliPerGpu;
        if (free >= d.gpus && free < best_free) {
          best_free = free;
          best_dom = static_cast<int>(s - first);
        }
      }
    }
    int need = d.gpus;
    if (best_dom >= 0) {
      for (GpuId g = first + best_dom; need > 0 && g < end; ++g) {
        if (gpu_free_[g] == kMilliPerGpu) {
          out.push_back({g, kMilliPerGpu});
          --need;
        }
      }
    } else {
      for (GpuId g = first; need > 0 && g < end; ++g) {
        if (gpu_free_[g] == kMilliPerGpu) {
          out.push_back({g, kMilliPerGpu});
          --need;
        }
      }
    }
    return need == 0;
  }
  // Fractional shares: choose d.gpus distinct GPUs by tightness of fit.
  const size_t start = out.size();
  for (int i = 0; i < d.gpus; ++i) {
    GpuId best = kNoId;
    int32_t best_free = 0;
    for (GpuId g = first; g < end; ++g) {
      const int32_t f = gpu_free_[g];
      if (f < d.gpu_milli) continue;
      bool taken = false;
      for (size_t j = start; j < out.size(); ++j) taken |= out[j].gpu == g;
      if (taken) continue;
      if (best == kNoId || (pack ? f < best_free : f > best_free)) {
        best = g;
        best_free = f;
      }
    }
    if (best == kNoId) {
      out.resize(start);
      return false;
    }
    out.push_back({best, d.gpu_milli});
  }
  return true;
}

namespace {

// Sorted-vector set operations: a few microseconds of memmove at 5,000 nodes, and they keep
// every list in node order whatever the history of allocations.
void sorted_insert(std::vector<NodeId>& v, NodeId n) {
  v.insert(std::lower_bound(v.begin(), v.end(), n), n);
}
void sorted_erase(std::vector<NodeId>& v, NodeId n) {
  v.erase(std::lower_bound(v.begin(), v.end(), n));
}

}  // namespace

void ClusterState::move_bucket(NodeId n, uint16_t from, uint16_t to) {
  const GpuTypeId t = cluster_->node(n).gpu_type;
  sorted_erase(buckets_[bucket_index(t, from)], n);
  sorted_insert(buckets_[bucket_index(t, to)], n);
}

void ClusterState::set_partial(NodeId n, bool in) {
  auto& list = partial_[cluster_->node(n).gpu_type];
  if (in) {
    sorted_insert(list, n);
  } else {
    sorted_erase(list, n);
  }
}

void ClusterState::set_gpu_free(GpuId g, int32_t value) {
  const int32_t before = gpu_free_[g];
  if (value < 0 || value > kMilliPerGpu) {
    throw std::logic_error("GPU " + std::to_string(g) + " over-committed: free would be " +
                           std::to_string(value));
  }
  gpu_free_[g] = value;
  const NodeId n = cluster_->node_of_gpu(g);
  const Node& node = cluster_->node(n);
  type_free_milli_[node.gpu_type] += value - before;
  allocated_milli_ -= value - before;
  const int whole_delta = (value == kMilliPerGpu) - (before == kMilliPerGpu);
  if (whole_delta != 0) {
    const uint16_t old_whole = node_free_whole_[n];
    const auto new_whole = static_cast<uint16_t>(old_whole + whole_delta);
    node_free_whole_[n] = new_whole;
    move_bucket(n, old_whole, new_whole);
    rack_free_whole_[node.rack] += whole_delta;
    spine_free_whole_[cluster_->racks()[node.rack].spine] += whole_delta;
    type_free_whole_[node.gpu_type] += whole_delta;
  }
  const int partial_delta =
      (value > 0 && value < kMilliPerGpu) - (before > 0 && before < kMilliPerGpu);
  if (partial_delta != 0) {
    const uint16_t was = node_partial_gpus_[n];
    node_partial_gpus_[n] = static_cast<uint16_t>(was + partial_delta);
    if ((was > 0) != (node_partial_gpus_[n] > 0)) set_partial(n, node_partial_gpus_[n] > 0);
  }
}

void ClusterState::allocate_member(NodeId n, std::span<const GpuShare> shares, int64_t cpu,
                                   int64_t mem) {
  if (node_free_cpu_[n] < cpu || node_free_mem_[n] < mem) {
    throw std::logic_error("node " + cluster_->node(n).name + " over-committed on CPU/memory");
  }
  // Check every share before changing anything, so a failed call leaves the ledger intact.
  for (size_t i = 0; i < shares.size(); ++i) {
    int32_t want = shares[i].milli;
    for (size_t j = 0; j < i; ++j) want += shares[j].gpu == shares[i].gpu ? shares[j].milli : 0;
    if (cluster_->node_of_gpu(shares[i].gpu) != n || gpu_free_[shares[i].gpu] < want) {
      throw std::logic_error("GPU " + std::to_string(shares[i].gpu) + " on node " +
                             cluster_->node(n).name + " over-committed");
    }
  }
  for (const GpuShare& s : shares) set_gpu_free(s.gpu, gpu_free_[s.gpu] - s.milli);
  node_free_cpu_[n] -= cpu;
  node_free_mem_[n] -= mem;
  if (journaling_) note(n, true, shares, cpu, mem);
}

void ClusterState::release_member(NodeId n, std::span<const GpuShare> shares, int64_t cpu,
                                  int64_t mem) {
  for (const GpuShare& s : shares) set_gpu_free(s.gpu, gpu_free_[s.gpu] + s.milli);
  node_free_cpu_[n] += cpu;
  node_free_mem_[n] += mem;
  if (journaling_) note(n, false, shares, cpu, mem);
}

void ClusterState::note(NodeId n, bool allocated, std::span<const GpuShare> shares, int64_t cpu,
                        int64_t mem) {
  journal_.push_back(JournalEntry{n, allocated, static_cast<uint32_t>(journal_shares_.size()),
                                  static_cast<uint32_t>(shares.size()), cpu, mem});
  journal_shares_.insert(journal_shares_.end(), shares.begin(), shares.end());
}

void ClusterState::start_journal() {
  if (journaling_) throw std::logic_error("the ledger's journal is already started");
  journaling_ = true;
  journal_.clear();
  journal_shares_.clear();
}

void ClusterState::undo_journal() {
  journaling_ = false;
  for (auto it = journal_.rbegin(); it != journal_.rend(); ++it) {
    const auto shares = std::span(journal_shares_).subspan(it->first, it->count);
    if (it->allocated) {
      release_member(it->node, shares, it->cpu, it->mem);
    } else {
      allocate_member(it->node, shares, it->cpu, it->mem);
    }
  }
  journal_.clear();
  journal_shares_.clear();
}

Allocation ClusterState::free_on_node(NodeId n) const {
  const Node& node = cluster_->node(n);
  Allocation a;
  a.gpus_per_member = node.num_gpus;
  a.cpu_milli_per_member = node_free_cpu(n);
  a.mem_mib_per_member = node_free_mem(n);
  a.member_node.push_back(n);
  for (uint16_t g = 0; g < node.num_gpus; ++g) {
    const GpuId gpu = node.first_gpu + g;
    a.shares.push_back(GpuShare{gpu, gpu_free(gpu)});
  }
  return a;
}

bool ClusterState::fits(const Allocation& a) const {
  std::map<GpuId, int64_t> gpu;
  std::map<NodeId, int64_t> members;
  for (const GpuShare& s : a.shares) gpu[s.gpu] += s.milli;
  for (NodeId n : a.member_node) ++members[n];
  for (const auto& [g, milli] : gpu) {
    if (gpu_free_[g] < milli) return false;
  }
  for (const auto& [n, k] : members) {
    if (node_free_cpu_[n] < k * a.cpu_milli_per_member) return false;
    if (node_free_mem_[n] < k * a.mem_mib_per_member) return false;
  }
  return true;
}

void ClusterState::allocate(const Allocation& a) {
  const size_t k = static_cast<size_t>(a.gpus_per_member);
  for (size_t i = 0; i < a.member_node.size(); ++i) {
    allocate_member(a.member_node[i], std::span(a.shares).subspan(i * k, k), a.cpu_milli_per_member,
                    a.mem_mib_per_member);
  }
}

void ClusterState::release(const Allocation& a) {
  const size_t k = static_cast<size_t>(a.gpus_per_member);
  for (size_t i = 0; i < a.member_node.size(); ++i) {
    release_member(a.member_node[i], std::span(a.shares).subspan(i * k, k), a.cpu_milli_per_member,
                   a.mem_mib_per_member);
  }
}

}  // namespace tessera
