// GPU power limits on real NVIDIA GPUs (`tessera serve --apply-power-limits`): what
// each GPU's limit is and may be, and `nvidia-smi -i INDEX -pl WATTS` to change it (root only,
// as the driver requires). Commands run through a CommandRunner, so that tests see the exact
// commands without a GPU.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace tessera {

struct CommandResult {
  int exit_code = 0;   // the command's exit status; 127: it could not be run
  std::string output;  // stdout and stderr together
};
// Runs argv (argv[0] looked up on PATH), waits for it, returns its status and output.
using CommandRunner = std::function<CommandResult(const std::vector<std::string>& argv)>;
CommandResult run_command(const std::vector<std::string>& argv);

// One GPU's power limits (W): in force now, the board's default (its TDP), and the range the
// driver accepts; -1 where not reported.
struct GpuPowerLimits {
  double limit_w = -1;
  double default_w = -1;
  double min_w = -1;
  double max_w = -1;
};

// The query power_limits runs, after the binary: index,power.limit,power.default_limit,
// power.min_limit,power.max_limit in CSV without header or units.
std::vector<std::string> power_limits_query(const std::string& nvidia_smi);
// Parses its output, by host GPU index. Throws std::runtime_error naming the line otherwise.
std::map<int, GpuPowerLimits> parse_power_limits(const std::string& text);
// Runs the query; std::runtime_error (quoting the output) when it fails.
std::map<int, GpuPowerLimits> power_limits(const std::string& nvidia_smi, const CommandRunner& run);

// `nvidia-smi -i INDEX -pl WATTS` (watts rounded to whole W, as the driver takes them).
std::vector<std::string> set_power_limit_command(const std::string& nvidia_smi, int index,
                                                 double watts);

}  // namespace tessera
