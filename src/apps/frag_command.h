// tessera frag: the FGD paper's capacity experiment on Alibaba's GPU-sharing trace.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace tessera {

struct FragArgs {
  std::string nodes;  // empty: the shared data's openb_node_list_gpu_node.csv
  std::string pods;   // empty: the shared data's openb_pod_list_default.csv
  std::string policy = "fgd";
  int seeds = 1;
  int first_seed = 42;
  double inflate = 1.3;
  std::string json_out;
  bool quiet = false;
};
CLI::App* add_frag_command(CLI::App& app, FragArgs& args);
int run_frag_command(const FragArgs& args);

}  // namespace tessera
