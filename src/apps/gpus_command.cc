// tessera gpus: the GPUs the NVIDIA driver reports on this host, as a table, JSON, or a
// one-node Tessera cluster spec (what `tessera serve` would schedule on).
#include <fmt/format.h>
#include <unistd.h>

#include <climits>
#include <fstream>
#include <iostream>
#include <map>

#include <nlohmann/json.hpp>

#include "apps/gpu_commands.h"
#include "apps/json_file.h"
#include "backend/nvidia_smi.h"

namespace tessera {

CLI::App* add_gpus_command(CLI::App& app, GpusArgs& a) {
  CLI::App* s = app.add_subcommand("gpus", "List this host's GPUs (through nvidia-smi)");
  s->add_option("--nvidia-smi", a.nvidia_smi, "nvidia-smi binary (default: on PATH)");
  s->add_option("--json", a.json_out, "write the GPUs as JSON to this file");
  s->add_flag("--cluster-yaml", a.cluster_yaml,
              "print a cluster spec (YAML) of this host for --cluster");
  return s;
}

int run_gpus(const GpusArgs& a) {
  const std::vector<GpuReading> gpus = query_gpus(a.nvidia_smi);
  nlohmann::ordered_json j = nlohmann::ordered_json::array();
  for (const GpuReading& g : gpus) {
    j.push_back({{"index", g.index},
                 {"uuid", g.uuid},
                 {"name", g.name},
                 {"gpu_type", gpu_type_name(g.name)},
                 {"memory_total_mib", g.memory_total_mib},
                 {"memory_used_mib", g.memory_used_mib},
                 {"utilization_gpu_pct", g.util_gpu_pct},
                 {"utilization_memory_pct", g.util_mem_pct}});
  }
  write_json_file(a.json_out, j);
  if (a.cluster_yaml) {
    // One node per GPU type (a host with mixed GPUs becomes several nodes of one rack).
    char host[HOST_NAME_MAX + 1] = {};
    gethostname(host, sizeof host - 1);
    std::map<std::string, std::pair<int, double>> by_type;  // count, memory
    for (const GpuReading& g : gpus) {
      auto& [count, mem] = by_type[gpu_type_name(g.name)];
      ++count;
      mem = g.memory_total_mib;
    }
    std::cout << "nodes:\n";
    for (const auto& [type, cm] : by_type) {
      const std::string name =
          by_type.size() == 1 ? std::string(host) : std::string(host) + "-" + type;
      std::cout << fmt::format(
          "  - {{name: {}, rack: r0, spine: s0, gpus: {}, gpu_type: {}, cpu_milli: {}, "
          "mem_mib: {}}}\n",
          name, cm.first, type, 1000 * sysconf(_SC_NPROCESSORS_ONLN),
          sysconf(_SC_PHYS_PAGES) / 1024 * sysconf(_SC_PAGESIZE) / 1024);
    }
    return 0;
  }
  std::cout << fmt::format("{:>5}  {:<28}{:<10}{:>12}{:>12}{:>8}{:>8}\n", "index", "name", "type",
                           "memory MiB", "used MiB", "util %", "mem %");
  auto num = [](double v) { return v < 0 ? std::string("n/a") : fmt::format("{:.0f}", v); };
  for (const GpuReading& g : gpus) {
    std::cout << fmt::format("{:>5}  {:<28}{:<10}{:>12}{:>12}{:>8}{:>8}\n", g.index, g.name,
                             gpu_type_name(g.name), num(g.memory_total_mib), num(g.memory_used_mib),
                             num(g.util_gpu_pct), num(g.util_mem_pct));
  }
  return 0;
}

}  // namespace tessera
