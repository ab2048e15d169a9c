// The node factory: GPU nodes as the NVIDIA device plugin, GPU feature discovery and topograph
// label them, with a two-level network topology (spine > leaf/rack), Ready and with capacity.
#pragma once

#include <string>
#include <vector>

#include "kube_emulator/util.h"

namespace kube_emulator {

struct NodePool {
  int count = 0;
  int gpus = 8;
  std::string product = "NVIDIA-H100-80GB-HBM3";
  std::string cpu = "96";
  std::string memory = "1536Gi";
  int pods = 110;
  int gpu_memory_mib = 0;  // 0: derived from the product name
};

struct NodeLayout {
  std::string name_prefix = "gpu-node-";
  int racks = 0;            // leaves; 0: one rack per 8 nodes (at least 1)
  int racks_per_spine = 4;  // leaves under one spine
  // Topology label keys, coarsest first (NVIDIA topograph's node labels).
  std::string spine_key = "network.topology.nvidia.com/spine";
  std::string leaf_key = "network.topology.nvidia.com/leaf";
  std::string kubelet_version = "v1.31.0";
};

// Parses COUNT:GPUS:PRODUCT[:CPU[:MEMORY]] ("32:8:NVIDIA-H100-80GB-HBM3"); throws
// std::invalid_argument when malformed.
NodePool parse_node_spec(const std::string& spec);
int gpu_memory_mib_of(const std::string& product);

// Node objects for the pools, numbered from `first_index` (rack placement counts all pools).
std::vector<json> make_nodes(const std::vector<NodePool>& pools, const NodeLayout& layout,
                             int first_index = 0);

}  // namespace kube_emulator
