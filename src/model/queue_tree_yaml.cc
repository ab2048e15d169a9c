// Reading a queue tree from YAML (docs/fairness.md): every mistake names the file, the line and
// the field; the tree's own invariants are checked by QueueTree::finish().
#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <array>
#include <cmath>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "model/csv.h"
#include "model/gpu_type.h"
#include "model/input_error.h"
#include "model/queue_quota.h"
#include "model/queue_tree.h"
#include "model/yaml_util.h"

namespace tessera {

namespace {

using queue_quota::builtin_types;
using queue_quota::derive_guarantee;
using queue_quota::GuaranteeSum;
using queue_quota::kMaxQuota;
using queue_quota::type_entry;
using queue_quota::type_name;

std::string class_names() {
  return class_list(kAllClasses);
}

// ---- The YAML reader. ----

// A guarantee or borrow_limit mapping; dimensions it does not give are empty.
struct Quota {
  std::array<std::optional<int64_t>, kNumDims> dims;
  std::map<GpuTypeId, int64_t> types;  // milli-GPU
};

// A queue as read, before it joins the tree: its children are read first, so a parent that
// gives no guarantee can take theirs before its limit (guarantee + borrow_limit) is computed.
struct ParsedQueue {
  QueueSpec spec;
  Quota borrow;
  std::vector<ParsedQueue> children;
};

class QueueYamlReader {
 public:
  explicit QueueYamlReader(const std::string& origin) : origin_(origin) {}

  FairnessSettings settings(const YAML::Node& root) const;
  std::vector<ParsedQueue> queue_list(const YAML::Node& n, const std::string& field) const;

 private:
  ParsedQueue queue(const YAML::Node& n, const std::string& field) const;
  Quota quota(const YAML::Node& n, const std::string& field) const;
  int64_t gpu_milli(const YAML::Node& n, const std::string& field) const;
  int64_t cpu_milli(const YAML::Node& n, const std::string& field) const;
  int64_t mem_mib(const YAML::Node& n, const std::string& field) const;
  std::map<GpuTypeId, int64_t> gpu_types(const YAML::Node& n, const std::string& field) const;
  double duration(const YAML::Node& n, const std::string& field) const;
  PriorityClass priority_class(const YAML::Node& n, const std::string& field) const;
  ClassMask classes(const YAML::Node& n, const std::string& field) const;

  const std::string& origin_;
  // Queues read so far: YAML aliases can make a small file name exponentially many (a tree of
  // anchors), so reading stops at a bound no real tree reaches.
  mutable size_t read_ = 0;
};

// More queues than any organisation has; a file past it is refused before it costs memory.
constexpr size_t kMaxQueues = 10000;

FairnessSettings QueueYamlReader::settings(const YAML::Node& root) const {
  FairnessSettings f;
  if (const YAML::Node fair = root["fairness"]) {
    check_keys(origin_, fair, "fairness", {"half_life", "long_term_weight", "count"});
    if (const YAML::Node c = fair["count"]) {
      const std::string v = yaml_string(origin_, c, "fairness.count");
      if (v == "throughput") {
        f.count = FairCount::kThroughput;
      } else if (v != "gpus") {
        yaml_fail(origin_, c, "fairness.count", "expected 'gpus' or 'throughput', got '" + v + "'");
      }
    }
    if (fair["half_life"]) f.half_life_seconds = duration(fair["half_life"], "fairness.half_life");
    if (const YAML::Node w = fair["long_term_weight"]) {
      f.long_term_weight = yaml_number(origin_, w, "fairness.long_term_weight", false);
      if (f.long_term_weight > 1) {
        yaml_fail(origin_, w, "fairness.long_term_weight",
                  "expected a number in [0, 1], got " + w.Scalar());
      }
    } else if (f.half_life_seconds > 0) {
      f.long_term_weight = 0.5;
    }
  }
  if (const YAML::Node pre = root["preemption"]) {
    check_keys(origin_, pre, "preemption",
               {"checkpoint_grace", "starving_after", "min_runtime", "reclaim_min_runtime",
                "reclaim_after", "reclaim_tolerance", "borrow_max_runtime", "reclaim_cost_ratio"});
    if (pre["starving_after"]) {
      f.starving_after_seconds = duration(pre["starving_after"], "preemption.starving_after");
    }
    if (pre["min_runtime"]) {
      f.min_runtime_seconds = duration(pre["min_runtime"], "preemption.min_runtime");
    }
    if (pre["reclaim_min_runtime"]) {
      f.reclaim_min_runtime_seconds =
          duration(pre["reclaim_min_runtime"], "preemption.reclaim_min_runtime");
    }
    if (const YAML::Node tol = pre["reclaim_tolerance"]) {
      f.reclaim_tolerance = yaml_number(origin_, tol, "preemption.reclaim_tolerance", false);
      if (f.reclaim_tolerance > 1) {
        yaml_fail(origin_, tol, "preemption.reclaim_tolerance",
                  "expected a number in [0, 1], got " + tol.Scalar());
      }
    }
    if (const YAML::Node ratio = pre["reclaim_cost_ratio"]) {
      f.reclaim_cost_ratio = yaml_number(origin_, ratio, "preemption.reclaim_cost_ratio", false);
    }
    if (pre["borrow_max_runtime"]) {
      f.borrow_max_runtime_seconds =
          duration(pre["borrow_max_runtime"], "preemption.borrow_max_runtime");
    }
    if (pre["reclaim_after"]) {
      f.reclaim_after_seconds = duration(pre["reclaim_after"], "preemption.reclaim_after");
    }
    if (pre["checkpoint_grace"]) {
      f.checkpoint_grace_seconds = duration(pre["checkpoint_grace"], "preemption.checkpoint_grace");
    }
  }
  return f;
}

std::vector<ParsedQueue> QueueYamlReader::queue_list(const YAML::Node& n,
                                                     const std::string& field) const {
  if (!n.IsSequence() || n.size() == 0) {
    yaml_fail(origin_, n, field, "expected a non-empty list of queues");
  }
  std::vector<ParsedQueue> out;
  for (size_t i = 0; i < n.size(); ++i) {
    out.push_back(queue(n[i], field + "[" + std::to_string(i) + "]"));
  }
  return out;
}

ParsedQueue QueueYamlReader::queue(const YAML::Node& n, const std::string& field) const {
  if (++read_ > kMaxQueues) {
    yaml_fail(origin_, n, field,
              "more than " + std::to_string(kMaxQueues) +
                  " queues (YAML aliases repeat what they name: a tree of them grows "
                  "exponentially)");
  }
  check_keys(origin_, n, field,
             {"name", "weight", "guarantee", "borrow_limit", "priority_classes",
              "default_priority_class", "default_sla", "time_limit", "memory", "namespaces",
              "tenant_limits", "energy_weight", "carbon_defer", "queues"});
  ParsedQueue p;
  QueueSpec& s = p.spec;
  s.source = origin_ + ":" + std::to_string(line_of(n));
  if (!n["name"]) yaml_fail(origin_, n, field + ".name", "missing");
  s.name = yaml_string(origin_, n["name"], field + ".name");
  if (n["weight"]) s.weight = yaml_number(origin_, n["weight"], field + ".weight", true);
  if (n["guarantee"]) {
    const Quota g = quota(n["guarantee"], field + ".guarantee");
    for (size_t d = 0; d < kNumDims; ++d) s.guarantee[d] = g.dims[d].value_or(0);
    int64_t typed = 0;
    for (const auto& [t, milli] : g.types) {
      type_entry(s, t).guarantee_milli = milli;
      typed += milli;
    }
    // "gpu_types: {A100-80G: 8}" alone means 8 GPUs, all of that type.
    if (!g.dims[kGpuDim]) s.guarantee[kGpuDim] = typed;
  }
  if (n["borrow_limit"]) p.borrow = quota(n["borrow_limit"], field + ".borrow_limit");
  if (n["priority_classes"]) {
    s.allowed_classes = classes(n["priority_classes"], field + ".priority_classes");
    s.classes_given = true;
  }
  if (const YAML::Node def = n["default_priority_class"]) {
    s.default_class = priority_class(def, field + ".default_priority_class");
    s.has_default_class = true;
    if ((s.allowed_classes & class_bit(s.default_class)) == 0) {
      yaml_fail(origin_, def, field + ".default_priority_class",
                std::string(to_string(s.default_class)) +
                    " is not among the queue's priority_classes (" + class_list(s.allowed_classes) +
                    ")");
    }
  }
  if (const YAML::Node e = n["energy_weight"]) {
    s.energy_weight = yaml_number(origin_, e, field + ".energy_weight", false);
    if (!(s.energy_weight >= 0 && s.energy_weight <= 1)) {
      yaml_fail(origin_, e, field + ".energy_weight",
                fmt::format("expected a number from 0 (full power) to 1 (least energy), got {}",
                            s.energy_weight));
    }
  }
  if (n["carbon_defer"]) {
    s.carbon_defer_seconds = duration(n["carbon_defer"], field + ".carbon_defer");
  }
  if (n["default_sla"]) s.default_sla_seconds = duration(n["default_sla"], field + ".default_sla");
  if (const YAML::Node tl = n["time_limit"]) {
    const std::string f = field + ".time_limit";
    check_keys(origin_, tl, f, {"default", "max"});
    for (const auto& [key, into] : {std::pair{"default", &s.default_time_limit_seconds},
                                    std::pair{"max", &s.max_time_limit_seconds}}) {
      if (!tl[key]) continue;
      *into = duration(tl[key], f + "." + key);
      if (!(*into > 0)) yaml_fail(origin_, tl[key], f + "." + key, "must be more than 0");
    }
  }
  if (const YAML::Node ns = n["namespaces"]) {
    const std::string f = field + ".namespaces";
    if (!ns.IsSequence() || ns.size() == 0) {
      yaml_fail(origin_, ns, f, "expected a non-empty list of namespaces (or \"*\")");
    }
    for (size_t i = 0; i < ns.size(); ++i) {
      s.namespaces.push_back(yaml_string(origin_, ns[i], f + "[" + std::to_string(i) + "]"));
    }
  }
  if (const YAML::Node mem = n["memory"]) {
    const std::string f = field + ".memory";
    check_keys(origin_, mem, f, {"default", "max"});
    for (const auto& [key, into] :
         {std::pair{"default", &s.default_memory_mib}, std::pair{"max", &s.max_memory_mib}}) {
      if (!mem[key]) continue;
      *into = mem_mib(mem[key], f + "." + key);
      if (*into <= 0) yaml_fail(origin_, mem[key], f + "." + key, "must be more than 0");
    }
  }
  if (const YAML::Node lim = n["tenant_limits"]) {
    const std::string f = field + ".tenant_limits";
    check_keys(origin_, lim, f,
               {"max_pending_jobs", "max_pending_jobs_per_user", "max_gang_size", "max_processes",
                "submissions_per_second"});
    if (lim["max_pending_jobs_per_user"]) {
      s.max_pending_jobs_per_user = yaml_int(origin_, lim["max_pending_jobs_per_user"],
                                             f + ".max_pending_jobs_per_user", 1, 100000000);
    }
    if (lim["max_pending_jobs"]) {
      s.max_pending_jobs =
          yaml_int(origin_, lim["max_pending_jobs"], f + ".max_pending_jobs", 1, 100000000);
    }
    if (lim["max_gang_size"]) {
      s.max_gang_size = yaml_int(origin_, lim["max_gang_size"], f + ".max_gang_size", 1, 1000000);
    }
    if (lim["max_processes"]) {
      s.max_processes = yaml_int(origin_, lim["max_processes"], f + ".max_processes", 1, 100000000);
    }
    if (lim["submissions_per_second"]) {
      s.submissions_per_second =
          yaml_number(origin_, lim["submissions_per_second"], f + ".submissions_per_second", false);
    }
  }
  if (n["queues"]) p.children = queue_list(n["queues"], field + ".queues");

  if (!p.children.empty()) {
    GuaranteeSum sum;
    for (const ParsedQueue& c : p.children) sum.add(c.spec);
    derive_guarantee(s, sum);
  }
  for (size_t d = 0; d < kNumDims; ++d) {
    if (p.borrow.dims[d]) s.limit[d] = s.guarantee[d] + *p.borrow.dims[d];
  }
  for (const auto& [t, milli] : p.borrow.types) {
    TypeQuota& tq = type_entry(s, t);
    tq.limit_milli = tq.guarantee_milli + milli;
  }
  return p;
}

Quota QueueYamlReader::quota(const YAML::Node& n, const std::string& field) const {
  check_keys(origin_, n, field, {"gpus", "cpu", "memory", "gpu_types"});
  Quota q;
  if (n["gpus"]) q.dims[kGpuDim] = gpu_milli(n["gpus"], field + ".gpus");
  if (n["cpu"]) q.dims[kCpuDim] = cpu_milli(n["cpu"], field + ".cpu");
  if (n["memory"]) q.dims[kMemDim] = mem_mib(n["memory"], field + ".memory");
  if (n["gpu_types"]) q.types = gpu_types(n["gpu_types"], field + ".gpu_types");
  return q;
}

int64_t QueueYamlReader::gpu_milli(const YAML::Node& n, const std::string& field) const {
  const double gpus = yaml_number(origin_, n, field, false);
  if (gpus * 1000 > static_cast<double>(kMaxQuota)) yaml_fail(origin_, n, field, "too large");
  return std::llround(gpus * 1000);
}

int64_t QueueYamlReader::cpu_milli(const YAML::Node& n, const std::string& field) const {
  const std::string s = scalar_of(origin_, n, field, "a CPU quantity");
  int64_t milli = 0;
  if (!parse_cpu_quantity(s, milli) || milli < 0) {
    yaml_fail(origin_, n, field,
              "expected a non-negative CPU quantity (cores like 64, or millicores like 500m), "
              "got '" +
                  s + "'");
  }
  if (milli > kMaxQuota) yaml_fail(origin_, n, field, "too large");
  return milli;
}

int64_t QueueYamlReader::mem_mib(const YAML::Node& n, const std::string& field) const {
  const std::string s = scalar_of(origin_, n, field, "a memory quantity");
  int64_t mib = 0;
  if (!parse_memory_quantity(s, mib) || mib < 0) {
    yaml_fail(
        origin_, n, field,
        "expected a non-negative memory quantity (like 256Gi, 512Mi, or bytes), got '" + s + "'");
  }
  if (mib > kMaxQuota) yaml_fail(origin_, n, field, "too large");
  return mib;
}

std::map<GpuTypeId, int64_t> QueueYamlReader::gpu_types(const YAML::Node& n,
                                                        const std::string& field) const {
  if (!n.IsMap()) yaml_fail(origin_, n, field, "expected a mapping of GPU type to GPUs");
  std::map<GpuTypeId, int64_t> out;
  for (const auto& kv : n) {
    const std::string name = scalar_of(origin_, kv.first, field, "a GPU type name");
    const std::string where = field + "." + name;
    std::optional<GpuTypeId> t;
    try {
      t = builtin_types().known(name);
    } catch (const std::invalid_argument& e) {
      yaml_fail(origin_, kv.first, where, e.what());
    }
    // Names match case-insensitively, so two keys may name one type.
    if (!out.emplace(*t, gpu_milli(kv.second, where)).second) {
      yaml_fail(origin_, kv.first, where, "GPU type " + type_name(*t) + " listed twice");
    }
  }
  return out;
}

double QueueYamlReader::duration(const YAML::Node& n, const std::string& field) const {
  const std::string s = scalar_of(origin_, n, field, "a duration");
  double seconds = 0;
  if (!parse_duration(s, seconds)) {
    yaml_fail(origin_, n, field,
              "expected a non-negative duration (seconds, or a number with suffix s, m, h or d "
              "like 30s or 24h), got '" +
                  s + "'");
  }
  return seconds;
}

PriorityClass QueueYamlReader::priority_class(const YAML::Node& n, const std::string& field) const {
  const std::string s = scalar_of(origin_, n, field, "a priority class");
  PriorityClass p = PriorityClass::kResearch;
  if (!parse_priority_class(s, p)) {
    yaml_fail(origin_, n, field,
              "unknown priority class '" + s + "' (known: " + class_names() + ")");
  }
  return p;
}

ClassMask QueueYamlReader::classes(const YAML::Node& n, const std::string& field) const {
  if (!n.IsSequence() || n.size() == 0) {
    yaml_fail(origin_, n, field, "expected a non-empty list of priority classes");
  }
  ClassMask mask = 0;
  for (size_t i = 0; i < n.size(); ++i) {
    mask |= class_bit(priority_class(n[i], field + "[" + std::to_string(i) + "]"));
  }
  return mask;
}

void add_subtree(QueueTree& tree, QueueId parent, ParsedQueue& p) {
  const QueueId id = tree.add(parent, std::move(p.spec));
  for (ParsedQueue& c : p.children) add_subtree(tree, id, c);
}

QueueTree read_tree(const YAML::Node& root, const std::string& origin) {
  check_keys(origin, root, "", {"fairness", "preemption", "queues"});
  const QueueYamlReader reader(origin);
  QueueTree tree;
  tree.settings() = reader.settings(root);
  if (!root["queues"])
    yaml_fail(origin, root, "queues", "missing: a tree needs at least one queue");
  for (ParsedQueue& p : reader.queue_list(root["queues"], "queues")) {
    add_subtree(tree, kRootQueue, p);
  }
  tree.finish();
  return tree;
}

InputError yaml_error(const std::string& origin, const YAML::Exception& e) {
  const size_t line = e.mark.is_null() ? 0 : static_cast<size_t>(e.mark.line) + 1;
  return InputError(input_error_message(origin, line, "", "YAML: " + e.msg));
}

}  // namespace

QueueTree parse_queue_tree_yaml(std::string_view text, const std::string& origin) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    const size_t line = e.mark.is_null() ? 0 : static_cast<size_t>(e.mark.line) + 1;
    throw InputError(input_error_message(origin, line, "", yaml_syntax_message(text, e)));
  }
  if (!root || root.IsNull()) throw InputError(input_error_message(origin, 0, "", "empty file"));
  try {
    return read_tree(root, origin);
  } catch (const YAML::Exception& e) {
    // yaml-cpp throws on access to a node of the wrong shape (e.g. indexing a scalar).
    throw yaml_error(origin, e);
  }
}

QueueTree load_queue_tree(const std::string& path) {
  return parse_queue_tree_yaml(csv::read_file(path), path);
}

}  // namespace tessera
