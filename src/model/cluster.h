// The cluster topology: cluster -> spine -> rack -> node -> NVLink domain -> GPU.
//
// Invariants (established by ClusterBuilder::build and never changed afterwards):
//  - nodes of one rack are contiguous in nodes(), racks of one spine contiguous in racks();
//  - GPUs of one node are contiguous in gpus(), starting at Node::first_gpu;
//  - every GPU of a node has the node's GPU type (Alibaba and Philly nodes are homogeneous).
// A Cluster is immutable; what is allocated lives in ClusterState.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "model/gpu_type.h"
#include "model/ids.h"

namespace tessera {

// Topology levels, innermost first. The communication cost of a placement is set by the
// outermost level its ring crosses.
enum class Level : uint8_t { kNvlDomain = 0, kNode = 1, kRack = 2, kSpine = 3, kCluster = 4 };
inline constexpr int kNumLevels = 5;

// The names files use for levels (cluster specs' `links`, a job's `span`): "nvlink", "node",
// "rack", "spine", "cluster".
std::string_view level_name(Level l);
// False (and `out` untouched) for any other name.
bool parse_level(std::string_view name, Level& out);

struct Link {
  double bandwidth_gbps = 0;  // per direction, gigabytes per second
  double latency_us = 0;
};

struct Node {
  std::string name;
  RackId rack = 0;
  GpuTypeId gpu_type = 0;
  uint16_t num_gpus = 0;
  uint16_t gpus_per_nvl_domain = 0;  // == num_gpus when the whole node is one NVLink domain
  int64_t cpu_milli = 0;
  int64_t mem_mib = 0;
  GpuId first_gpu = 0;
  // GPUs per NVLink domain (the whole node when gpus_per_nvl_domain is 0 or larger).
  int nvl_domain_size() const {
    return gpus_per_nvl_domain > 0 ? std::min<int>(gpus_per_nvl_domain, num_gpus) : num_gpus;
  }
};

struct Rack {
  std::string name;
  SpineId spine = 0;
  NodeId first_node = 0;
  uint32_t num_nodes = 0;
};

struct Spine {
  std::string name;
  RackId first_rack = 0;
  uint32_t num_racks = 0;
};

// Power settings a cluster file may carry (`power:` in Tessera YAML; docs/energy.md); the
// command line overrides them. Negative: not given.
struct ClusterPower {
  double cap_w = -1;        // cap on the cluster's estimated IT draw
  double node_base_w = -1;  // each node's draw besides its GPUs
  double pue = -1;
  std::vector<double> rack_cap_w;       // by RackId, -1 where none; empty: none
  std::vector<double> node_headroom_w;  // by NodeId: thermal headroom above idle, -1: none
};

// Storage tiers a cluster file may declare (`storage:` in Tessera YAML; docs/data.md): where
// jobs' datasets are and how fast they move. Sizes in GB (10^9 bytes), bandwidths in GB/s.
// Every dataset is in the object store; a shared cache (one per rack, or one for the cluster)
// and each node's local NVMe hold copies of what was read through them.
struct ClusterStorage {
  bool present = false;    // `storage:` was given (else datasets cost nothing to reach)
  double object_gbs = 0;   // the object store's bandwidth, shared by its transfers
  double per_job_gbs = 0;  // the most one transfer from it gets
  bool cache_per_rack = true;
  double cache_gb = 0;   // each cache's capacity; 0: no cache tier
  double cache_gbs = 0;  // a transfer out of a cache
  double nvme_gb = 0;    // each node's local NVMe for datasets; 0: none
  double nvme_gbs = 0;   // reading from it
};

class Cluster {
 public:
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<Rack>& racks() const { return racks_; }
  const std::vector<Spine>& spines() const { return spines_; }
  const Node& node(NodeId n) const { return nodes_[n]; }
  const GpuTypeTable& gpu_types() const { return types_; }
  // Link of each level (index by Level): what a ring crossing that level runs over.
  const Link& link(Level l) const { return links_[static_cast<int>(l)]; }

  NodeId node_of_gpu(GpuId g) const { return gpu_node_[g]; }
  uint32_t num_gpus() const { return static_cast<uint32_t>(gpu_node_.size()); }
  uint32_t num_gpus_of_type(GpuTypeId t) const {
    return t < gpus_by_type_.size() ? gpus_by_type_[t] : 0;
  }
  // The most GPUs (of any of the types in mask) on one node.
  uint32_t max_gpus_per_node(GpuTypeMask mask) const;
  uint32_t num_gpus_matching(GpuTypeMask mask) const;
  uint16_t max_node_gpus() const { return max_node_gpus_; }
  // The most GPUs of one node outside any one of its NVLink domains (num_gpus minus the domain
  // size; 0 when every node is one domain): a bound placement's domain search stops on.
  uint16_t max_nvl_slack() const { return max_nvl_slack_; }
  // Which types occur at all (bit t set when some node has type t).
  GpuTypeMask present_types() const { return present_types_; }
  // Every node's CPU and memory together (a cycle's capacity, without a pass over the nodes).
  int64_t total_cpu_milli() const { return total_cpu_milli_; }
  int64_t total_mem_mib() const { return total_mem_mib_; }
  const ClusterPower& power() const { return power_; }
  void set_power(ClusterPower p) { power_ = std::move(p); }
  const ClusterStorage& storage() const { return storage_; }
  void set_storage(ClusterStorage s) { storage_ = s; }

 private:
  ClusterPower power_;
  ClusterStorage storage_;
  friend class ClusterBuilder;
  std::vector<Node> nodes_;
  std::vector<Rack> racks_;
  std::vector<Spine> spines_;
  std::vector<NodeId> gpu_node_;
  std::vector<uint32_t> gpus_by_type_;
  std::vector<uint32_t> max_gpus_by_type_;  // the most GPUs on one node of each type
  GpuTypeTable types_ = GpuTypeTable::builtin();
  Link links_[kNumLevels] = {};
  uint16_t max_node_gpus_ = 0;
  uint16_t max_nvl_slack_ = 0;
  GpuTypeMask present_types_ = 0;
  int64_t total_cpu_milli_ = 0, total_mem_mib_ = 0;
};

// Assembles a Cluster. Nodes may be added in any order; build() groups them by rack and
// racks by spine (stable, in first-seen order) to establish the invariants above.
class ClusterBuilder {
 public:
  ClusterBuilder();
  GpuTypeTable& gpu_types() { return types_; }
  void set_link(Level level, Link link) { links_[static_cast<int>(level)] = link; }
  // Adds a node under rack `rack` of spine `spine` (created on first use).
  void add_node(const std::string& spine, const std::string& rack, const std::string& name,
                GpuTypeId type, uint16_t gpus, int64_t cpu_milli, int64_t mem_mib,
                uint16_t gpus_per_nvl_domain = 0);
  size_t num_nodes() const { return pending_.size(); }
  Cluster build() const;

 private:
  struct PendingNode {
    uint32_t spine, rack;
    Node node;
  };
  GpuTypeTable types_ = GpuTypeTable::builtin();
  Link links_[kNumLevels];
  std::vector<std::string> spine_names_, rack_names_;
  std::vector<uint32_t> rack_spine_;
  std::vector<PendingNode> pending_;
};

// Default link speeds per level (documented in docs/execution-model.md): NVLink 3 300 GB/s,
// PCIe/QPI between NVLink domains 32 GB/s, 100 Gb/s node NIC (12.5 GB/s), rack uplink
// 12.5 GB/s, spine 2:1 oversubscribed (6.25 GB/s).
void set_default_links(ClusterBuilder& b);

}  // namespace tessera
