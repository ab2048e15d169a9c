#include "control/kube/workload_groups.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "control/kube/json_fields.h"
#include "model/input_error.h"

namespace tessera::kube {

using nlohmann::json;

namespace {

// The controller ownerReference of `kind` in `apiVersion`, or null.
const json* controller_owner(const json& meta, const char* api_version, const char* kind) {
  for (const json& ref : field(meta, "ownerReferences")) {
    if (ref.is_object() && ref.value("controller", false) && str(ref, "kind") == kind &&
        str(ref, "apiVersion") == api_version && !str(ref, "name").empty()) {
      return &ref;
    }
  }
  return nullptr;
}

// A count in 1..1,000,000 from text ("4"); false for anything else.
bool parse_size(const std::string& text, int32_t& out) {
  if (text.empty() || text.size() > 7) return false;
  int64_t n = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return false;
    n = n * 10 + (c - '0');
  }
  if (n < 1 || n > 1000000) return false;
  out = static_cast<int32_t>(n);
  return true;
}

// The common metadata of an owner object as a group.
PodGroupInfo owner_group(const json& obj, GroupApi api, const char* what) {
  PodGroupInfo g;
  g.api = api;
  const json& meta = field(obj, "metadata");
  g.ns = str(meta, "namespace");
  g.name = str(meta, "name");
  if (g.name.empty()) throw std::invalid_argument(std::string(what) + ": metadata.name is missing");
  g.uid = str(meta, "uid");
  g.resource_version = str(meta, "resourceVersion");
  return g;
}

// The pods a Job's template runs at once: min(parallelism, completions - succeeded), at
// least 1 (parallelism defaults to 1).
int64_t job_members(const json& spec, int64_t succeeded) {
  int64_t n = integer(spec, "parallelism", 1);
  const json& comp = field(spec, "completions");
  if (comp.is_number_integer()) n = std::min(n, comp.get<int64_t>() - succeeded);
  return std::max<int64_t>(1, n);
}

int32_t clamp_members(int64_t n) {
  return static_cast<int32_t>(std::clamp<int64_t>(n, 1, 1000000));
}

}  // namespace

void derive_workload_group(const json& meta, const Labels& labels, const Labels& notes,
                           PodInfo& p) {
  if (const std::string* js = find(labels, kJobSetNameLabel); js && !js->empty()) {
    p.group = *js;
    p.group_api = GroupApi::kJobSet;
    if (const std::string* uid = find(labels, kJobSetUidLabel)) p.owner_uid = *uid;
    return;
  }
  const std::string* lws = find(labels, kLwsNameLabel);
  const std::string* index = find(labels, kLwsGroupIndexLabel);
  if (lws && index && !lws->empty() && !index->empty()) {
    // Each group (a leader and its workers) is a gang; the set's groups are independent.
    p.group = *lws + "-" + *index;
    p.group_api = GroupApi::kLeaderWorkerSet;
    const std::string* size = find(notes, kLwsSizeAnnotation);
    if (size == nullptr || !parse_size(*size, p.min_member)) {
      p.invalid = std::string("annotation ") + kLwsSizeAnnotation + ": " +
                  (size == nullptr ? std::string("missing") : quote_prefix(*size)) +
                  " is not the group's number of pods (1 or more)";
    }
    return;
  }
  if (const std::string* ray = find(labels, kRayClusterLabel); ray && !ray->empty()) {
    if (controller_owner(meta, "ray.io/v1", "RayCluster") != nullptr) {
      p.group = *ray;
      p.group_api = GroupApi::kRayCluster;
      return;
    }
  }
  if (find(notes, kJobIndexAnnotation) != nullptr) {
    // An Indexed Job's pod: its controller owner is the group (ranks need one another).
    if (const json* ref = controller_owner(meta, "batch/v1", "Job")) {
      p.group = str(*ref, "name");
      p.group_api = GroupApi::kJob;
      p.owner_uid = str(*ref, "uid");
    }
  }
}

PodGroupInfo parse_job(const json& job) {
  PodGroupInfo g = owner_group(job, GroupApi::kJob, "job");
  const json& spec = field(job, "spec");
  // Those that succeeded left the watch: the rest start together (completions 6, parallelism
  // 4, four done: the last two are a gang of two).
  g.min_member = clamp_members(job_members(spec, integer(field(job, "status"), "succeeded", 0)));
  g.suspended = field(spec, "suspend").is_boolean() && spec["suspend"].get<bool>();
  g.active = static_cast<int32_t>(integer(field(job, "status"), "active", 0));
  const Labels labels = string_map(field(field(job, "metadata"), "labels"));
  g.queue_managed = find(labels, "kueue.x-k8s.io/queue-name") != nullptr;
  if (g.suspended) {
    // Its pods as they will be: the template's metadata and spec under the Job's name.
    const json& tmpl = field(spec, "template");
    json meta = field(tmpl, "metadata").is_object() ? tmpl["metadata"] : json::object();
    meta["namespace"] = g.ns;
    meta["name"] = g.name;
    meta["uid"] = "job:" + g.uid;
    meta["creationTimestamp"] = str(field(job, "metadata"), "creationTimestamp");
    try {
      g.pod_template = std::make_shared<const PodInfo>(
          parse_pod(json{{"metadata", meta}, {"spec", field(tmpl, "spec")}}));
    } catch (const std::invalid_argument&) {
      // A template the API accepted but Tessera cannot read: not admitted by Tessera (its
      // pods, once something else admits it, are told why).
    }
  }
  return g;
}

PodGroupInfo parse_jobset(const json& jobset) {
  PodGroupInfo g = owner_group(jobset, GroupApi::kJobSet, "jobset");
  const json& spec = field(jobset, "spec");
  int64_t n = 0;
  for (const json& rj : field(spec, "replicatedJobs")) {
    const int64_t replicas = std::max<int64_t>(0, integer(rj, "replicas", 1));
    n += replicas * job_members(field(field(rj, "template"), "spec"), 0);
  }
  g.min_member = clamp_members(n);
  g.suspended = field(spec, "suspend").is_boolean() && spec["suspend"].get<bool>();
  return g;
}

PodGroupInfo parse_ray_cluster(const json& cluster) {
  PodGroupInfo g = owner_group(cluster, GroupApi::kRayCluster, "raycluster");
  const json& spec = field(cluster, "spec");
  const bool autoscales = field(spec, "enableInTreeAutoscaling").is_boolean() &&
                          spec["enableInTreeAutoscaling"].get<bool>();
  int64_t workers = 0;
  for (const json& wg : field(spec, "workerGroupSpecs")) {
    if (field(wg, "suspend").is_boolean() && wg["suspend"].get<bool>()) continue;
    const int64_t min = std::max<int64_t>(0, integer(wg, "minReplicas", 0));
    const int64_t max = integer(wg, "maxReplicas", std::numeric_limits<int32_t>::max());
    const int64_t hosts = std::max<int64_t>(1, integer(wg, "numOfHosts", 1));
    int64_t replicas = 0;
    if (autoscales) {
      replicas = min;  // the autoscaler adds the rest as Ray asks for them
    } else if (min > max) {
      replicas = max;
    } else {
      replicas = std::clamp(integer(wg, "replicas", min), min, max);
    }
    workers += replicas * hosts;
  }
  g.min_member = clamp_members(1 + workers);  // the head, and its workers
  g.suspended = field(spec, "suspend").is_boolean() && spec["suspend"].get<bool>();
  return g;
}

const FieldMask& job_fields() {
  static const FieldMask m = FieldMask::of({
      "metadata.namespace",
      "metadata.name",
      "metadata.resourceVersion",
      "metadata.uid",
      "spec.parallelism",
      "spec.completions",
      "metadata.labels",
      "metadata.creationTimestamp",
      "spec.suspend",
      "spec.template",
      "status.succeeded",
      "status.active",
  });
  return m;
}

const FieldMask& jobset_fields() {
  static const FieldMask m = FieldMask::of({
      "metadata.namespace",
      "metadata.name",
      "metadata.resourceVersion",
      "metadata.uid",
      "spec.suspend",
      "spec.replicatedJobs.replicas",
      "spec.replicatedJobs.template.spec.parallelism",
      "spec.replicatedJobs.template.spec.completions",
  });
  return m;
}

const FieldMask& ray_cluster_fields() {
  static const FieldMask m = FieldMask::of({
      "metadata.namespace",
      "metadata.name",
      "metadata.resourceVersion",
      "metadata.uid",
      "spec.suspend",
      "spec.enableInTreeAutoscaling",
      "spec.workerGroupSpecs.suspend",
      "spec.workerGroupSpecs.replicas",
      "spec.workerGroupSpecs.minReplicas",
      "spec.workerGroupSpecs.maxReplicas",
      "spec.workerGroupSpecs.numOfHosts",
  });
  return m;
}

}  // namespace tessera::kube
