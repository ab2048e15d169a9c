// tessera colocate: the job recommendation service's co-location experiment (docs/colocation.md)
// and a report of its knowledge base.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

namespace tessera {

struct ColocateArgs {
  std::string policy = "all";  // "all" or a comma list of policy names
  std::string sources = "lucid";
  std::string data_dir;  // empty: $TESSERA_DATA or the build's shared data
  uint64_t seed = 1;
  size_t seeds = 10;
  double epsilon = 0.1;
  double estimate_error = 0.3;  // sigma of the duration estimates' lognormal error
  size_t gpus = 8, slots = 2, jobs = 200;
  double interarrival = 30;
  int k = 0;  // 0: elbow
  bool no_learn = false;
  bool cold_start = false;
  bool kb_report = false;
  bool quiet = false;
  std::string json_out;
};
CLI::App* add_colocate_command(CLI::App& app, ColocateArgs& args);
int run_colocate(const ColocateArgs& args);

}  // namespace tessera
