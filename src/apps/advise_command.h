// tessera advise: the parallelism advisor (insight/parallelism_advisor.h) on the command line.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace tessera {

struct AdviseArgs {
  double params = 0;
  int layers = 0;
  int hidden = 0;
  int heads = 0;  // 0: hidden / 128
  int seq = 2048;
  int vocab = 51200;
  int global_batch = 0;
  std::string gpu;      // empty: the cluster's, or A100-80G
  std::string cluster;  // a cluster spec whose GPUs and links to use
  int gpus_per_node = 8;
  int gpus = 0;  // 0: the advisor chooses the gang size
  int max_gpus = 4096;
  double max_step_s = 0;
  int max_zero = 3;
  double efficiency = 0.55;
  double reserve = 0.10;
  bool no_recompute = false;
  double nvlink_gbps = 0;  // 0: the GPU type's usual server
  double nic_gbps = 0;
  double gpu_memory_gib = 0;
  double peak_tflops = 0;
  int top = 5;
  std::string json_out;
};
CLI::App* add_advise_command(CLI::App& app, AdviseArgs& args);
int run_advise(const AdviseArgs& args);

}  // namespace tessera
