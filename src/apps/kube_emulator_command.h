// `tessera kube-emulator`: a Kubernetes API server emulator with fake GPU nodes and a
// KWOK-style kubelet, for trying `tessera kube` and kubectl without a cluster
// (docs/kube-emulator.md).
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace tessera {

struct KubeEmulatorArgs {
  std::string listen = "127.0.0.1:6443";
  std::string addr_file;
  std::string kubeconfig_out;  // empty: print the kubeconfig on stdout
  int nodes = 16;
  int gpus_per_node = 8;
  std::string gpu_product = "NVIDIA-H100-80GB-HBM3";
  std::string cpu_per_node = "96";
  std::string memory_per_node = "1536Gi";
  std::vector<std::string> node_specs;  // COUNT:GPUS:PRODUCT[:CPU[:MEMORY]]; replace --nodes
  int racks = 0;
  int racks_per_spine = 4;
  std::string spine_label = "network.topology.nvidia.com/spine";
  std::string leaf_label = "network.topology.nvidia.com/leaf";
  std::string node_prefix = "gpu-node-";
  bool tls = false;
  std::string tls_cert, tls_key, client_ca;
  std::vector<std::string> tokens;
  std::string state;
  double state_interval = 5;
  std::string binding_log;
  size_t history = 10000;
  double bookmark_interval = 60;
  double watch_timeout = 0;
  bool watch_expired_http = false;
  std::string kubelet_start_delay = "100ms";
  bool no_kubelet = false;
  uint64_t seed = 1;
  int threads = 256;
};
CLI::App* add_kube_emulator_command(CLI::App& app, KubeEmulatorArgs& args);
int run_kube_emulator(const KubeEmulatorArgs& args);

}  // namespace tessera
