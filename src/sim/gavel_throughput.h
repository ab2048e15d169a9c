// Gavel's measured training throughputs (stanford-futuredata/gavel,
// simulation_throughputs.json; Narayanan et al., OSDI'20) as a placement speed for its model
// classes. docs/execution-model.md gives the formulas and fallbacks.
//
// The file maps a worker type (k80, p100, v100, and <type>_unconsolidated for jobs spread over
// several servers) to keys "('<model>', <scale factor>)" (scale factor = GPUs of the job), whose
// "null" entry is the isolated throughput in steps/s; the other entries are co-located pairs.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "model/gpu_type.h"
#include "sim/execution_model.h"

namespace tessera {

class GavelThroughputs {
 public:
  // Throws InputError naming the file on unreadable or malformed input.
  static GavelThroughputs load(const std::string& path);
  static GavelThroughputs parse(std::string_view json_text, const std::string& origin);

  // Whether `model` (e.g. "ResNet-50 (batch size 64)") was measured at all.
  bool has_model(std::string_view model) const;
  // Isolated throughput (steps/s) of `model` at `scale` GPUs on `worker_type` ("v100",
  // "k80_unconsolidated", ...); nullopt where not measured or measured as 0 (did not run).
  std::optional<double> throughput(std::string_view worker_type, std::string_view model,
                                   int scale) const;

  // Gavel's worker type for a GPU type name: "k80", "p100", "v100" (V100M16, V100M32 and
  // V100-32G too), or "" for types Gavel did not measure.
  static std::string worker_type_of(std::string_view gpu_type_name);

  // Single-GPU throughput on `type` relative to V100; falls back to the relative-speed table
  // where Gavel did not measure the model on that type.
  double type_factor(std::string_view model, const GpuType& type) const;
  // Throughput spread over several servers relative to consolidated, for a job of `gpus` GPUs
  // (nearest measured scale <= gpus), at most 1; V100's ratio where `type` lacks it, 1 where no
  // type has it.
  double spread_factor(std::string_view model, int gpus, const GpuType& type) const;
  // Throughput on `shape` relative to consolidated on V100 (type_factor x spread_factor).
  double speed(std::string_view model, const PlacementShape& shape,
               const GpuTypeTable& types) const;

 private:
  // (worker type, model) -> scale -> isolated steps/s (> 0 only).
  std::map<std::pair<std::string, std::string>, std::map<int, double>> thr_;
  std::set<std::string, std::less<>> models_;  // every model with some throughput
};

}  // namespace tessera
