#include "backend/nvidia_smi.h"

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <memory>
#include <stdexcept>

#include "model/csv.h"
#include "model/input_error.h"

namespace tessera {

double GpuReading::memory_used_pct() const {
  if (memory_total_mib <= 0 || memory_used_mib < 0) return -1;
  return 100.0 * memory_used_mib / memory_total_mib;
}

namespace {

constexpr std::array<std::string_view, 10> kFields = {"index",
                                                      "uuid",
                                                      "name",
                                                      "memory.total",
                                                      "memory.used",
                                                      "utilization.gpu",
                                                      "utilization.memory",
                                                      "power.draw",
                                                      "power.limit",
                                                      "temperature.gpu"};
constexpr size_t kFieldsWithoutPower = 7;
constexpr size_t kFieldsWithoutTemperature = 9;

// A counter: a number, or -1 for what the driver does not report.
double counter(std::string_view s, const std::string& origin, size_t line, size_t field) {
  if (s.starts_with("[") || s == "N/A") return -1;  // [N/A], [Not Supported], [Unknown Error]
  double v = 0;
  if (!csv::parse_double(s, v) || v < 0) {
    throw InputError(input_error_message(origin, line, std::string(kFields[field]),
                                         "expected a number, got '" + std::string(s) + "'"));
  }
  return v;
}

bool contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

}  // namespace

std::vector<GpuReading> parse_nvidia_smi_csv(std::string_view text, const std::string& origin) {
  std::vector<GpuReading> out;
  csv::LineReader lines(text);
  std::string_view line;
  std::vector<std::string_view> f;
  while (lines.next(line)) {
    if (csv::is_blank(line)) continue;
    csv::split(line, f);
    const size_t n = lines.line_number();
    if (f.size() != kFields.size() && f.size() != kFieldsWithoutPower &&
        f.size() != kFieldsWithoutTemperature) {
      throw InputError(input_error_message(
          origin, n, "",
          "expected " + std::to_string(kFieldsWithoutPower) + ", " +
              std::to_string(kFieldsWithoutTemperature) + " or " + std::to_string(kFields.size()) +
              " fields (" + std::string(kNvidiaSmiQuery) +
              "; the power and temperature fields optional), got " + std::to_string(f.size()) +
              ": '" + std::string(line) + "'"));
    }
    GpuReading r;
    int64_t index = 0;
    if (!csv::parse_int(f[0], index) || index < 0) {
      throw InputError(input_error_message(
          origin, n, "index", "expected a GPU index, got '" + std::string(f[0]) + "'"));
    }
    r.index = static_cast<int>(index);
    r.uuid = std::string(f[1]);
    r.name = std::string(f[2]);
    r.memory_total_mib = counter(f[3], origin, n, 3);
    r.memory_used_mib = counter(f[4], origin, n, 4);
    r.util_gpu_pct = counter(f[5], origin, n, 5);
    r.util_mem_pct = counter(f[6], origin, n, 6);
    if (f.size() >= kFieldsWithoutTemperature) {
      r.power_draw_w = counter(f[7], origin, n, 7);
      r.power_limit_w = counter(f[8], origin, n, 8);
    }
    if (f.size() == kFields.size()) r.temperature_c = counter(f[9], origin, n, 9);
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<GpuReading> query_gpus(const std::string& binary) {
  const std::string cmd = "'" + binary + "' --query-gpu=" + std::string(kNvidiaSmiQuery) +
                          " --format=csv,noheader,nounits 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen(cmd.c_str(), "r"), pclose);
  if (!p) throw std::runtime_error("cannot run " + binary);
  std::string text;
  std::array<char, 4096> buf{};
  while (size_t k = fread(buf.data(), 1, buf.size(), p.get())) text.append(buf.data(), k);
  const int rc = pclose(p.release());
  if (rc != 0) {
    const std::string why = WIFEXITED(rc) && WEXITSTATUS(rc) == 127
                                ? "not found (is the NVIDIA driver installed?)"
                                : "failed: " + std::string(csv::trim(text));
    throw std::runtime_error(binary + " " + why);
  }
  return parse_nvidia_smi_csv(text, binary);
}

std::string gpu_type_name(std::string_view product) {
  std::string_view s = product;
  for (std::string_view prefix : {"NVIDIA ", "Tesla ", "GeForce ", "Quadro "}) {
    if (s.starts_with(prefix)) s.remove_prefix(prefix.size());
  }
  if (contains(s, "H100") || contains(s, "H200") || contains(s, "GH200")) {
    return contains(s, "H200") ? "H200" : "H100";
  }
  if (contains(s, "A100")) return contains(s, "80GB") ? "A100-80G" : "A100-40G";
  if (contains(s, "V100")) return contains(s, "32GB") ? "V100-32G" : "V100";
  for (std::string_view known : {"A10G", "A10", "T4", "P100", "K80", "L4", "L40S", "L40"}) {
    if (s.starts_with(known) &&
        (s.size() == known.size() || s[known.size()] == ' ' || s[known.size()] == '-')) {
      return known == "A10G" ? "A10" : std::string(known);
    }
  }
  return std::string(s);
}

}  // namespace tessera
