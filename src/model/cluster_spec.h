// Readers for cluster descriptions. Every reader throws InputError naming the file, line and
// field on bad input.
//
// Formats (load_cluster picks one from the content):
//  - Tessera YAML (.yaml/.yml): either a uniform shape
//        spines: 1            # optional, default 1
//        racks: 4             # racks per spine
//        nodes_per_rack: 8
//        node: {gpus: 8, gpu_type: V100, cpu_milli: 64000, mem_mib: 524288, nvlink_domain: 8}
//    or explicit nodes
//        nodes:
//          - {name: n0, rack: r0, spine: s0, gpus: 8, gpu_type: A100-80G, cpu_milli: .., mem_mib:
//          ..}
//    plus optional `links: {nvlink: {bandwidth_gbps: 300, latency_us: 1}, node: .., rack: ..,
//    spine: .., cluster: ..}` overriding the defaults of set_default_links().
//    Alibaba's openb_node_list_gpu_node.yaml (a list of Kubernetes Node objects) is also read.
//  - Alibaba CSV: header `sn,cpu_milli,memory_mib,gpu,model` (openb_node_list_*.csv). Nodes with
//    0 GPUs are kept (they host CPU-only pods); 8 nodes per rack, one spine.
//  - Tiresias CSV: header `num_switch,num_node_p_switch,num_gpu_p_node,num_cpu_p_node,
//    mem_p_node` (a switch is a rack; mem in GB); GPU type V100 unless given.
#pragma once

#include <string>
#include <string_view>

#include "model/cluster.h"

namespace YAML {
class Node;
}

namespace tessera {

// A Tessera YAML cluster given as a node of a larger file (a site of a sites file,
// model/sites.h); errors name `origin` and the node's own lines.
Cluster parse_tessera_yaml(const YAML::Node& root, const std::string& origin);

Cluster load_cluster(const std::string& path);
Cluster parse_cluster_yaml(std::string_view text, const std::string& origin);
Cluster parse_alibaba_nodes_csv(std::string_view text, const std::string& origin);
Cluster parse_tiresias_cluster_csv(std::string_view text, const std::string& origin,
                                   std::string_view gpu_type = "V100");

// racks x nodes_per_rack nodes of `gpus` GPUs each, under `spines` spines.
Cluster make_uniform_cluster(int spines, int racks_per_spine, int nodes_per_rack, int gpus,
                             std::string_view gpu_type = "V100", int64_t cpu_milli = 64000,
                             int64_t mem_mib = 512 * 1024, int gpus_per_nvl_domain = 0);

}  // namespace tessera
