// What the NVIDIA driver reports about this host's GPUs, read through `nvidia-smi` (present
// wherever the driver is; no CUDA toolkit or NVML headers needed to build Tessera).
//
// Used for GPU discovery (what a local backend may schedule on) and for black-box job
// profiles: utilization.gpu is the share of the sample period a kernel ran (the profile's
// peak GPU utilisation), utilization.memory the share during which device memory was read or
// written (peak GPU time accessing memory), memory.used / memory.total the memory allocated.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tessera {

// One GPU at one moment. A counter the driver does not report ("[N/A]", "[Not Supported]",
// e.g. utilisation under MIG) is -1.
struct GpuReading {
  int index = 0;
  std::string uuid;
  std::string name;  // e.g. "NVIDIA H100 80GB HBM3"
  double memory_total_mib = -1;
  double memory_used_mib = -1;
  double util_gpu_pct = -1;
  double util_mem_pct = -1;
  // Board power draw and the power limit in force (W); -1 when not reported ([N/A]) or not
  // queried (an output of the query without the power fields).
  double power_draw_w = -1;
  double power_limit_w = -1;
  // The GPU core's temperature (°C; temperature.gpu); -1 when not reported or not queried.
  double temperature_c = -1;

  // memory.used / memory.total in percent, or -1 when either is unknown.
  double memory_used_pct() const;
};

// The --query-gpu fields query_gpus asks for, in order. The parser also takes the queries of
// earlier versions: the first seven (no power fields) and the first nine (no temperature).
inline constexpr std::string_view kNvidiaSmiQuery =
    "index,uuid,name,memory.total,memory.used,utilization.gpu,utilization.memory,power.draw,"
    "power.limit,temperature.gpu";

// Parses `nvidia-smi --query-gpu=<kNvidiaSmiQuery> --format=csv,noheader,nounits`: 10 fields, or
// the first 7 or 9 of them. Throws InputError naming `origin`, the line and the field on
// malformed output.
std::vector<GpuReading> parse_nvidia_smi_csv(std::string_view text, const std::string& origin);

// Runs `binary` (normally "nvidia-smi", found on PATH) once and parses what it prints. Throws
// std::runtime_error when it cannot run or exits with an error (no driver, no GPU), quoting
// its output.
std::vector<GpuReading> query_gpus(const std::string& binary = "nvidia-smi");

// The Tessera GPU type name for a driver's product name: "NVIDIA H100 80GB HBM3" -> "H100",
// "Tesla V100-SXM2-32GB" -> "V100", "NVIDIA A100-SXM4-80GB" -> "A100-80G"; unknown names are
// returned without their vendor prefix.
std::string gpu_type_name(std::string_view product_name);

}  // namespace tessera
