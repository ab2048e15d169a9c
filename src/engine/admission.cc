#include "engine/admission.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace tessera {

std::optional<std::string> infeasible_reason(const Cluster& cluster, const JobSpec& job) {
  const MemberDemand& d = job.demand;
  if (job.min_members < 1 || job.max_members < job.min_members) {
    return fmt::format("gang size {}..{} is not a valid range", job.min_members, job.max_members);
  }
  if (d.gpus < 0 || d.gpu_milli < 1 || d.gpu_milli > kMilliPerGpu) {
    return fmt::format("asks for {} GPUs of {} milli each", d.gpus, d.gpu_milli);
  }
  if (d.gpus > 0 && cluster.num_gpus_matching(job.allowed_types) == 0) {
    return std::string("no GPU of an allowed type exists in the cluster");
  }
  if (d.gpus > 0) {
    const uint32_t per_node = cluster.max_gpus_per_node(job.allowed_types);
    if (static_cast<uint32_t>(d.gpus) > per_node) {
      return fmt::format("each member asks for {} GPUs on one node, but the largest node has {}",
                         d.gpus, per_node);
    }
    const int64_t need = int64_t{job.min_members} * d.gpus;
    const uint32_t total = cluster.num_gpus_matching(job.allowed_types);
    if (d.whole_gpus() && need > total) {
      return fmt::format("asks for {} GPUs, but the cluster has {} of the allowed types", need,
                         total);
    }
  }
  // A job restricted to a node set (JobSpec::eligible_nodes): the same tests over its nodes.
  const NodeSet* only = job.eligible_nodes.get();
  const auto num_nodes = static_cast<NodeId>(cluster.nodes().size());
  const size_t eligible = only == nullptr ? 0 : only->count_in(0, num_nodes);
  if (only != nullptr) {
    if (eligible == 0) {
      return fmt::format("no node is eligible: its node restriction matches none of the {} nodes",
                         num_nodes);
    }
    if (d.gpus > 0) {
      uint32_t largest = 0;
      int64_t total = 0;
      only->for_each([&](NodeId n) {
        if (n >= num_nodes || !type_allowed(job.allowed_types, cluster.node(n).gpu_type)) return;
        largest = std::max<uint32_t>(largest, cluster.node(n).num_gpus);
        total += cluster.node(n).num_gpus;
      });
      if (largest == 0) {
        return fmt::format("no eligible node has a GPU of an allowed type: {} nodes eligible",
                           eligible);
      }
      if (static_cast<uint32_t>(d.gpus) > largest) {
        return fmt::format(
            "no eligible node has {} GPUs of an allowed type: {} nodes eligible, the largest has "
            "{}",
            d.gpus, eligible, largest);
      }
      const int64_t need = int64_t{job.min_members} * d.gpus;
      if (d.whole_gpus() && need > total) {
        return fmt::format(
            "asks for {} GPUs, but its {} eligible nodes have {} of the allowed types", need,
            eligible, total);
      }
    }
  }
  // A member larger than every node in CPU or memory: said with what the largest node has.
  {
    int64_t cpu = 0;
    int64_t mem = 0;
    for (NodeId n = 0; n < num_nodes; ++n) {
      const Node& node = cluster.node(n);
      if (d.gpus > 0 && !type_allowed(job.allowed_types, node.gpu_type)) continue;
      if (!node_eligible(only, n)) continue;
      cpu = std::max(cpu, node.cpu_milli);
      mem = std::max(mem, node.mem_mib);
    }
    const char* of = d.gpus > 0 ? " with a GPU of an allowed type" : "";
    if (d.cpu_milli > cpu) {
      return fmt::format("each member asks for {:g} CPUs, but the largest node{} has {:g}",
                         static_cast<double>(d.cpu_milli) / 1000, of,
                         static_cast<double>(cpu) / 1000);
    }
    if (d.mem_mib > mem) {
      return fmt::format("each member asks for {:g} GiB of memory, but the largest node{} has {:g}",
                         static_cast<double>(d.mem_mib) / 1024, of,
                         static_cast<double>(mem) / 1024);
    }
  }
  // Finally the exact test: place it on an empty cluster, member by member, onto the nodes
  // with the most room (CPU and memory included), all inside one subtree of the job's
  // max_span level (one NVLink domain, node, rack or spine; the cluster when unconstrained), on
  // its eligible nodes only.
  const Level span = job.max_span;
  std::vector<int64_t> placed;
  for (NodeId n = 0; n < num_nodes; ++n) {
    const Node& node = cluster.node(n);
    if (d.gpus > 0 && !type_allowed(job.allowed_types, node.gpu_type)) continue;
    if (!node_eligible(only, n)) continue;
    int64_t k = INT32_MAX;
    if (d.cpu_milli > 0) k = std::min(k, node.cpu_milli / d.cpu_milli);
    if (d.mem_mib > 0) k = std::min(k, node.mem_mib / d.mem_mib);
    if (d.gpus > 0) {
      // With span nvlink the members must share one NVLink domain of the node.
      const int64_t gpus = span == Level::kNvlDomain && node.gpus_per_nvl_domain > 0
                               ? std::min<int64_t>(node.gpus_per_nvl_domain, node.num_gpus)
                               : int64_t{node.num_gpus};
      const int64_t per_gpu = d.whole_gpus() ? 1 : kMilliPerGpu / d.gpu_milli;
      k = std::min(k, d.gpus == 1 ? gpus * per_gpu : gpus / d.gpus);
    }
    size_t key = 0;
    if (span <= Level::kNode) {
      key = n;
    } else if (span == Level::kRack) {
      key = node.rack;
    } else if (span == Level::kSpine) {
      key = cluster.racks()[node.rack].spine;
    }
    if (placed.size() <= key) placed.resize(key + 1, 0);
    placed[key] += k;
    if (placed[key] >= job.min_members) return std::nullopt;  // usually the first node
  }
  const int64_t most = placed.empty() ? 0 : *std::max_element(placed.begin(), placed.end());
  if (most < job.min_members) {
    const std::string where =
        only == nullptr ? std::string() : fmt::format(" on its {} eligible nodes", eligible);
    if (span != Level::kCluster) {
      static constexpr const char* kSpan[] = {"NVLink domain", "node", "rack", "spine", "cluster"};
      return fmt::format(
          "no single {} can host {} members of {} GPUs, {} mCPU, {} MiB each{} (span constraint)",
          kSpan[static_cast<int>(span)], job.min_members, d.gpus, d.cpu_milli, d.mem_mib, where);
    }
    return fmt::format("no set of nodes can host {} members of {} GPUs, {} mCPU, {} MiB each{}",
                       job.min_members, d.gpus, d.cpu_milli, d.mem_mib, where);
  }
  return std::nullopt;
}

}  // namespace tessera
