// The communication cost model: α-β costs of collectives over the links of the topology tree
// (DESIGN.md, "Domain model"; constants and derivations in docs/advisor.md).
//
// A message of n bytes over a link costs α + n·β seconds, α the link's latency and β the
// inverse of its bandwidth per direction. Collectives are the textbook bandwidth-optimal
// algorithms (Thakur, Rabenseifner and Gropp, "Optimization of Collective Communication
// Operations in MPICH", IJHPCA 2005; Patarasuk and Yuan, JPDC 2009):
//  - ring all-reduce over p ranks: 2(p−1)·α + 2(p−1)·(n/p)·β, the β of the slowest link the
//    ring crosses (a ring is as fast as its slowest hop);
//  - hierarchical all-reduce: reduce-scatter inside each node, ring all-reduce of each 1/k
//    shard across the m nodes, all-gather inside each node;
//  - parameter server push/pull: every worker pushes its n bytes of gradients, split over the
//    servers, and pulls n bytes of parameters back; the busier side sets the time.
// Everything here is a pure function of its arguments.
#pragma once

#include <array>
#include <cstdint>

#include "model/allocation.h"
#include "model/cluster.h"

namespace tessera {

// α-β cost of one link: n bytes take alpha_s + n * beta_s_per_byte seconds.
struct LinkCost {
  double alpha_s = 0;
  double beta_s_per_byte = 0;

  double message_s(double bytes) const { return alpha_s + bytes * beta_s_per_byte; }
};

// From a Link (GB/s per direction, µs). A link with no bandwidth is unusable: β is infinite.
LinkCost link_cost(const Link& link);
LinkCost link_cost(double bandwidth_gbps, double latency_us);

// `flows` transfers sharing one link concurrently each see 1/flows of its bandwidth (a node's
// NIC carrying the rings of all its GPUs at once); α is unchanged.
LinkCost shared(LinkCost link, double flows);

// The cost of crossing each topology level (index by Level): what a ring whose outermost hop
// is at that level runs over.
struct CommLevels {
  std::array<LinkCost, kNumLevels> level{};
  const LinkCost& at(Level l) const { return level[static_cast<size_t>(l)]; }
};

// From a cluster spec's links.
CommLevels comm_levels(const Cluster& cluster);

// From explicit link figures. The rack uplink and spine are shared by every node below them;
// an oversubscription ratio r (uplink capacity = downlink capacity / r) divides the bandwidth
// a node sees when crossing that level.
struct InterconnectSpec {
  Link nvlink{300.0, 1.0};      // per GPU inside an NVLink domain
  Link pcie{32.0, 2.0};         // between NVLink domains of one node
  Link node_nic{12.5, 5.0};     // per node, between nodes of one rack
  Link rack_uplink{12.5, 8.0};  // per node, between racks of one spine, before oversubscription
  Link spine{12.5, 12.0};       // per node, between spines, before oversubscription
  double rack_oversubscription = 1.0;
  double spine_oversubscription = 2.0;  // as set_default_links: spine 2:1
};
CommLevels comm_levels(const InterconnectSpec& spec);

// The outermost level an allocation's GPUs span: kNvlDomain when all sit in one NVLink
// domain, kNode when one node, kRack when one rack, kSpine when one spine, else kCluster.
// An empty allocation spans nothing (kNvlDomain).
Level outermost_level(const Cluster& cluster, const Allocation& alloc);
// The same from counts: how many spines, racks and nodes are used, and whether a single
// node's GPUs span more than one NVLink domain.
Level outermost_level(uint32_t nodes, uint32_t racks, uint32_t spines, bool spans_nvl_domains);

// Ring all-reduce of `bytes` over `ranks` ranks: 2(p−1)·α + 2(p−1)·(n/p)·β; 0 for p <= 1.
double ring_allreduce_s(double bytes, int ranks, const LinkCost& link);
// The same over the link of the outermost level the ring crosses.
double ring_allreduce_s(double bytes, int ranks, const CommLevels& levels, Level outermost);
// Ring reduce-scatter or all-gather (half an all-reduce): (p−1)·α + (p−1)·(n/p)·β.
double ring_reduce_scatter_s(double bytes, int ranks, const LinkCost& link);
double ring_all_gather_s(double bytes, int ranks, const LinkCost& link);

// Hierarchical all-reduce of `bytes` over `per_node` ranks on each of `nodes` nodes:
//   2(k−1)·α_in + 2(k−1)·(n/k)·β_in            reduce-scatter + all-gather inside a node
// + 2(m−1)·α_out + 2(m−1)·(n/(k·m))·β_out       ring all-reduce of each n/k shard across nodes
// `inter` is the cost one shard's ring sees: pass shared(nic, k) when the k rings of a node
// share its NIC.
double hierarchical_allreduce_s(double bytes, int per_node, int nodes, const LinkCost& intra,
                                const LinkCost& inter);

// Parameter server: `workers` each push `bytes` of gradients (split evenly over `servers`)
// and pull `bytes` of parameters back, every party on its own `link`. A worker moves n bytes
// each way, a server W·n/S; push and pull each take α plus the busier side's bytes times β.
double ps_push_pull_s(double bytes, int workers, int servers, const LinkCost& link);

}  // namespace tessera
