#include "control/kube/kube_objects.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <stdexcept>

#include "backend/kube/quantity.h"
#include "control/kube/json_fields.h"
#include "control/kube/workload_groups.h"
#include "model/dataset_name.h"
#include "model/input_error.h"
#include "model/utf8.h"
#include "model/yaml_util.h"

namespace tessera::kube {

namespace {

using nlohmann::json;

// A quantity from a resource list (requests/limits/allocatable), in milli-units; 0 when absent.
int64_t milli_of(const json& list, const char* name, const char* where) {
  const json& q = field(list, name);
  if (q.is_null()) return 0;
  try {
    if (q.is_number()) return static_cast<int64_t>(std::llround(q.get<double>() * 1000.0));
    return parse_quantity_milli(q.get<std::string>());
  } catch (const std::exception& e) {
    throw std::invalid_argument(std::string(where) + "." + name + ": " + e.what());
  }
}

int64_t mib_of(const json& list, const char* name, const char* where) {
  const json& q = field(list, name);
  if (q.is_null()) return 0;
  try {
    const int64_t bytes = q.is_number() ? static_cast<int64_t>(q.get<double>())
                                        : parse_quantity_bytes(q.get<std::string>());
    return (bytes + (1 << 20) - 1) >> 20;  // a request rounds up: never under-count
  } catch (const std::exception& e) {
    throw std::invalid_argument(std::string(where) + "." + name + ": " + e.what());
  }
}

struct ContainerDemand {
  int64_t gpu_milli = 0, cpu_milli = 0, mem_mib = 0;
};

// One container's requests: requests, else limits (the API defaults requests to limits).
ContainerDemand container_demand(const json& c) {
  const json& res = field(c, "resources");
  const json& req = field(res, "requests");
  const json& lim = field(res, "limits");
  ContainerDemand d;
  // Extended resources may not be overcommitted: the limit is the request.
  d.gpu_milli = milli_of(lim, kGpuResource, "resources.limits");
  if (d.gpu_milli == 0) d.gpu_milli = milli_of(req, kGpuResource, "resources.requests");
  d.cpu_milli = milli_of(req, "cpu", "resources.requests");
  if (d.cpu_milli == 0) d.cpu_milli = milli_of(lim, "cpu", "resources.limits");
  d.mem_mib = mib_of(req, "memory", "resources.requests");
  if (d.mem_mib == 0) d.mem_mib = mib_of(lim, "memory", "resources.limits");
  return d;
}

// The pod's effective request: the sum over containers, at least the largest init container
// (init containers run one at a time, before the others), plus the pod overhead.
ContainerDemand pod_demand(const json& spec) {
  ContainerDemand sum;
  for (const json& c : field(spec, "containers")) {
    const ContainerDemand d = container_demand(c);
    sum.gpu_milli += d.gpu_milli;
    sum.cpu_milli += d.cpu_milli;
    sum.mem_mib += d.mem_mib;
  }
  for (const json& c : field(spec, "initContainers")) {
    const ContainerDemand d = container_demand(c);
    sum.gpu_milli = std::max(sum.gpu_milli, d.gpu_milli);
    sum.cpu_milli = std::max(sum.cpu_milli, d.cpu_milli);
    sum.mem_mib = std::max(sum.mem_mib, d.mem_mib);
  }
  const json& overhead = field(spec, "overhead");
  sum.cpu_milli += milli_of(overhead, "cpu", "spec.overhead");
  sum.mem_mib += mib_of(overhead, "memory", "spec.overhead");
  return sum;
}

NodeRequirement parse_requirement(const json& e, bool is_field) {
  NodeRequirement r;
  r.key = str(e, "key");
  r.field = is_field;
  const std::string op = str(e, "operator");
  if (op == "In") {
    r.op = NodeRequirement::kIn;
  } else if (op == "NotIn") {
    r.op = NodeRequirement::kNotIn;
  } else if (op == "Exists") {
    r.op = NodeRequirement::kExists;
  } else if (op == "DoesNotExist") {
    r.op = NodeRequirement::kDoesNotExist;
  } else if (op == "Gt") {
    r.op = NodeRequirement::kGt;
  } else if (op == "Lt") {
    r.op = NodeRequirement::kLt;
  } else {
    throw std::invalid_argument("spec.affinity.nodeAffinity: unknown operator \"" + op + "\"");
  }
  for (const json& v : field(e, "values")) {
    if (v.is_string()) r.values.push_back(v.get<std::string>());
  }
  return r;
}

NodeConstraints parse_constraints(const json& spec) {
  NodeConstraints c;
  c.selector = string_map(field(spec, "nodeSelector"));
  const json& required = field(field(field(field(spec, "affinity"), "nodeAffinity"),
                                     "requiredDuringSchedulingIgnoredDuringExecution"),
                               "nodeSelectorTerms");
  for (const json& term : required) {
    std::vector<NodeRequirement> reqs;
    for (const json& e : field(term, "matchExpressions"))
      reqs.push_back(parse_requirement(e, false));
    for (const json& e : field(term, "matchFields")) reqs.push_back(parse_requirement(e, true));
    c.terms.push_back(std::move(reqs));
  }
  for (const json& t : field(spec, "tolerations")) {
    Toleration tol;
    tol.key = str(t, "key");
    tol.value = str(t, "value");
    tol.effect = str(t, "effect");
    tol.exists = str(t, "operator") == "Exists";
    c.tolerations.push_back(std::move(tol));
  }
  return c;
}

bool requirement_holds(const NodeRequirement& r, const NodeInfo& node) {
  const std::string* v = nullptr;
  if (r.field) {
    v = r.key == "metadata.name" ? &node.name : nullptr;
  } else {
    v = find(node.labels, r.key.c_str());
  }
  const auto in_values = [&] {
    return v && std::find(r.values.begin(), r.values.end(), *v) != r.values.end();
  };
  switch (r.op) {
    case NodeRequirement::kIn:
      return in_values();
    case NodeRequirement::kNotIn:
      return !in_values();
    case NodeRequirement::kExists:
      return v != nullptr;
    case NodeRequirement::kDoesNotExist:
      return v == nullptr;
    case NodeRequirement::kGt:
    case NodeRequirement::kLt: {
      if (!v || r.values.size() != 1) return false;
      try {
        const long long have = std::stoll(*v), want = std::stoll(r.values[0]);
        return r.op == NodeRequirement::kGt ? have > want : have < want;
      } catch (const std::exception&) {
        return false;
      }
    }
  }
  return false;
}

bool tolerates(const std::vector<Toleration>& tols, const Taint& taint) {
  for (const Toleration& t : tols) {
    if (!t.effect.empty() && t.effect != taint.effect) continue;
    if (t.key.empty()) {
      if (t.exists) return true;  // an empty key with Exists tolerates everything
      continue;
    }
    if (t.key != taint.key) continue;
    if (t.exists || t.value == taint.value) return true;
  }
  return false;
}

std::vector<int32_t> parse_index_list(const std::string& text) {
  std::vector<int32_t> out;
  size_t i = 0;
  while (i < text.size()) {
    size_t j = text.find(',', i);
    if (j == std::string::npos) j = text.size();
    try {
      out.push_back(std::stoi(text.substr(i, j - i)));
    } catch (const std::exception&) {
      return {};
    }
    i = j + 1;
  }
  return out;
}

}  // namespace

bool parse_watts(const std::string& text, double& w) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    return false;
  }
  while (used < text.size() && std::isspace(static_cast<unsigned char>(text[used]))) ++used;
  if (used != text.size() || !std::isfinite(v) || v < 0) return false;
  w = v;
  return true;
}

std::string NodeConstraints::key() const {
  json j = json::object();
  if (!selector.empty()) j["s"] = selector;
  if (!terms.empty()) {
    json t = json::array();
    for (const auto& term : terms) {
      json a = json::array();
      for (const auto& r : term) a.push_back({r.key, static_cast<int>(r.op), r.values, r.field});
      t.push_back(std::move(a));
    }
    j["t"] = std::move(t);
  }
  if (!tolerations.empty()) {
    json t = json::array();
    for (const auto& tol : tolerations) t.push_back({tol.key, tol.value, tol.effect, tol.exists});
    j["o"] = std::move(t);
  }
  return j.dump();
}

double parse_time(const std::string& text) {
  if (text.size() < 19) return 0;
  std::tm tm{};
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0;
  if (std::sscanf(text.c_str(), "%d-%d-%dT%d:%d:%d", &y, &mo, &d, &h, &mi, &s) != 6) return 0;
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = s;
  double t = static_cast<double>(timegm(&tm));
  if (text.size() > 19 && text[19] == '.') {
    double frac = 0, scale = 0.1;
    for (size_t i = 20; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i) {
      frac += (text[i] - '0') * scale;
      scale /= 10;
    }
    t += frac;
  }
  return t;
}

std::string format_time(double unix_seconds) {
  const auto secs = static_cast<time_t>(std::floor(unix_seconds));
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string format_micro_time(double unix_seconds) {
  const double whole = std::floor(unix_seconds);
  const auto secs = static_cast<time_t>(whole);
  const auto micros = std::min<long>(999999, std::lround((unix_seconds - whole) * 1e6));
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[48];
  const size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof buf - n, ".%06ldZ", micros);
  return buf;
}

bool holds_dataset(const NodeInfo& n, const std::string& dataset) {
  const auto l = n.labels.find(kDataLabelPrefix + dataset);
  return l != n.labels.end() && l->second != "false";
}

NodeInfo parse_node(const json& node) {
  NodeInfo n;
  const json& meta = field(node, "metadata");
  n.name = str(meta, "name");
  if (n.name.empty()) throw std::invalid_argument("node: metadata.name is missing");
  n.resource_version = str(meta, "resourceVersion");
  n.labels = string_map(field(meta, "labels"));
  const json& spec = field(node, "spec");
  n.unschedulable = field(spec, "unschedulable").is_boolean() && spec["unschedulable"].get<bool>();
  for (const json& t : field(spec, "taints")) {
    n.taints.push_back(Taint{str(t, "key"), str(t, "value"), str(t, "effect")});
  }
  const json& status = field(node, "status");
  for (const json& c : field(status, "conditions")) {
    if (str(c, "type") == "Ready") n.ready = str(c, "status") == "True";
  }
  const json& alloc = field(status, "allocatable");
  const std::string where = "node " + n.name + ": status.allocatable";
  n.gpus = static_cast<int32_t>(milli_of(alloc, kGpuResource, where.c_str()) / 1000);
  n.cpu_milli = milli_of(alloc, "cpu", where.c_str());
  n.mem_mib = mib_of(alloc, "memory", where.c_str());
  if (const std::string* p = find(n.labels, kGpuProductLabel)) n.gpu_product = *p;
  const Labels notes = string_map(field(meta, "annotations"));
  if (const std::string* h = find(notes, kThermalHeadroomAnnotation)) {
    double w = -1;
    if (parse_watts(*h, w)) {
      n.thermal_headroom_w = w;
    } else {
      n.thermal_headroom_invalid = *h;
    }
  }
  return n;
}

namespace {

// A whole number in [lo, hi] written out in full ("128"); false for anything else.
bool parse_count(const std::string& text, int64_t lo, int64_t hi, int32_t& out) {
  if (text.empty() || text.size() > 9 ||
      !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return false;
  }
  const int64_t v = std::stoll(text);
  if (v < lo || v > hi) return false;
  out = static_cast<int32_t>(v);
  return true;
}

}  // namespace

std::optional<std::string> parse_adaptive(const std::string& batch, const std::string* max_batch,
                                          const std::string* per_gpu, AdaptiveBatch& out) {
  const auto bad = [](const char* key, const std::string& text, const std::string& want) {
    return std::optional<std::string>(std::string("annotation ") + key + ": \"" + text +
                                      "\" is not " + want);
  };
  AdaptiveBatch a;
  if (!parse_count(batch, 1, kMaxAdaptiveBatch, a.batch)) {
    return bad(kAdaptiveBatchAnnotation, batch, "a batch size (1 to 16777216)");
  }
  a.max_batch = a.batch;
  if (max_batch && !parse_count(*max_batch, a.batch, kMaxAdaptiveBatch, a.max_batch)) {
    return bad(kAdaptiveMaxBatchAnnotation, *max_batch,
               "a batch size at least tessera.io/adaptive-batch's");
  }
  a.min_per_gpu = 1;
  a.max_per_gpu = a.max_batch;
  if (per_gpu) {
    const auto dash = per_gpu->find('-');
    if (dash == std::string::npos ||
        !parse_count(per_gpu->substr(0, dash), 1, a.max_batch, a.min_per_gpu) ||
        !parse_count(per_gpu->substr(dash + 1), a.min_per_gpu, a.max_batch, a.max_per_gpu)) {
      return bad(kAdaptivePerGpuAnnotation, *per_gpu,
                 "MIN-MAX, a per-GPU micro-batch range within the largest batch (\"8-64\")");
    }
  }
  out = a;
  return std::nullopt;
}

PodInfo parse_pod(const json& pod) {
  PodInfo p;
  const json& meta = field(pod, "metadata");
  p.ns = str(meta, "namespace");
  p.name = str(meta, "name");
  p.uid = str(meta, "uid");
  if (p.name.empty() || p.uid.empty()) {
    throw std::invalid_argument("pod: metadata.name or metadata.uid is missing");
  }
  p.resource_version = str(meta, "resourceVersion");
  p.created = parse_time(str(meta, "creationTimestamp"));
  p.deleting = !field(meta, "deletionTimestamp").is_null();
  const Labels labels = string_map(field(meta, "labels"));
  const Labels notes = string_map(field(meta, "annotations"));

  const json& spec = field(pod, "spec");
  p.scheduler_name = str(spec, "schedulerName");
  p.node_name = str(spec, "nodeName");
  p.gated = field(spec, "schedulingGates").is_array() && !spec["schedulingGates"].empty();
  if (field(spec, "terminationGracePeriodSeconds").is_number_integer()) {
    p.grace_seconds = spec["terminationGracePeriodSeconds"].get<int64_t>();
  }
  const json& status = field(pod, "status");
  p.phase = str(status, "phase");
  p.bound_at = p.created;
  for (const json& c : field(status, "conditions")) {
    if (str(c, "type") != "PodScheduled") continue;
    if (str(c, "status") == "True") {
      const double t = parse_time(str(c, "lastTransitionTime"));
      if (t > 0) p.bound_at = t;
    } else if (str(c, "reason") == "Unschedulable") {
      p.unschedulable_message = str(c, "message");
    }
  }

  const std::string* kueue_count = nullptr;
  if (const std::string* g = find(labels, kPodGroupLabel); g && !g->empty()) {
    p.group = *g;
    p.group_api = GroupApi::kSchedulerPlugins;
  } else if (const std::string* v = find(notes, kVolcanoGroupAnnotation); v && !v->empty()) {
    p.group = *v;
    p.group_api = GroupApi::kVolcano;
  } else if (const std::string* w = find(notes, kVolcanoGroupAnnotationNew); w && !w->empty()) {
    p.group = *w;
    p.group_api = GroupApi::kVolcano;
  } else if (const std::string* k = find(labels, kKueueGroupLabel); k && !k->empty()) {
    p.group = *k;
    p.group_api = GroupApi::kKueue;
    kueue_count = find(notes, kKueueGroupCountAnnotation);
    if (kueue_count == nullptr) {
      p.invalid = std::string("label ") + kKueueGroupLabel + " needs annotation " +
                  kKueueGroupCountAnnotation + " (the group's number of pods)";
    }
  }
  // No group named: the workload that made the pods may be one (a JobSet, an Indexed Job...).
  if (p.group.empty()) derive_workload_group(meta, labels, notes, p);
  for (const char* key : {kQueueLabel, "kai.scheduler/queue", "kueue.x-k8s.io/queue-name"}) {
    if (const std::string* q = find(labels, key); q && !q->empty()) {
      p.queue = *q;
      break;
    }
  }
  if (const std::string* q = find(notes, kVolcanoQueueAnnotation); p.queue.empty() && q) {
    p.queue = *q;
  }
  p.queue_given = !p.queue.empty();
  if (p.queue.empty()) p.queue = p.ns;
  PriorityClass pc;
  if (const std::string* c = find(labels, kClassLabel)) {
    if (parse_priority_class(*c, pc)) {
      p.priority = pc;
    } else {
      p.invalid = std::string("label ") + kClassLabel + ": unknown class " + quote_prefix(*c) +
                  " (inference-critical, production, research, best-effort)";
    }
  } else if (parse_priority_class(str(spec, "priorityClassName"), pc)) {
    p.priority = pc;
  }
  for (const auto& [key, text] :
       {std::pair{kMinMemberAnnotation, find(notes, kMinMemberAnnotation)},
        std::pair{kKueueGroupCountAnnotation, kueue_count}}) {
    if (text == nullptr) continue;
    int32_t n = 0;
    if (!parse_count(*text, 1, 1000000, n)) {
      p.invalid = std::string("annotation ") + key + ": " + quote_prefix(*text) +
                  " is not a number of pods (1 or more)";
    } else {
      p.min_member = n;
    }
  }
  if (const std::string* g = find(notes, kGraceAnnotation)) {
    // Range-checked here: "inf" or "1e308" would overflow the cast to whole seconds.
    if (!parse_duration(*g, p.checkpoint_grace)) {
      p.checkpoint_grace = -1;
      p.invalid = std::string("annotation ") + kGraceAnnotation +
                  ": expected seconds (or 30s, 10m, 1h) of at most 100 years, got " +
                  quote_prefix(*g);
    }
  }
  if (const std::string* idx = find(notes, kGpuIndexAnnotation))
    p.gpu_index = parse_index_list(*idx);
  // Tessera wrote it; one it cannot read counts as the default (the draw is not under-counted).
  if (const std::string* w = find(notes, kPowerLimitAnnotation)) {
    if (!parse_watts(*w, p.power_limit_w)) p.power_limit_w = 0;
  }

  if (const std::string* d = find(notes, kDatasetAnnotation)) {
    // It becomes a node annotation's key and a data agent's directory: the one strict rule.
    const std::string why = dataset_name_problem(*d, /*allow_owner=*/false);
    if (why.empty()) {
      p.dataset = *d;
    } else {
      p.invalid = std::string("annotation ") + kDatasetAnnotation + ": " + why;
    }
  }
  if (const std::string* b = find(notes, kAdaptiveBatchAnnotation)) {
    if (const auto why = parse_adaptive(*b, find(notes, kAdaptiveMaxBatchAnnotation),
                                        find(notes, kAdaptivePerGpuAnnotation), p.adaptive)) {
      p.invalid = *why;
      p.adaptive = AdaptiveBatch{};
    }
  }

  try {
    const ContainerDemand d = pod_demand(spec);
    p.demand.cpu_milli = d.cpu_milli;
    p.demand.mem_mib = d.mem_mib;
    p.demand.gpus = static_cast<int32_t>(d.gpu_milli / 1000);
    p.demand.gpu_milli = kMilliPerGpu;
    if (d.gpu_milli % 1000 != 0) {
      p.invalid = std::string(kGpuResource) + " must be a whole number (use annotation " +
                  kFractionAnnotation + " for a share of one GPU)";
    }
    const std::string* frac = find(notes, kFractionAnnotation);
    if (!frac) frac = find(notes, kKaiFractionAnnotation);
    if (frac) {
      double f = 0;
      try {
        f = std::stod(*frac);
      } catch (const std::exception&) {
        f = -1;
      }
      if (!(f > 0 && f <= 1)) {
        p.invalid = std::string("annotation ") + kFractionAnnotation + ": " + quote_prefix(*frac) +
                    " is not a fraction in (0, 1]";
      } else if (p.demand.gpus > 0) {
        p.invalid = std::string("annotation ") + kFractionAnnotation + " and a " + kGpuResource +
                    " request together: ask for one or the other";
      } else {
        p.demand.gpus = 1;
        p.demand.gpu_milli = static_cast<int32_t>(std::lround(f * 1000));
      }
    }
    p.constraints = parse_constraints(spec);
    p.constraints_key = p.constraints.key();
    if (p.adaptive.batch > 0 && (p.demand.gpus < 1 || !p.demand.whole_gpus())) {
      p.invalid = std::string("annotation ") + kAdaptiveBatchAnnotation +
                  ": an adaptive pod needs whole GPUs (an nvidia.com/gpu limit of 1 or more)";
    }
  } catch (const std::invalid_argument& e) {
    p.invalid = e.what();
  }
  // It goes into the pod's condition and an Event: bounded, whatever a message quoted.
  constexpr size_t kMaxInvalidMessage = 400;
  if (p.invalid.size() > kMaxInvalidMessage) {
    p.invalid = to_valid_utf8(std::string_view(p.invalid).substr(0, kMaxInvalidMessage)) + "...";
  }
  return p;
}

const FieldMask& node_fields() {
  static const FieldMask m = [] {
    FieldMask f = FieldMask::of({
        "metadata.name",
        "metadata.resourceVersion",
        "metadata.labels",
        "spec.unschedulable",
        "spec.taints",
        "status.conditions",
        "status.allocatable",
    });
    // One annotation, not all: nodes carry large ones (agents' state) that change often. Set
    // by hand because the key has dots of its own.
    f.keys["metadata"].keys["annotations"].keys[kThermalHeadroomAnnotation].all = true;
    return f;
  }();
  return m;
}

const FieldMask& pod_fields() {
  static const FieldMask m = FieldMask::of({
      "metadata.namespace",
      "metadata.name",
      "metadata.uid",
      "metadata.resourceVersion",
      "metadata.creationTimestamp",
      "metadata.deletionTimestamp",
      "metadata.labels",
      "metadata.annotations",
      "metadata.ownerReferences",
      "spec.schedulerName",
      "spec.nodeName",
      "spec.schedulingGates",
      "spec.terminationGracePeriodSeconds",
      "spec.priorityClassName",
      "spec.containers.resources",
      "spec.initContainers.resources",
      "spec.overhead",
      "spec.nodeSelector",
      "spec.affinity",
      "spec.tolerations",
      "status.phase",
      "status.conditions",
  });
  return m;
}

const char* group_api_name(GroupApi api) {
  switch (api) {
    case GroupApi::kSchedulerPlugins:
      return "scheduling.x-k8s.io/v1alpha1";
    case GroupApi::kVolcano:
      return "scheduling.volcano.sh/v1beta1";
    case GroupApi::kJob:
      return "batch/v1 Job";
    case GroupApi::kJobSet:
      return "jobset.x-k8s.io/v1alpha2 JobSet";
    case GroupApi::kRayCluster:
      return "ray.io/v1 RayCluster";
    case GroupApi::kNone:
    case GroupApi::kKueue:
    case GroupApi::kLeaderWorkerSet:
      break;
  }
  return "";
}

std::string group_key(GroupApi api, const std::string& ns, const std::string& name) {
  const char* prefix = "";
  switch (api) {
    case GroupApi::kVolcano:
      prefix = "volcano:";
      break;
    case GroupApi::kJob:
      prefix = "job:";
      break;
    case GroupApi::kJobSet:
      prefix = "jobset:";
      break;
    case GroupApi::kRayCluster:
      prefix = "ray:";
      break;
    case GroupApi::kNone:
    case GroupApi::kSchedulerPlugins:
    case GroupApi::kKueue:
    case GroupApi::kLeaderWorkerSet:
      break;
  }
  return prefix + ns + "/" + name;
}

std::string group_selector(const PodInfo& p) {
  switch (p.group_api) {
    case GroupApi::kSchedulerPlugins:
      return std::string(kPodGroupLabel) + "=" + p.group;
    case GroupApi::kKueue:
      return std::string(kKueueGroupLabel) + "=" + p.group;
    case GroupApi::kJob:
      return "batch.kubernetes.io/job-name=" + p.group;  // the Job controller's
    case GroupApi::kJobSet:
      return std::string(kJobSetNameLabel) + "=" + p.group;
    case GroupApi::kRayCluster:
      return std::string(kRayClusterLabel) + "=" + p.group;
    case GroupApi::kNone:
    case GroupApi::kVolcano:
    case GroupApi::kLeaderWorkerSet:
      break;
  }
  return "";
}

PodGroupInfo parse_pod_group(const json& group, GroupApi api) {
  PodGroupInfo g;
  g.api = api;
  const json& meta = field(group, "metadata");
  g.ns = str(meta, "namespace");
  g.name = str(meta, "name");
  if (g.name.empty()) throw std::invalid_argument("podgroup: metadata.name is missing");
  g.resource_version = str(meta, "resourceVersion");
  const json& spec = field(group, "spec");
  const json& mm = field(spec, "minMember");
  g.min_member = mm.is_number_integer() ? std::max(1, mm.get<int32_t>()) : 1;
  if (api == GroupApi::kVolcano) g.queue = str(spec, "queue");
  const json& status = field(group, "status");
  g.phase = str(status, "phase");
  const auto count = [&](const char* name) {
    const json& v = field(status, name);
    return v.is_number_integer() ? v.get<int32_t>() : 0;
  };
  g.scheduled = count("scheduled");
  g.running = count("running");
  g.succeeded = count("succeeded");
  g.failed = count("failed");
  return g;
}

bool node_matches(const NodeConstraints& c, const NodeInfo& node) {
  for (const auto& [k, v] : c.selector) {
    const std::string* have = find(node.labels, k.c_str());
    if (!have || *have != v) return false;
  }
  if (!c.terms.empty()) {
    bool any = false;
    for (const auto& term : c.terms) {
      // An empty term matches nothing (as the API server's node affinity).
      bool all = !term.empty();
      for (const auto& r : term) {
        if (!requirement_holds(r, node)) {
          all = false;
          break;
        }
      }
      if (all) {
        any = true;
        break;
      }
    }
    if (!any) return false;
  }
  for (const Taint& t : node.taints) {
    if (t.effect == "PreferNoSchedule") continue;
    if (!tolerates(c.tolerations, t)) return false;
  }
  return true;
}

std::string gpu_type_for_product(const std::string& product) {
  std::string up;
  for (char ch : product)
    up.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(ch))));
  const auto has = [&](const char* s) { return up.find(s) != std::string::npos; };
  if (has("H200")) return "H200";
  if (has("H100")) return "H100";
  if (has("A100")) return has("80G") ? "A100-80G" : "A100-40G";
  if (has("A10")) return "A10";
  if (has("V100")) return has("32G") ? "V100-32G" : "V100";
  if (has("P100")) return "P100";
  if (has("T4")) return "T4";
  if (has("K80")) return "K80";
  return product;
}

}  // namespace tessera::kube
