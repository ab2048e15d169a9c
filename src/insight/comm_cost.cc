#include "insight/comm_cost.h"

#include <algorithm>
#include <limits>

namespace tessera {

LinkCost link_cost(double bandwidth_gbps, double latency_us) {
  LinkCost c;
  c.alpha_s = latency_us * 1e-6;
  c.beta_s_per_byte =
      bandwidth_gbps > 0 ? 1.0 / (bandwidth_gbps * 1e9) : std::numeric_limits<double>::infinity();
  return c;
}

LinkCost link_cost(const Link& link) {
  return link_cost(link.bandwidth_gbps, link.latency_us);
}

LinkCost shared(LinkCost link, double flows) {
  if (flows > 1) link.beta_s_per_byte *= flows;
  return link;
}

CommLevels comm_levels(const Cluster& cluster) {
  CommLevels c;
  for (int l = 0; l < kNumLevels; ++l) c.level[l] = link_cost(cluster.link(static_cast<Level>(l)));
  return c;
}

CommLevels comm_levels(const InterconnectSpec& s) {
  CommLevels c;
  c.level[static_cast<size_t>(Level::kNvlDomain)] = link_cost(s.nvlink);
  c.level[static_cast<size_t>(Level::kNode)] = link_cost(s.pcie);
  c.level[static_cast<size_t>(Level::kRack)] = link_cost(s.node_nic);
  // Oversubscription divides what each node gets of the uplink; a level is never faster than
  // the NIC the traffic leaves the node through.
  const double rack_bw =
      std::min(s.node_nic.bandwidth_gbps,
               s.rack_uplink.bandwidth_gbps / std::max(1.0, s.rack_oversubscription));
  const double spine_bw =
      std::min(rack_bw, s.spine.bandwidth_gbps / std::max(1.0, s.spine_oversubscription));
  c.level[static_cast<size_t>(Level::kSpine)] = link_cost(rack_bw, s.rack_uplink.latency_us);
  c.level[static_cast<size_t>(Level::kCluster)] = link_cost(spine_bw, s.spine.latency_us);
  return c;
}

Level outermost_level(uint32_t nodes, uint32_t racks, uint32_t spines, bool spans_nvl_domains) {
  if (spines > 1) return Level::kCluster;
  if (racks > 1) return Level::kSpine;
  if (nodes > 1) return Level::kRack;
  return spans_nvl_domains ? Level::kNode : Level::kNvlDomain;
}

Level outermost_level(const Cluster& cluster, const Allocation& alloc) {
  if (alloc.empty()) return Level::kNvlDomain;
  const NodeId n0 = alloc.member_node.front();
  const RackId r0 = cluster.node(n0).rack;
  const SpineId s0 = cluster.racks()[r0].spine;
  bool other_node = false, other_rack = false, other_spine = false;
  for (NodeId n : alloc.member_node) {
    const RackId r = cluster.node(n).rack;
    other_node |= n != n0;
    other_rack |= r != r0;
    other_spine |= cluster.racks()[r].spine != s0;
  }
  bool spans_domains = false;
  if (!other_node) {
    const Node& node = cluster.node(n0);
    const uint32_t per_domain = node.gpus_per_nvl_domain ? node.gpus_per_nvl_domain : node.num_gpus;
    const auto domain = [&](GpuId g) { return (g - node.first_gpu) / std::max(1u, per_domain); };
    const auto d0 = domain(alloc.shares.front().gpu);
    for (const GpuShare& s : alloc.shares) spans_domains |= domain(s.gpu) != d0;
  }
  return outermost_level(other_node ? 2 : 1, other_rack ? 2 : 1, other_spine ? 2 : 1,
                         spans_domains);
}

double ring_allreduce_s(double bytes, int ranks, const LinkCost& link) {
  if (ranks <= 1) return 0;
  const double steps = 2.0 * (ranks - 1);
  return steps * link.alpha_s + steps * (bytes / ranks) * link.beta_s_per_byte;
}

double ring_allreduce_s(double bytes, int ranks, const CommLevels& levels, Level outermost) {
  return ring_allreduce_s(bytes, ranks, levels.at(outermost));
}

double ring_reduce_scatter_s(double bytes, int ranks, const LinkCost& link) {
  if (ranks <= 1) return 0;
  const double steps = ranks - 1.0;
  return steps * link.alpha_s + steps * (bytes / ranks) * link.beta_s_per_byte;
}

double ring_all_gather_s(double bytes, int ranks, const LinkCost& link) {
  // The same steps as a reduce-scatter run backwards, without the additions.
  return ring_reduce_scatter_s(bytes, ranks, link);
}

double hierarchical_allreduce_s(double bytes, int per_node, int nodes, const LinkCost& intra,
                                const LinkCost& inter) {
  const int k = std::max(1, per_node);
  const int m = std::max(1, nodes);
  const double inside = 2 * ring_reduce_scatter_s(bytes, k, intra);
  const double across = ring_allreduce_s(bytes / k, m, inter);
  return inside + across;
}

double ps_push_pull_s(double bytes, int workers, int servers, const LinkCost& link) {
  if (workers <= 0 || servers <= 0) return 0;
  const double server_bytes = bytes * workers / servers;
  const double busiest = std::max(bytes, server_bytes);
  return 2 * (link.alpha_s + busiest * link.beta_s_per_byte);
}

}  // namespace tessera
