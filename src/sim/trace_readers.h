// Workload readers. Each returns a Workload sorted by submit time (seconds from the first
// submission in the file, so traces with absolute timestamps start at 0) and throws InputError
// naming the file, line and field on bad input. See docs/traces.md for the mapping of every
// format onto JobSpec.
#pragma once

#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>

#include "model/gpu_type.h"
#include "model/job.h"

namespace tessera {

enum class TraceFormat { kPollux, kPhilly, kTiresias, kAlibaba, kJsonl };

std::optional<TraceFormat> parse_trace_format(std::string_view name);
std::string_view to_string(TraceFormat f);
// Guesses the format from the first line of the file (its CSV header, or a JSON object).
TraceFormat guess_trace_format(const std::string& path);
// The format `name` (a --format flag) names, or the one guessed from the file when it is empty.
// Throws std::invalid_argument naming --format and the known names for anything else.
TraceFormat trace_format_for(const std::string& path, const std::string& name);

struct ReaderOptions {
  // GPU types named by the trace (Alibaba gpu_spec, JSONL gpu_types) are looked up here; an
  // unknown name is an InputError.
  const GpuTypeTable* gpu_types = nullptr;
  // Philly / Tiresias rows that name no model get this Gavel model class (docs/traces.md).
  std::string default_model = "ResNet-50 (batch size 64)";
  size_t max_jobs = 0;  // 0 = all
};

Workload read_workload(const std::string& path, TraceFormat format, const ReaderOptions& opt);
Workload parse_workload(std::string_view text, const std::string& origin, TraceFormat format,
                        const ReaderOptions& opt);

// The format a single line announces (a CSV header, or a JSON object), or nullopt.
std::optional<TraceFormat> guess_trace_format_of_line(std::string_view first_line);

// The Gavel model class (a key of simulation_throughputs.json) that stands in for a Tiresias
// model_name (vgg16, resnet50, ...); `fallback` when none fits. Table in docs/traces.md.
std::string_view gavel_model_for_tiresias(std::string_view name, std::string_view fallback);

// Writes `w` in the native JSONL format, one job per line, so that reading the output back gives
// the same jobs (names, tenants, demands, times; not `source`). GPU type constraints are written
// by name, which needs `gpu_types` (std::invalid_argument without it). Jobs with unknown work
// and no Pollux model cannot be read back (the reader requires `work` for them).
void write_jsonl(const Workload& w, std::ostream& out, const GpuTypeTable* gpu_types = nullptr);

}  // namespace tessera
