// Subcommands that touch this host's real GPUs: `tessera gpus` (discovery) and
// `tessera profile` (a job's black-box profile for the recommendation service).
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace tessera {

struct GpusArgs {
  std::string nvidia_smi = "nvidia-smi";
  std::string json_out;
  bool cluster_yaml = false;  // print a Tessera cluster spec of this host
};
CLI::App* add_gpus_command(CLI::App& app, GpusArgs& args);
int run_gpus(const GpusArgs& args);

struct ProfileArgs {
  std::vector<std::string> command;
  int gpu = 0;
  double window = 120;
  double interval = 1;
  bool keep_running = false;
  std::string nvidia_smi = "nvidia-smi";
  std::string json_out;
  std::string data_dir;  // holds interference/ (the knowledge base); empty: the default
  bool no_kb = false;    // skip placing the job in the knowledge base
};
CLI::App* add_profile_command(CLI::App& app, ProfileArgs& args);
int run_profile(const ProfileArgs& args);

}  // namespace tessera
