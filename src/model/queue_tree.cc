#include "model/queue_tree.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "model/gpu_type.h"
#include "model/input_error.h"
#include "model/queue_quota.h"

namespace tessera {

namespace {

using queue_quota::derive_guarantee;
using queue_quota::GuaranteeSum;
using queue_quota::type_name;

// Error messages list at most this many leaves (a generated tree may have thousands).
constexpr size_t kMaxListed = 20;

constexpr PriorityClass kClasses[] = {PriorityClass::kBestEffort, PriorityClass::kResearch,
                                      PriorityClass::kProduction,
                                      PriorityClass::kInferenceCritical};

// ---- Human-readable amounts for error messages. ----

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

// "a, b, c, ... (12 more)".
std::string capped_list(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size() && i < kMaxListed; ++i) out += (i ? ", " : "") + items[i];
  if (items.size() > kMaxListed) {
    out += ", ... (" + std::to_string(items.size() - kMaxListed) + " more)";
  }
  return out;
}

// ---- Quota arithmetic of finish() (what the YAML reader shares is in queue_quota.h). ----

int64_t type_guarantee(const QueueSpec& q, GpuTypeId t) {
  for (const TypeQuota& tq : q.by_type) {
    if (tq.type == t) return tq.guarantee_milli;
  }
  return 0;
}

GuaranteeSum children_sum(const std::vector<QueueSpec>& qs, QueueId q) {
  GuaranteeSum sum;
  for (QueueId c : qs[q].children) sum.add(qs[c]);
  return sum;
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
