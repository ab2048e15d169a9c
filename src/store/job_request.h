// What a user submits to `tessera serve`, and what the store keeps of it: the job spec of the
// service API, read from YAML or JSON and validated field by field.
//
//   name: hello                      # required; [A-Za-z0-9._-], at most 63 characters
//   tenant: team-a                   # optional: the caller's tenant when absent
//   gang: {min: 2, max: 2}           # or a number (min = max); default 1
//   resources:                       # per member
//     gpus: 1                        # whole GPUs (integer >= 0), or a fraction in (0, 1)
//     cpu: 4                         # Kubernetes quantity: 4, "500m"
//     memory: 16Gi                   # Kubernetes quantity: "16Gi", "512Mi"
//     gpu_types: [A100-80G, H100]    # optional: allowed GPU types
//   priority_class: research         # optional: inference-critical | production | research |
//                                    # best-effort (the queue's default when absent)
//   span: node                       # optional: nvlink | node | rack | spine
//   sla: {max_queueing: 10m}         # optional
//   duration_estimate: 2h            # optional: seconds, or a number with s, m, h or d
//   checkpoint_grace: 30s            # optional: SIGTERM .. SIGKILL on preemption
//   time_limit: 4h                   # optional: each run is stopped (SIGTERM, the grace,
//                                    # SIGKILL) after this long, state timeout; the queue's
//                                    # default when absent, never more than its maximum
//   after_ok: [12, 13]               # optional: start only after these jobs succeeded (one
//                                    # that ends otherwise cancels this one)
//   after_any: [14]                  # optional: start only after these jobs ended, as they may
//   command: ["python", "train.py"]  # required, non-empty argv (no shell unless you ask)
//   env: {BATCH: "64"}               # optional; names [A-Za-z_][A-Za-z0-9_]*
//   adaptive:                        # optional: the scheduler chooses its GPUs (within the
//     batch: 128                     # gang's min..max) and global batch, from what it reports
//     max_batch: 4096                # (serve --policy goodput; docs/goodput.md). The batch it
//     per_gpu: {min: 16, max: 256}   # was tuned for, the largest, and what fits one GPU.
//   dataset: imagenet                # optional: the dataset it reads, staged into the
//                                    # server's dataset cache before it starts (serve
//                                    # --dataset-dir; docs/data.md), or {name, size_gb}
//
// Unknown fields are errors (a typo must not be silently ignored).
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace tessera {

// What a goodput-adaptive job allows of its batch (docs/goodput.md; engine/goodput_model.h's
// BatchLimits): batch = 0 means not adaptive.
struct AdaptiveBatch {
  int32_t batch = 0;        // the global batch it was tuned for
  int32_t max_batch = 0;    // the largest global batch it may train with
  int32_t min_per_gpu = 1;  // per-GPU micro-batch range
  int32_t max_per_gpu = 0;
  bool operator==(const AdaptiveBatch&) const = default;
};
inline constexpr int32_t kMaxAdaptiveBatch = 1 << 24;

// An array's indices, shared by the copies of its spec that its tasks hold: 10,000 tasks each
// copying 10,000 indices took gigabytes. Copies share one immutable list; equality compares
// the indices.
class ArrayIndices {
 public:
  ArrayIndices() = default;
  ArrayIndices(std::vector<int32_t> v)  // NOLINT: implicit, as the vector it stands for
      : v_(v.empty() ? nullptr : std::make_shared<const std::vector<int32_t>>(std::move(v))) {}
  const std::vector<int32_t>& get() const { return v_ ? *v_ : empty_list(); }
  bool empty() const { return get().empty(); }
  size_t size() const { return get().size(); }
  int32_t operator[](size_t i) const { return get()[i]; }
  auto begin() const { return get().begin(); }
  auto end() const { return get().end(); }
  bool operator==(const ArrayIndices& o) const { return v_ == o.v_ || get() == o.get(); }
  bool operator==(const std::vector<int32_t>& o) const { return get() == o; }

 private:
  static const std::vector<int32_t>& empty_list() {
    static const std::vector<int32_t> none;
    return none;
  }
  std::shared_ptr<const std::vector<int32_t>> v_;
};

struct JobRequest {
  std::string name;
  std::string tenant;  // "" = the caller's tenant
  int32_t min_members = 1;
  int32_t max_members = 1;
  int32_t gpus = 1;          // GPUs per member (1 when fractional)
  int32_t gpu_milli = 1000;  // share of each GPU; < 1000 = a fraction of one GPU
  int64_t cpu_milli = 0;
  int64_t mem_mib = 0;
  std::vector<std::string> gpu_types;  // allowed types; empty = any
  std::string priority_class;          // "" = the queue's default
  std::string span;                    // "" = none
  double sla_max_queueing_seconds = -1;
  double duration_estimate_seconds = -1;
  double checkpoint_grace_seconds = -1;  // -1 = the server's default
  double time_limit_seconds = -1;        // -1 = none (the queue's default applies at submit)
  std::vector<int64_t> after_ok;         // job ids that must succeed first
  std::vector<int64_t> after_any;        // job ids that must end first, however
  std::vector<std::string> command;
  std::vector<std::pair<std::string, std::string>> env;  // sorted by name, names unique
  // A job array (`array: "0-99%10"`, as Slurm's --array): one task per index, each a job of
  // its own that sees TESSERA_ARRAY_INDEX, at most array_throttle of them running at once
  // (0 = no limit). Empty = not an array. Sorted, unique.
  ArrayIndices array_indices;
  int32_t array_throttle = 0;
  AdaptiveBatch adaptive;  // batch 0: not adaptive
  // The dataset it reads ("" = none), by a name as job names are, and its size when given
  // (GB; -1: unknown, or the built-in dataset's size).
  std::string dataset;
  double dataset_gb = -1;
  bool operator==(const JobRequest&) const = default;
};

// The most tasks one array may have (indices are at most 7 digits).
inline constexpr size_t kMaxArrayTasks = 10000;
// "0-99%10", "1,3,5-11:2", "0-7": indices (ranges A-B, steps A-B:S, lists) and an optional
// %N throttle. Throws FieldError on `field` saying what is wrong.
void parse_array_spec(std::string_view text, const std::string& field,
                      std::vector<int32_t>& indices, int32_t& throttle);
// The canonical text of an array: ranges of consecutive indices, then %N if throttled.
std::string array_spec_text(const std::vector<int32_t>& indices, int32_t throttle);

// A request that is wrong, naming the field ("resources.gpus", "gang.min", "command[2]", or ""
// for a syntax error, whose message then gives the line).
class FieldError : public std::runtime_error {
 public:
  FieldError(std::string field, const std::string& message);
  const std::string& field() const { return field_; }

 private:
  std::string field_;
};

// The rule for a job's name, which the service also applies to the tenants it creates: 1 to 63
// letters, digits, '.', '_' or '-'.
bool is_valid_name(std::string_view s);

// Validates a parsed JSON object. Throws FieldError.
JobRequest job_request_from_json(const nlohmann::json& j);
// Parses JSON (text starting with '{') or YAML text. Throws FieldError.
JobRequest parse_job_request(std::string_view text);
// The canonical JSON form: job_request_from_json(to_json(r)) == r.
nlohmann::json to_json(const JobRequest& r);

}  // namespace tessera
