// The parts of Kubernetes Pods, Nodes and PodGroups the scheduler reads, parsed once from the
// API's JSON into compact values (the cache keeps these, not the JSON), and the conventions
// that map them onto the engine's model (docs/kubernetes.md):
//  - gang: label scheduling.x-k8s.io/pod-group (scheduler-plugins' PodGroup), annotation
//    scheduling.k8s.io/group-name or scheduling.volcano.sh/group-name (Volcano's PodGroup),
//    label kueue.x-k8s.io/pod-group-name with annotation kueue.x-k8s.io/pod-group-total-count
//    (Kueue's plain-pod groups, no object); the pods of an Indexed batch/v1 Job (its
//    parallelism, as KAI's pod-grouper derives a group from the owner); no group: a gang of one;
//  - queue: label tessera.io/queue, else kai.scheduler/queue, else kueue.x-k8s.io/queue-name,
//    else annotation scheduling.volcano.sh/queue-name, else a Volcano PodGroup's spec.queue,
//    else the namespace;
//  - priority class: label tessera.io/class, else spec.priorityClassName when it names one of
//    the engine's classes;
//  - GPUs: whole GPUs from the containers' nvidia.com/gpu limits (requests when no limit);
//    a share of one GPU from annotation tessera.io/gpu-fraction (or KAI's gpu-fraction).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/kube/field_mask.h"
#include "model/job.h"
#include "model/resources.h"
#include "store/job_request.h"

namespace tessera::kube {

inline constexpr const char* kGpuResource = "nvidia.com/gpu";
inline constexpr const char* kGpuProductLabel = "nvidia.com/gpu.product";
inline constexpr const char* kPodGroupLabel = "scheduling.x-k8s.io/pod-group";
inline constexpr const char* kVolcanoGroupAnnotation = "scheduling.k8s.io/group-name";
inline constexpr const char* kVolcanoGroupAnnotationNew = "scheduling.volcano.sh/group-name";
inline constexpr const char* kVolcanoQueueAnnotation = "scheduling.volcano.sh/queue-name";
inline constexpr const char* kKueueGroupLabel = "kueue.x-k8s.io/pod-group-name";
inline constexpr const char* kKueueGroupCountAnnotation = "kueue.x-k8s.io/pod-group-total-count";
inline constexpr const char* kQueueLabel = "tessera.io/queue";
inline constexpr const char* kClassLabel = "tessera.io/class";
inline constexpr const char* kFractionAnnotation = "tessera.io/gpu-fraction";
inline constexpr const char* kKaiFractionAnnotation = "gpu-fraction";
inline constexpr const char* kGpuIndexAnnotation = "tessera.io/gpu-index";
inline constexpr const char* kGraceAnnotation = "tessera.io/checkpoint-grace-seconds";
inline constexpr const char* kMinMemberAnnotation = "tessera.io/min-member";
// Power (docs/kubernetes.md, "Power and energy"): the watts a node may draw above idle (its
// thermal headroom; written by an operator or a node agent), and the GPU power limit Tessera
// chose for a pod (written on the Binding, then patched; advisory: a node agent applies it).
inline constexpr const char* kThermalHeadroomAnnotation = "tessera.io/thermal-headroom-watts";
inline constexpr const char* kPowerLimitAnnotation = "tessera.io/power-limit-watts";
// Goodput-adaptive pod groups (--policy goodput; docs/kubernetes.md, "Adaptive training"): the
// pods' batch limits (the batch they were tuned for, the largest, and the per-GPU micro-batch
// range "MIN-MAX")...
inline constexpr const char* kAdaptiveBatchAnnotation = "tessera.io/adaptive-batch";
inline constexpr const char* kAdaptiveMaxBatchAnnotation = "tessera.io/adaptive-max-batch";
inline constexpr const char* kAdaptivePerGpuAnnotation = "tessera.io/adaptive-per-gpu-batch";
// ... and what Tessera tells each bound pod on its Binding (read with the downward API): the
// gang's size and this pod's rank in it, its GPUs in all, the batch split to train with, and
// the token its reports carry.
inline constexpr const char* kWorldSizeAnnotation = "tessera.io/world-size";
inline constexpr const char* kRankAnnotation = "tessera.io/rank";
inline constexpr const char* kGpusAnnotation = "tessera.io/gpus";
inline constexpr const char* kBatchSizeAnnotation = "tessera.io/batch-size";
inline constexpr const char* kMicroBatchAnnotation = "tessera.io/micro-batch";
inline constexpr const char* kAccumStepsAnnotation = "tessera.io/accum-steps";
inline constexpr const char* kReportTokenAnnotation = "tessera.io/report-token";
// Data locality (docs/data.md): the dataset a pod reads, and the node label prefix saying which
// datasets a node holds (data.tessera.io/imagenet: "true", set by whatever caches them there).
inline constexpr const char* kDatasetAnnotation = "tessera.io/dataset";
inline constexpr const char* kDataLabelPrefix = "data.tessera.io/";
// Pre-staging (docs/data.md, "In tessera kube"): the scheduler asks a node's data agent to copy
// a dataset ahead of a waiting gang with annotation stage.data.tessera.io/NAME (value: the
// gang, ns/group); the agent labels the node data.tessera.io/NAME once the copy is there.
inline constexpr const char* kStageAnnotationPrefix = "stage.data.tessera.io/";

using Labels = std::map<std::string, std::string>;

// Which convention named a pod's group, and so which object (if any) gives its minimum.
enum class GroupApi : uint8_t {
  kNone,              // no group: a gang of one
  kSchedulerPlugins,  // scheduling.x-k8s.io/v1alpha1 PodGroup
  kVolcano,           // scheduling.volcano.sh/v1beta1 PodGroup
  kKueue,             // no object: the pods' kueue.x-k8s.io/pod-group-total-count
  kJob,               // the batch/v1 Job that owns the pods (Indexed Jobs only)
  kJobSet,            // the jobset.x-k8s.io JobSet whose Jobs own the pods
  kLeaderWorkerSet,   // no object: one LeaderWorkerSet group, its pods' size annotation
  kRayCluster,        // the ray.io RayCluster that owns the pods (head and workers)
};
// The API group/version of the PodGroup a convention reads ("" for kNone and kKueue).
const char* group_api_name(GroupApi api);

// One requirement of a node selector term (required node affinity).
struct NodeRequirement {
  enum Op : uint8_t { kIn, kNotIn, kExists, kDoesNotExist, kGt, kLt };
  std::string key;
  Op op = kIn;
  std::vector<std::string> values;
  bool field = false;  // matchFields (only metadata.name) rather than matchExpressions
  bool operator==(const NodeRequirement&) const = default;
};

struct Toleration {
  std::string key, value, effect;  // effect "" = all effects
  bool exists = false;             // operator Exists (else Equal)
  bool operator==(const Toleration&) const = default;
};

struct Taint {
  std::string key, value, effect;  // NoSchedule, PreferNoSchedule, NoExecute
};

// Where a pod may run: every selector label, one of the affinity terms (each a conjunction),
// and a toleration for every NoSchedule/NoExecute taint.
struct NodeConstraints {
  Labels selector;
  std::vector<std::vector<NodeRequirement>> terms;  // empty: no required affinity
  std::vector<Toleration> tolerations;
  bool operator==(const NodeConstraints&) const = default;
  bool empty() const { return selector.empty() && terms.empty(); }
  // A stable text of the constraints, so pods that share them share one node set.
  std::string key() const;
};

struct NodeInfo {
  std::string name;
  std::string resource_version;
  Labels labels;
  std::vector<Taint> taints;
  bool ready = false;
  bool unschedulable = false;
  int32_t gpus = 0;  // allocatable nvidia.com/gpu
  int64_t cpu_milli = 0;
  int64_t mem_mib = 0;
  std::string gpu_product;  // label nvidia.com/gpu.product ("" without GPUs)
  // Annotation tessera.io/thermal-headroom-watts: the most the node may draw above idle (W);
  // -1 when absent or malformed. A malformed value is kept in `thermal_headroom_invalid` (the
  // text, for one log line) and otherwise ignored: a typo must not stop the node's scheduling.
  double thermal_headroom_w = -1;
  std::string thermal_headroom_invalid;

  // Whether the node takes new pods at all (Ready, not cordoned).
  bool usable() const { return ready && !unschedulable; }
};

struct PodInfo {
  std::string ns, name, uid, resource_version;
  std::string scheduler_name;
  std::string node_name;       // "" while unbound
  std::string phase;           // Pending, Running, Succeeded, Failed, Unknown
  bool deleting = false;       // metadata.deletionTimestamp set
  bool gated = false;          // spec.schedulingGates non-empty: not ours to schedule yet
  double created = 0;          // creationTimestamp, unix seconds
  double bound_at = 0;         // PodScheduled=True's lastTransitionTime (else created), when bound
  int64_t grace_seconds = 30;  // spec.terminationGracePeriodSeconds
  MemberDemand demand;         // per pod (whole GPUs or one share)
  std::string group;           // gang name within the namespace ("" = a gang of one)
  std::string owner_uid;       // kJob, kJobSet: the owner's uid (ownerReference, jobset-uid label)
  GroupApi group_api = GroupApi::kNone;
  std::string queue;                      // the queue's name (label or namespace)
  bool queue_given = false;               // named by a label or annotation (else the namespace's)
  std::optional<PriorityClass> priority;  // when the pod names one of the engine's classes
  // tessera.io/min-member or kueue.x-k8s.io/pod-group-total-count (a group with no PodGroup)
  int32_t min_member = 0;
  double checkpoint_grace = -1;    // tessera.io/checkpoint-grace-seconds, or -1
  std::vector<int32_t> gpu_index;  // tessera.io/gpu-index: the GPUs Tessera chose
  double power_limit_w = 0;  // tessera.io/power-limit-watts; 0 when absent (the GPUs' default)
  AdaptiveBatch adaptive;    // tessera.io/adaptive-*; batch 0: not adaptive
  std::string dataset;       // tessera.io/dataset; "" when it names none
  NodeConstraints constraints;
  std::string constraints_key;  // constraints.key(), computed once when parsed
  // PodScheduled=False's message as last written (so the scheduler writes only changes).
  std::string unschedulable_message;
  std::string invalid;  // why the pod cannot be scheduled as written ("" = fine)

  bool terminal() const { return phase == "Succeeded" || phase == "Failed"; }
  // Holds resources on its node: bound and not finished (terminating pods still hold them).
  bool holds_node() const { return !node_name.empty() && !terminal(); }
  std::string key() const { return ns + "/" + name; }
  std::string gang_key() const { return group.empty() ? "pod:" + uid : ns + "/" + group; }
};

// The cache's key of a PodGroup: "ns/name" for scheduler-plugins' (the gang's own key),
// "volcano:ns/name" for Volcano's, "job:ns/name" for a Job, "jobset:" and "ray:" for JobSets
// and RayClusters, so that kinds may share a name.
std::string group_key(GroupApi api, const std::string& ns, const std::string& name);

// A label selector (kubectl -l) for the pods of pod p's group; "" where no label names the
// group alone (a lone pod, a LeaderWorkerSet group, a Volcano group's annotation).
std::string group_selector(const PodInfo& p);

struct PodGroupInfo {
  GroupApi api = GroupApi::kSchedulerPlugins;
  std::string ns, name, resource_version;
  std::string uid;  // a Job's or JobSet's: its pods must name it as their owner
  int32_t min_member = 1;
  std::string queue;       // Volcano's spec.queue ("" when none)
  bool suspended = false;  // a Job's spec.suspend
  // A suspended Job's pod template as a pod (parse_pod), so that Tessera can admit the Job
  // whole before its pods exist; null when not suspended or unreadable.
  std::shared_ptr<const PodInfo> pod_template;
  // A Job labelled for Kueue (kueue.x-k8s.io/queue-name): admitting it is Kueue's, not ours.
  bool queue_managed = false;
  int32_t active = 0;  // a Job's status.active: its pods created and not finished
  std::string phase;   // status.phase as last seen
  int32_t scheduled = 0, running = 0, succeeded = 0, failed = 0;
  std::string key() const { return group_key(api, ns, name); }
  std::string gang_key() const { return ns + "/" + name; }
};

// Parsers: throw std::invalid_argument naming the field for a malformed object (a missing
// metadata.name, say). A pod whose request Tessera cannot honour parses fine with `invalid`
// set, so it can be told why.
NodeInfo parse_node(const nlohmann::json& node);
// Whether node `n` is labelled as holding `dataset` (data.tessera.io/<dataset>, any value but
// "false").
bool holds_dataset(const NodeInfo& n, const std::string& dataset);
PodInfo parse_pod(const nlohmann::json& pod);
// Either API's PodGroup (spec.minMember; Volcano's spec.queue).
PodGroupInfo parse_pod_group(const nlohmann::json& group, GroupApi api);
// Exactly the fields each parser reads (the reflectors parse nothing else). A field a parser
// starts to read must be added here: the masked-parse tests compare both ways on full objects.
const FieldMask& node_fields();
const FieldMask& pod_fields();

// Seconds since the epoch of an RFC 3339 time ("2026-01-01T00:00:00Z", fractions allowed);
// 0 when empty or malformed.
double parse_time(const std::string& text);
// RFC 3339 with microseconds ("2026-01-01T00:00:00.000000Z"), as MicroTime.
std::string format_micro_time(double unix_seconds);
std::string format_time(double unix_seconds);  // seconds precision, as metav1.Time

// A non-negative number of watts ("250", "187.5"), as the power annotations hold; false for
// anything else (w is then unchanged).
bool parse_watts(const std::string& text, double& w);

// A pod's adaptive-batch annotations (tessera.io/adaptive-batch, and the optional max batch and
// per-GPU range) into `out`; the reason, naming the annotation, when one is malformed.
std::optional<std::string> parse_adaptive(const std::string& batch, const std::string* max_batch,
                                          const std::string* per_gpu, AdaptiveBatch& out);

// Whether a pod with these constraints may run on the node (labels, affinity, taints).
bool node_matches(const NodeConstraints& c, const NodeInfo& node);

// The engine's GPU type name for a product label ("NVIDIA-H100-80GB-HBM3" -> "H100",
// "NVIDIA-A100-SXM4-80GB" -> "A100-80G"); the label itself when no known type matches.
std::string gpu_type_for_product(const std::string& product);

}  // namespace tessera::kube
