#include "control/views.h"

#include <algorithm>

#include "engine/fair_share.h"

namespace tessera {

std::vector<QueueView> queue_views(const Snapshot& snap, const DecayedUsage& decayed,
                                   const std::vector<std::pair<int64_t, int64_t>>& jobs_of_tenant) {
  const QueueShares shares = compute_queue_shares(snap);
  const QueueTree& tree = *shares.tree;
  std::vector<QueueView> out;
  for (QueueId q = 0; q < tree.size(); ++q) {
    const QueueSpec& spec = tree.queue(q);
    QueueView v;
    v.path = q == kRootQueue ? "/" : spec.path;
    v.weight = spec.weight;
    v.guarantee_gpus = static_cast<double>(spec.guarantee[kGpuDim]) / 1000.0;
    v.limit_gpus =
        spec.limit[kGpuDim] >= kUnlimited ? -1 : static_cast<double>(spec.limit[kGpuDim]) / 1000.0;
    v.holds_gpus = static_cast<double>(shares.usage[q][kGpuDim]) / 1000.0;
    v.fair_share_gpus = static_cast<double>(shares.entitled[q][kGpuDim]) / 1000.0;
    if (decayed.on()) v.decayed_gpus = decayed.value(q)[kGpuDim] / 1000.0;
    for (TenantId t = 0; t < jobs_of_tenant.size(); ++t) {
      // A tenant counts toward every queue on its leaf's path.
      for (QueueId a = tree.leaf_of(t); a != kNoId; a = tree.queue(a).parent) {
        if (a == q) {
          v.pending_jobs += jobs_of_tenant[t].first;
          v.running_jobs += jobs_of_tenant[t].second;
          break;
        }
        if (a == kRootQueue) break;
      }
    }
    out.push_back(std::move(v));
  }
  return out;
}

std::vector<NodeView> node_views(const ClusterState& st,
                                 const std::function<int32_t(GpuId)>& index) {
  const Cluster& c = st.cluster();
  std::vector<NodeView> out;
  for (NodeId n = 0; n < c.nodes().size(); ++n) {
    const Node& node = c.node(n);
    NodeView v;
    v.name = node.name;
    if (node.rack < c.racks().size()) v.rack = c.racks()[node.rack].name;
    v.gpu_type = c.gpu_types().at(node.gpu_type).name;
    for (uint16_t k = 0; k < node.num_gpus; ++k) {
      const GpuId g = node.first_gpu + k;
      v.gpus.push_back(GpuView{index(g), st.gpu_free(g), "", false, {}, {}});
    }
    v.cpu_milli = node.cpu_milli;
    v.free_cpu_milli = st.node_free_cpu(n);
    v.mem_mib = node.mem_mib;
    v.free_mem_mib = st.node_free_mem(n);
    out.push_back(std::move(v));
  }
  return out;
}

void add_gpu_holder(GpuView& v, int64_t job, const std::string& tenant, const std::string& name,
                    int32_t milli) {
  for (GpuHolder& h : v.holders) {
    if (h.job == job) {
      h.milli += milli;
      return;
    }
  }
  v.jobs.push_back(job);
  v.holders.push_back(GpuHolder{job, tenant, name, milli});
}

void mark_gpu_holders(std::vector<NodeView>& nodes, const Cluster& c,
                      const std::vector<HeldAllocation>& allocations) {
  for (const HeldAllocation& a : allocations) {
    for (const GpuShare& share : a.alloc->shares) {
      const NodeId n = c.node_of_gpu(share.gpu);
      if (n >= nodes.size()) continue;
      const size_t k = share.gpu - c.node(n).first_gpu;
      add_gpu_holder(nodes[n].gpus.at(k), a.job, a.tenant, a.name, share.milli);
    }
  }
  sort_gpu_holders(nodes);
}

void sort_gpu_holders(std::vector<NodeView>& nodes) {
  for (NodeView& n : nodes) {
    for (GpuView& g : n.gpus) {
      std::sort(g.jobs.begin(), g.jobs.end());
      std::sort(g.holders.begin(), g.holders.end(),
                [](const GpuHolder& x, const GpuHolder& y) { return x.job < y.job; });
    }
  }
}

}  // namespace tessera
