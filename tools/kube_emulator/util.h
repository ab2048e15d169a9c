// Small helpers shared by the emulator: timestamps, Kubernetes Status bodies, resource
// quantities, random identifiers and JSON path access.
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <string_view>

namespace kube_emulator {

using json = nlohmann::json;
using Clock = std::chrono::system_clock;

// RFC 3339 in UTC, second resolution ("2026-01-01T00:00:00Z"), as metav1.Time.
std::string rfc3339(Clock::time_point t);
// Microsecond resolution ("2026-01-01T00:00:00.000000Z"), as metav1.MicroTime.
std::string rfc3339_micro(Clock::time_point t);
// Parses both forms (fractional seconds optional); nullopt when malformed.
std::optional<Clock::time_point> parse_rfc3339(const std::string& s);
// kubectl's duration.HumanDuration ("5s", "3m20s", "4h", "2d3h").
std::string human_duration(std::chrono::seconds d);

// A metav1.Status body. `kind` is the (qualified) resource, e.g. "pods" or
// "leases.coordination.k8s.io": details.kind and details.group are split from it.
json status_failure(int code, const std::string& reason, const std::string& message,
                    const std::string& name = "", const std::string& qualified_resource = "");
json status_success(int code = 200, const std::string& name = "",
                    const std::string& qualified_resource = "", const std::string& uid = "");
std::string reason_for_code(int code);

// A Kubernetes resource quantity ("96", "1536Gi", "500m", "1e3") in milli-units;
// nullopt when malformed.
std::optional<int64_t> parse_quantity_milli(const std::string& s);
// Milli-units back to the plain form used in kubelet messages (whole units, rounded up).
int64_t milli_to_units_ceil(int64_t milli);

// Seeded generator for UIDs, generateName suffixes and IPs (not thread-safe: the caller locks).
class Random {
 public:
  explicit Random(uint64_t seed) : rng_(seed) {}
  std::string uid();                      // RFC 4122 version-4 text
  std::string name_suffix(size_t n = 5);  // as apiserver's generateName
  std::string hex(size_t n);
  uint64_t next() { return rng_(); }

 private:
  std::mt19937_64 rng_;
};

// Dotted-path read ("spec.nodeName"); nullptr when absent.
const json* find_path(const json& j, std::string_view dotted);
std::string string_at(const json& j, std::string_view dotted, const std::string& def = "");
bool starts_with(std::string_view s, std::string_view prefix);
std::string url_encode(const std::string& s);
std::string base64_encode(const std::string& s);
std::optional<std::string> base64_decode(const std::string& s);

}  // namespace kube_emulator
