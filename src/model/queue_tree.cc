#include "model/queue_tree.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "model/csv.h"
#include "model/gpu_type.h"
#include "model/input_error.h"
#include "model/yaml_util.h"

namespace tessera {

namespace {

// Larger quotas are typos; the bound keeps sums of many guarantees far below kUnlimited.
constexpr int64_t kMaxQuota = int64_t{1} << 50;
// Error messages list at most this many leaves (a generated tree may have thousands).
constexpr size_t kMaxListed = 20;

constexpr PriorityClass kClasses[] = {PriorityClass::kBestEffort, PriorityClass::kResearch,
                                      PriorityClass::kProduction,
                                      PriorityClass::kInferenceCritical};

// ---- Human-readable amounts for error messages. ----

// Queue trees name GPU types by the built-in table; a cluster's table extends it, so the ids
// agree with every cluster's.
const GpuTypeTable& builtin_types() {
  static const GpuTypeTable table = GpuTypeTable::builtin();
  return table;
}

std::string type_name(GpuTypeId t) {
  return t < builtin_types().size() ? builtin_types().at(t).name : "#" + std::to_string(t);
}

// 16000 -> "16", 500 -> "0.5".
std::string milli_text(int64_t milli) {
  if (milli < 0) return "-" + milli_text(-milli);
  std::string out = std::to_string(milli / 1000);
  if (milli % 1000 == 0) return out;
  std::string frac = std::to_string(1000 + milli % 1000).substr(1);  // zero-padded
  while (frac.back() == '0') frac.pop_back();
  return out + "." + frac;
}

std::string gpus_text(int64_t milli, const std::string& type = "") {
  if (milli >= kUnlimited) return "unlimited";
  const std::string unit = milli == 1000 ? "GPU" : "GPUs";
  return milli_text(milli) + " " + (type.empty() ? unit : type + " " + unit);
}

std::string amount_text(size_t d, int64_t v) {
  if (v >= kUnlimited) return "unlimited";
  switch (d) {
    case kGpuDim:
      return gpus_text(v);
    case kCpuDim:
      return milli_text(v) + (v == 1000 ? " core" : " cores");
    default:
      return v != 0 && v % 1024 == 0 ? std::to_string(v / 1024) + " GiB"
                                     : std::to_string(v) + " MiB";
  }
}

// The YAML key of each dimension.
std::string dim_key(size_t d) {
  static const char* const kKeys[kNumDims] = {"gpus", "cpu", "memory"};
  return kKeys[d];
}

}  // namespace

std::string class_list(ClassMask mask) {
  std::string out;
  for (PriorityClass p : kClasses) {
    if ((mask & class_bit(p)) == 0) continue;
    if (!out.empty()) out += ", ";
    out += to_string(p);
  }
  return out.empty() ? "none" : out;
}

namespace {

std::string class_names() {
  return class_list(kAllClasses);
}

// "a, b, c, ... (12 more)".
std::string capped_list(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size() && i < kMaxListed; ++i) out += (i ? ", " : "") + items[i];
  if (items.size() > kMaxListed) {
    out += ", ... (" + std::to_string(items.size() - kMaxListed) + " more)";
  }
  return out;
}

// ---- Quota arithmetic shared by finish() and the YAML reader. ----

int64_t type_guarantee(const QueueSpec& q, GpuTypeId t) {
  for (const TypeQuota& tq : q.by_type) {
    if (tq.type == t) return tq.guarantee_milli;
  }
  return 0;
}

// The entry of type t, added (no guarantee, no limit) if the queue has none; keeps the order.
TypeQuota& type_entry(QueueSpec& q, GpuTypeId t) {
  auto it = std::lower_bound(q.by_type.begin(), q.by_type.end(), t,
                             [](const TypeQuota& a, GpuTypeId b) { return a.type < b; });
  if (it == q.by_type.end() || it->type != t) {
    TypeQuota fresh;
    fresh.type = t;
    it = q.by_type.insert(it, fresh);
  }
  return *it;
}

// What a queue's children guarantee together, per dimension and per GPU type.
struct GuaranteeSum {
  Amounts dims = kZeroAmounts;
  std::map<GpuTypeId, int64_t> types;

  void add(const QueueSpec& q) {
    dims = dims + q.guarantee;
    for (const TypeQuota& tq : q.by_type) types[tq.type] += tq.guarantee_milli;
  }
};

GuaranteeSum children_sum(const std::vector<QueueSpec>& qs, QueueId q) {
  GuaranteeSum sum;
  for (QueueId c : qs[q].children) sum.add(qs[c]);
  return sum;
}

// A team's guarantee is what its sub-teams are guaranteed unless it says otherwise: a parent
// that gives none (zero) on a dimension or GPU type takes its children's sum there.
void derive_guarantee(QueueSpec& parent, const GuaranteeSum& sum) {
  for (size_t d = 0; d < kNumDims; ++d) {
    if (parent.guarantee[d] == 0) parent.guarantee[d] = sum.dims[d];
  }
  for (const auto& [t, g] : sum.types) {
    if (g == 0) continue;
    TypeQuota& tq = type_entry(parent, t);
    if (tq.guarantee_milli == 0) tq.guarantee_milli = g;
  }
}

// ---- finish(): invariants, each error naming the queue's source and YAML field. ----

// Where queue q sits in the YAML, e.g. "queues[1].queues[0]" (children keep the file's
// order, so this is exact for loaded trees); "" for the root.
std::string field_of(const std::vector<QueueSpec>& qs, QueueId q) {
  std::string out;
  while (q != kRootQueue) {
    const std::vector<QueueId>& siblings = qs[qs[q].parent].children;
    const auto index = std::find(siblings.begin(), siblings.end(), q) - siblings.begin();
    out = "queues[" + std::to_string(index) + "]" + (out.empty() ? "" : "." + out);
    q = qs[q].parent;
  }
  return out;
}

std::string describe(const QueueSpec& q) {
  return q.path.empty() ? "the root queue" : "queue '" + q.path + "'";
}

[[noreturn]] void queue_fail(const std::vector<QueueSpec>& qs, QueueId q, const std::string& field,
                             const std::string& msg) {
  const std::string& source = qs[q].source;
  const std::string where = field_of(qs, q);
  throw InputError(input_error_message(source.empty() ? "queue tree" : source, 0,
                                       where.empty() ? field : where + "." + field, msg));
}

void check_own_fields(const std::vector<QueueSpec>& qs, QueueId q) {
  const QueueSpec& s = qs[q];
  if (q != kRootQueue) {
    if (s.name.empty()) queue_fail(qs, q, "name", "must not be empty");
    if (s.name.find('/') != std::string::npos) {
      queue_fail(qs, q, "name", "'" + s.name + "' must not contain '/' (it separates paths)");
    }
    if (!(s.weight > 0) || !std::isfinite(s.weight)) {
      queue_fail(qs, q, "weight", fmt::format("expected a positive number, got {}", s.weight));
    }
  }
  for (size_t d = 0; d < kNumDims; ++d) {
    if (s.guarantee[d] < 0) queue_fail(qs, q, "guarantee." + dim_key(d), "must not be negative");
  }
  for (size_t i = 0; i < s.by_type.size(); ++i) {
    const std::string field = "guarantee.gpu_types." + type_name(s.by_type[i].type);
    if (i > 0 && s.by_type[i].type == s.by_type[i - 1].type) {
      queue_fail(qs, q, field, "GPU type listed twice");
    }
    if (s.by_type[i].guarantee_milli < 0) queue_fail(qs, q, field, "must not be negative");
  }
}

void check_sibling_names(const std::vector<QueueSpec>& qs, QueueId parent) {
  std::unordered_set<std::string_view> names;
  for (QueueId c : qs[parent].children) {
    if (!names.insert(qs[c].name).second) {
      queue_fail(qs, c, "name",
                 "duplicate queue name '" + qs[c].name + "' under " + describe(qs[parent]));
    }
  }
}

// A queue allows only what its parent allows, and inherits the parent's defaults: jobs live in
// leaves, so defaults given on a team apply to its sub-teams. Parents come first in `qs`.
void inherit_classes_and_defaults(std::vector<QueueSpec>& qs, QueueId q) {
  QueueSpec& s = qs[q];
  if (q != kRootQueue) {
    const QueueSpec& p = qs[s.parent];
    s.allowed_classes &= p.allowed_classes;
    s.classes_given = s.classes_given || p.classes_given;
    if (s.allowed_classes == 0) {
      queue_fail(
          qs, q, "priority_classes",
          "allows none of the classes its parent allows (" + class_list(p.allowed_classes) + ")");
    }
    // A default the child's own classes exclude is not inherited: its jobs must then name one.
    if (!s.has_default_class && p.has_default_class &&
        (s.allowed_classes & class_bit(p.default_class)) != 0) {
      s.has_default_class = true;
      s.default_class = p.default_class;
    }
    if (s.default_sla_seconds < 0) s.default_sla_seconds = p.default_sla_seconds;
    if (s.default_time_limit_seconds < 0) {
      s.default_time_limit_seconds = p.default_time_limit_seconds;
    }
    if (s.max_time_limit_seconds < 0) s.max_time_limit_seconds = p.max_time_limit_seconds;
    if (s.default_memory_mib < 0) s.default_memory_mib = p.default_memory_mib;
    if (s.max_memory_mib < 0) s.max_memory_mib = p.max_memory_mib;
    if (s.energy_weight < 0) s.energy_weight = p.energy_weight;
    if (s.carbon_defer_seconds < 0) s.carbon_defer_seconds = p.carbon_defer_seconds;
  }
  if (s.default_time_limit_seconds >= 0 && s.max_time_limit_seconds >= 0 &&
      s.default_time_limit_seconds > s.max_time_limit_seconds) {
    queue_fail(qs, q, "time_limit.default",
               "the default time limit of " + describe(s) + " is more than its maximum");
  }
  if (s.default_memory_mib >= 0 && s.max_memory_mib >= 0 &&
      s.default_memory_mib > s.max_memory_mib) {
    queue_fail(qs, q, "memory.default",
               "the default memory of " + describe(s) + " is more than its maximum");
  }
  if (s.has_default_class && (s.allowed_classes & class_bit(s.default_class)) == 0) {
    queue_fail(qs, q, "default_priority_class",
               std::string(to_string(s.default_class)) + " is not among the classes " +
                   describe(s) + " allows (" + class_list(s.allowed_classes) + ")");
  }
}

void check_limits(const std::vector<QueueSpec>& qs, QueueId q) {
  const QueueSpec& s = qs[q];
  for (size_t d = 0; d < kNumDims; ++d) {
    if (s.limit[d] < s.guarantee[d]) {
      queue_fail(qs, q, "borrow_limit." + dim_key(d),
                 "limit " + amount_text(d, s.limit[d]) + " is below the guarantee " +
                     amount_text(d, s.guarantee[d]));
    }
  }
  int64_t typed = 0;
  for (const TypeQuota& tq : s.by_type) {
    const std::string name = type_name(tq.type);
    if (tq.limit_milli < tq.guarantee_milli) {
      queue_fail(qs, q, "borrow_limit.gpu_types." + name,
                 "limit " + gpus_text(tq.limit_milli, name) + " is below the guarantee " +
                     gpus_text(tq.guarantee_milli, name));
    }
    typed += tq.guarantee_milli;
  }
  // Per-type guarantees refine the GPU guarantee: they are part of it, not extra.
  if (typed > s.guarantee[kGpuDim]) {
    queue_fail(qs, q, "guarantee.gpu_types",
               "per-type guarantees of " + describe(s) + " sum to " + gpus_text(typed) +
                   ", more than its " + gpus_text(s.guarantee[kGpuDim]));
  }
}

void check_children_fit(const std::vector<QueueSpec>& qs, QueueId q) {
  const QueueSpec& s = qs[q];
  if (s.leaf()) return;
  const GuaranteeSum sum = children_sum(qs, q);
  for (size_t d = 0; d < kNumDims; ++d) {
    if (sum.dims[d] > s.guarantee[d]) {
      queue_fail(qs, q, "guarantee." + dim_key(d),
                 "the children of " + describe(s) + " guarantee " + amount_text(d, sum.dims[d]) +
                     " in all, more than its own " + amount_text(d, s.guarantee[d]));
    }
  }
  for (const auto& [t, g] : sum.types) {
    const int64_t own = type_guarantee(s, t);
    if (g > own) {
      const std::string name = type_name(t);
      queue_fail(qs, q, "guarantee.gpu_types." + name,
                 "the children of " + describe(s) + " guarantee " + gpus_text(g, name) +
                     " in all, more than its own " + gpus_text(own, name));
    }
  }
}

// ---- Binding tenants to leaves. ----

struct QueueIndex {
  std::unordered_map<std::string_view, QueueId> by_path;
  std::unordered_map<std::string_view, std::vector<QueueId>> by_name;
  std::vector<std::string> leaf_paths;

  explicit QueueIndex(const std::vector<QueueSpec>& qs) {
    for (QueueId q = 1; q < qs.size(); ++q) {
      by_path.emplace(qs[q].path, q);
      by_name[qs[q].name].push_back(q);
      if (qs[q].leaf()) leaf_paths.push_back(qs[q].path);
    }
  }
};

QueueId leaf_for_tenant(const std::vector<QueueSpec>& qs, const QueueIndex& index,
                        const std::string& tenant, const std::string& where) {
  const std::string origin = where.empty() ? "workload" : where;
  auto fail = [&](const std::string& msg) {
    throw InputError(input_error_message(origin, 0, "", "tenant '" + tenant + "' " + msg));
  };
  QueueId q = kNoId;
  if (auto it = index.by_path.find(tenant); it != index.by_path.end()) {
    q = it->second;
  } else if (auto named = index.by_name.find(tenant); named != index.by_name.end()) {
    if (named->second.size() > 1) {
      std::vector<std::string> paths;
      for (QueueId c : named->second) paths.push_back(qs[c].path);
      fail("is ambiguous: it names queues " + capped_list(paths) + "; use the full path");
    }
    q = named->second.front();
  }
  if (q == kNoId) {
    fail("matches no leaf queue of the queue tree (leaves: " + capped_list(index.leaf_paths) + ")");
  }
  if (!qs[q].leaf())
    fail("names queue '" + qs[q].path + "', which has child queues; jobs go to leaves");
  return q;
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

// Leaves named `names` (weights 1 unless given) under the root; nothing checked yet.
QueueTree leaves_under_root(const std::vector<std::string>& names,
                            const std::vector<double>& weights) {
  QueueTree tree;
  for (size_t i = 0; i < names.size(); ++i) {
    QueueSpec s;
    s.name = names[i];
    if (!weights.empty()) s.weight = weights[i];
    tree.add(kRootQueue, std::move(s));
  }
  return tree;
}

}  // namespace

QueueTree QueueTree::flat(const Interner& tenants) {
  // No finish(): a flat tree has nothing to derive and no quota to break. Its naming rules
  // exist for binding by name, while tenant names from traces may be empty or contain '/';
  // this tree is bound by id.
  QueueTree tree = leaves_under_root(tenants.names(), {});
  tree.leaf_of_tenant_.resize(tenants.size());
  for (size_t t = 0; t < tenants.size(); ++t) tree.leaf_of_tenant_[t] = static_cast<QueueId>(t + 1);
  return tree;
}

QueueTree QueueTree::flat(const std::vector<std::string>& names,
                          const std::vector<double>& weights) {
  if (!weights.empty() && weights.size() != names.size()) {
    throw std::invalid_argument("QueueTree::flat: " + std::to_string(names.size()) + " names but " +
                                std::to_string(weights.size()) + " weights");
  }
  QueueTree tree = leaves_under_root(names, weights);
  tree.finish();
  tree.leaf_of_tenant_.resize(names.size());
  for (size_t t = 0; t < names.size(); ++t) tree.leaf_of_tenant_[t] = static_cast<QueueId>(t + 1);
  return tree;
}

QueueId QueueTree::add(QueueId parent, QueueSpec spec) {
  if (parent >= queues_.size()) {
    throw std::out_of_range("QueueTree::add: no queue " + std::to_string(parent));
  }
  const QueueSpec& p = queues_[parent];
  spec.parent = parent;
  spec.depth = p.depth + 1;
  spec.path = p.path.empty() ? spec.name : p.path + "/" + spec.name;
  spec.children.clear();
  std::stable_sort(spec.by_type.begin(), spec.by_type.end(),
                   [](const TypeQuota& a, const TypeQuota& b) { return a.type < b.type; });
  const auto id = static_cast<QueueId>(queues_.size());
  queues_.push_back(std::move(spec));
  queues_[parent].children.push_back(id);
  return id;
}

void QueueTree::finish() {
  const auto n = static_cast<QueueId>(queues_.size());
  for (QueueId q = 0; q < n; ++q) {
    check_own_fields(queues_, q);
    check_sibling_names(queues_, q);
    inherit_classes_and_defaults(queues_, q);  // parents first: their masks are final
  }
  for (QueueId q = n; q-- > 0;) {  // children first: their guarantees are final
    if (!queues_[q].leaf()) derive_guarantee(queues_[q], children_sum(queues_, q));
  }
  // Children first, so an error names the queue that breaks a rule, not an ancestor whose
  // derived guarantee inherited the problem.
  for (QueueId q = n; q-- > 0;) {
    check_children_fit(queues_, q);
    check_limits(queues_, q);
  }
}

void QueueTree::bind(const Interner& tenants, const std::string& where) {
  const QueueIndex index(queues_);
  std::vector<QueueId> leaves(tenants.size(), kNoId);
  for (TenantId t = 0; t < tenants.size(); ++t) {
    leaves[t] = leaf_for_tenant(queues_, index, tenants.name(t), where);
  }
  leaf_of_tenant_ = std::move(leaves);
}

std::vector<TenantId> QueueTree::tenants_without_leaf(const Interner& tenants) const {
  const QueueIndex index(queues_);
  std::vector<TenantId> out;
  for (TenantId t = 0; t < tenants.size(); ++t) {
    try {
      leaf_for_tenant(queues_, index, tenants.name(t), "");
    } catch (const InputError&) {
      out.push_back(t);
    }
  }
  return out;
}

void QueueTree::validate_against(const Cluster& c) const {
  Amounts capacity{int64_t{c.num_gpus()} * 1000, 0, 0};
  for (const Node& node : c.nodes()) {
    capacity[kCpuDim] += node.cpu_milli;
    capacity[kMemDim] += node.mem_mib;
  }
  if (queues_[kRootQueue].leaf()) return;
  const GuaranteeSum top = children_sum(queues_, kRootQueue);
  // The file's `queues` list starts with the first top-level queue.
  const std::string& origin = queues_[queues_[kRootQueue].children.front()].source;
  auto fail = [&](const std::string& field, const std::string& needed, const std::string& has) {
    throw InputError(input_error_message(
        origin.empty() ? "queue tree" : origin, 0, field,
        "the top-level queues guarantee " + needed + " in all, more than the cluster's " + has));
  };
  for (size_t d = 0; d < kNumDims; ++d) {
    // Some cluster formats leave CPU or memory out; a guarantee cannot be checked against that.
    if (d != kGpuDim && capacity[d] == 0) continue;
    if (top.dims[d] > capacity[d]) {
      fail("queues.guarantee." + dim_key(d), amount_text(d, top.dims[d]),
           amount_text(d, capacity[d]));
    }
  }
  for (const auto& [t, g] : top.types) {
    const int64_t has = int64_t{c.num_gpus_of_type(t)} * 1000;
    if (g > has) {
      const std::string name = t < c.gpu_types().size() ? c.gpu_types().at(t).name : type_name(t);
      fail("queues.guarantee.gpu_types." + name, gpus_text(g, name), gpus_text(has, name));
    }
  }
}

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

bool apply_queue_defaults(const QueueSpec& leaf, JobSpec& job) {
  if (!job.priority_given && leaf.has_default_class) job.priority = leaf.default_class;
  if (job.sla_max_queueing < 0 && leaf.default_sla_seconds >= 0) {
    job.sla_max_queueing = leaf.default_sla_seconds;
  }
  return (leaf.allowed_classes & class_bit(job.priority)) != 0;
}

void apply_queue_defaults(const QueueTree& tree, Workload& w) {
  for (JobSpec& job : w.jobs) {
    const QueueId q = tree.leaf_of(job.tenant);
    if (q == kNoId) {
      throw std::logic_error("apply_queue_defaults: tenant " + std::to_string(job.tenant) +
                             " of job " + job.name + " is not bound to a queue");
    }
    const QueueSpec& leaf = tree.queue(q);
    if (!apply_queue_defaults(leaf, job)) {
      throw InputError(input_error_message(
          job.source.empty() ? "workload" : job.source, 0, "",
          "job " + job.name + ": priority class " + std::string(to_string(job.priority)) +
              " is not allowed in queue " + leaf.path +
              " (allowed: " + class_list(leaf.allowed_classes) + ")"));
    }
  }
}

bool QueueTree::admits_namespace(QueueId q, std::string_view ns) const {
  if (q >= size()) return false;
  bool listed = false;
  for (QueueId at = q; at != kNoId && at < size(); at = queue(at).parent) {
    for (const std::string& n : queue(at).namespaces) {
      listed = true;
      if (n == "*" || n == ns) return true;
    }
    if (at == kRootQueue) break;
  }
  return !listed && queue(q).name == ns;
}

}  // namespace tessera
