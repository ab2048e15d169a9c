// Helpers the YAML readers share (cluster descriptions, queue trees). Every failure is an
// InputError naming the file, the line of the offending node and the field.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace tessera {

// 1-based line of a node, or 0 when yaml-cpp knows none.
// The documents of a YAML stream, each loaded with YAML::Load; empty ones are left out. The
// stream is split at its document markers ("---" or "..." at the start of a line, alone or
// before a space; YAML forbids them inside content), because yaml-cpp 0.7's LoadAll loops
// forever on some malformed input (", a": found by fuzzing) while Load reads the first
// document only. Line numbers in the nodes' marks are those of the whole stream.
std::vector<YAML::Node> load_yaml_documents(std::string_view text);

size_t line_of(const YAML::Node& n);

// Where a YAML syntax error is, shown: "\n  3 | resources: gpus: 1\n    |                ^"
// (the line of `text` at `mark`, a caret under its column); "" when the mark is unknown. The
// line is cut to 120 characters around the column, control characters shown as '?'.
std::string yaml_excerpt(std::string_view text, const YAML::Mark& mark);

// "YAML: illegal map value" with the excerpt of `text` where it was found.
std::string yaml_syntax_message(std::string_view text, const YAML::Exception& e);

[[noreturn]] void yaml_fail(const std::string& origin, const YAML::Node& n,
                            const std::string& field, const std::string& msg);

// The node's scalar text; fails with "expected <what>" on a sequence or mapping.
std::string scalar_of(const std::string& origin, const YAML::Node& n, const std::string& field,
                      const char* what);

// An integer in [min, max]; the message names the range.
int64_t yaml_int(const std::string& origin, const YAML::Node& n, const std::string& field,
                 int64_t min, int64_t max);

// A finite number >= 0 (> 0 when strictly_positive).
double yaml_number(const std::string& origin, const YAML::Node& n, const std::string& field,
                   bool strictly_positive);

// A non-empty string.
std::string yaml_string(const std::string& origin, const YAML::Node& n, const std::string& field);

// Fails unless `map` is a mapping whose keys are all in `known`; the message lists them.
void check_keys(const std::string& origin, const YAML::Node& map, const std::string& where,
                std::initializer_list<std::string_view> known);

// Kubernetes resource quantities: "64000m" or "64" CPUs -> milli-CPU; "262144Mi", "256Gi",
// plain bytes, ... -> MiB. Return false on anything else.
bool parse_cpu_quantity(std::string_view s, int64_t& milli);
bool parse_memory_quantity(std::string_view s, int64_t& mib);

// The longest duration any setting takes: 100 years. Longer ones are refused where they are
// read, so that every duration converts to whole seconds (int64) and nanoseconds safely.
inline constexpr double kMaxDurationSeconds = 100.0 * 365 * 86400;

// Durations: "30" or "30s", "10m", "24h", "1.5d" -> seconds. Returns false on anything else,
// and on a negative, non-finite or longer than kMaxDurationSeconds value.
bool parse_duration(std::string_view s, double& seconds);

}  // namespace tessera
