// How the scheduler reads pods and nodes: the conventions of docs/kubernetes.md.
#include "control/kube/kube_objects.h"
#include "control/kube/workload_groups.h"

#include <gtest/gtest.h>

namespace tessera::kube {
namespace {

using nlohmann::json;

json pod(json labels = json::object(), json annotations = json::object(), json spec_extra = {}) {
  json p = {{"metadata",
             {{"name", "p0"},
              {"namespace", "team-a"},
              {"uid", "u0"},
              {"resourceVersion", "7"},
              {"creationTimestamp", "2026-01-02T03:04:05Z"},
              {"labels", labels},
              {"annotations", annotations}}},
            {"spec",
             {{"schedulerName", "tessera"},
              {"containers",
               {{{"name", "main"},
                 {"resources",
                  {{"limits", {{"nvidia.com/gpu", "2"}}},
                   {"requests", {{"cpu", "500m"}, {"memory", "1Gi"}}}}}}}}}},
            {"status", {{"phase", "Pending"}}}};
  if (spec_extra.is_object()) p["spec"].update(spec_extra);
  return p;
}

TEST(KubeObjects, PodRequestsQueueAndClassFollowTheConventions) {
  const PodInfo p =
      parse_pod(pod({{"kai.scheduler/queue", "research"}, {"tessera.io/class", "production"}}));
  EXPECT_EQ(p.demand.gpus, 2);
  EXPECT_EQ(p.demand.gpu_milli, 1000);
  EXPECT_EQ(p.demand.cpu_milli, 500);
  EXPECT_EQ(p.demand.mem_mib, 1024);
  EXPECT_EQ(p.queue, "research");  // the KAI alias
  ASSERT_TRUE(p.priority.has_value());
  EXPECT_EQ(*p.priority, PriorityClass::kProduction);
  EXPECT_EQ(p.gang_key(), "pod:u0");  // no group: a gang of one
  EXPECT_TRUE(p.invalid.empty());
  EXPECT_DOUBLE_EQ(p.created, 1767323045.0);

  // tessera.io/queue wins over the aliases; no label at all: the namespace.
  EXPECT_EQ(parse_pod(pod({{"tessera.io/queue", "a"}, {"kueue.x-k8s.io/queue-name", "b"}})).queue,
            "a");
  EXPECT_EQ(parse_pod(pod()).queue, "team-a");
}

TEST(KubeObjects, GangsFromSchedulerPluginsLabelOrVolcanoAnnotation) {
  EXPECT_EQ(parse_pod(pod({{"scheduling.x-k8s.io/pod-group", "g1"}})).gang_key(), "team-a/g1");
  EXPECT_EQ(parse_pod(pod({}, {{"scheduling.k8s.io/group-name", "g2"}})).gang_key(), "team-a/g2");
}

TEST(KubeObjects, VolcanoAndKueueGroupsNameTheirConventionAndMinimum) {
  const PodInfo v = parse_pod(pod({}, {{"scheduling.volcano.sh/group-name", "g3"},
                                       {"scheduling.volcano.sh/queue-name", "research"}}));
  EXPECT_EQ(v.gang_key(), "team-a/g3");
  EXPECT_EQ(v.group_api, GroupApi::kVolcano);
  EXPECT_EQ(v.queue, "research");
  EXPECT_TRUE(v.queue_given);
  EXPECT_FALSE(parse_pod(pod()).queue_given);  // the namespace's: a PodGroup's queue may win

  const PodInfo k = parse_pod(pod({{"kueue.x-k8s.io/pod-group-name", "g4"}},
                                  {{"kueue.x-k8s.io/pod-group-total-count", "3"}}));
  EXPECT_EQ(k.gang_key(), "team-a/g4");
  EXPECT_EQ(k.group_api, GroupApi::kKueue);
  EXPECT_EQ(k.min_member, 3);
  EXPECT_TRUE(k.invalid.empty()) << k.invalid;
  // A Kueue group without its count, or with a count that is not one, is told so.
  EXPECT_NE(parse_pod(pod({{"kueue.x-k8s.io/pod-group-name", "g4"}}))
                .invalid.find("kueue.x-k8s.io/pod-group-total-count"),
            std::string::npos);
  EXPECT_NE(parse_pod(pod({{"kueue.x-k8s.io/pod-group-name", "g4"}},
                          {{"kueue.x-k8s.io/pod-group-total-count", "three"}}))
                .invalid.find("is not a number of pods"),
            std::string::npos);

  // Volcano's PodGroup: its minimum and queue, keyed apart from scheduler-plugins' of the name.
  const json group = {{"metadata", {{"name", "g3"}, {"namespace", "team-a"}}},
                      {"spec", {{"minMember", 4}, {"queue", "research"}}}};
  const PodGroupInfo vg = parse_pod_group(group, GroupApi::kVolcano);
  EXPECT_EQ(vg.min_member, 4);
  EXPECT_EQ(vg.queue, "research");
  EXPECT_EQ(vg.gang_key(), "team-a/g3");
  EXPECT_NE(vg.key(), parse_pod_group(group, GroupApi::kSchedulerPlugins).key());
  EXPECT_EQ(parse_pod_group(group, GroupApi::kSchedulerPlugins).queue, "");
}

TEST(KubeObjects, FractionsAndBadRequestsAreExplained) {
  json spec = {{"containers", {{{"name", "m"}, {"resources", json::object()}}}}};
  const PodInfo half = parse_pod(pod({}, {{"tessera.io/gpu-fraction", "0.5"}}, spec));
  EXPECT_EQ(half.demand.gpus, 1);
  EXPECT_EQ(half.demand.gpu_milli, 500);
  EXPECT_EQ(parse_pod(pod({}, {{"gpu-fraction", "0.25"}}, spec)).demand.gpu_milli, 250);  // KAI
  EXPECT_NE(parse_pod(pod({}, {{"tessera.io/gpu-fraction", "1.5"}}, spec)).invalid.find("fraction"),
            std::string::npos);
  // A fraction and whole GPUs together cannot both be honoured.
  EXPECT_NE(
      parse_pod(pod({}, {{"tessera.io/gpu-fraction", "0.5"}})).invalid.find("one or the other"),
      std::string::npos);
  EXPECT_NE(parse_pod(pod({{"tessera.io/class", "urgent"}})).invalid.find("unknown class"),
            std::string::npos);
  json bad_cpu = {
      {"containers", {{{"name", "m"}, {"resources", {{"requests", {{"cpu", "lots"}}}}}}}}};
  EXPECT_NE(parse_pod(pod({}, {}, bad_cpu)).invalid.find("cpu"), std::string::npos);
}

TEST(KubeObjects, InitContainersAndOverheadCount) {
  json spec = {{"initContainers", {{{"name", "i"}, {"resources", {{"requests", {{"cpu", "4"}}}}}}}},
               {"containers",
                {{{"name", "a"}, {"resources", {{"requests", {{"cpu", "1"}}}}}},
                 {{"name", "b"}, {"resources", {{"requests", {{"cpu", "1"}}}}}}}},
               {"overhead", {{"cpu", "250m"}}}};
  EXPECT_EQ(parse_pod(pod({}, {}, spec)).demand.cpu_milli, 4250);
}

NodeInfo node(json labels, json taints = json::array()) {
  json n = json::object();
  n["metadata"] = {{"name", "n1"}, {"labels", labels}};
  n["spec"] = {{"taints", taints}};
  n["status"]["allocatable"] = {{"nvidia.com/gpu", "8"}, {"cpu", "96"}, {"memory", "1536Gi"}};
  n["status"]["conditions"] = json::array({{{"type", "Ready"}, {"status", "True"}}});
  return parse_node(n);
}

TEST(KubeObjects, NodeSelectorAffinityAndTaints) {
  const NodeInfo h100 = node({{"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"}, {"rack", "3"}},
                             {{{"key", "nvidia.com/gpu"}, {"effect", "NoSchedule"}}});
  EXPECT_EQ(h100.gpus, 8);
  EXPECT_EQ(h100.cpu_milli, 96000);
  EXPECT_EQ(h100.mem_mib, 1536 * 1024);
  EXPECT_TRUE(h100.usable());
  const auto constraints = [](json spec) { return parse_pod(pod({}, {}, spec)).constraints; };
  const json tolerate = {{{"key", "nvidia.com/gpu"}, {"operator", "Exists"}}};
  // The taint keeps out pods that do not tolerate it.
  EXPECT_FALSE(node_matches(constraints(json::object()), h100));
  EXPECT_TRUE(node_matches(constraints({{"tolerations", tolerate}}), h100));
  EXPECT_TRUE(node_matches(
      constraints({{"tolerations", tolerate},
                   {"nodeSelector", {{"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"}}}}),
      h100));
  EXPECT_FALSE(node_matches(
      constraints({{"tolerations", tolerate},
                   {"nodeSelector", {{"nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB"}}}}),
      h100));
  const auto affinity = [&](json expr) {
    return constraints({{"tolerations", tolerate},
                        {"affinity",
                         {{"nodeAffinity",
                           {{"requiredDuringSchedulingIgnoredDuringExecution",
                             {{"nodeSelectorTerms", {{{"matchExpressions", {expr}}}}}}}}}}}});
  };
  EXPECT_TRUE(
      node_matches(affinity({{"key", "rack"}, {"operator", "In"}, {"values", {"1", "3"}}}), h100));
  EXPECT_FALSE(
      node_matches(affinity({{"key", "rack"}, {"operator", "NotIn"}, {"values", {"3"}}}), h100));
  EXPECT_TRUE(
      node_matches(affinity({{"key", "rack"}, {"operator", "Gt"}, {"values", {"2"}}}), h100));
  EXPECT_FALSE(node_matches(affinity({{"key", "zone"}, {"operator", "Exists"}}), h100));
  EXPECT_TRUE(node_matches(affinity({{"key", "zone"}, {"operator", "DoesNotExist"}}), h100));
}

TEST(KubeObjects, GpuProductsMapToTheEnginesTypes) {
  EXPECT_EQ(gpu_type_for_product("NVIDIA-H100-80GB-HBM3"), "H100");
  EXPECT_EQ(gpu_type_for_product("NVIDIA-A100-SXM4-80GB"), "A100-80G");
  EXPECT_EQ(gpu_type_for_product("NVIDIA-A100-SXM4-40GB"), "A100-40G");
  EXPECT_EQ(gpu_type_for_product("NVIDIA-A10G"), "A10");
  EXPECT_EQ(gpu_type_for_product("Tesla-T4"), "T4");
  EXPECT_EQ(gpu_type_for_product("Some-New-GPU"), "Some-New-GPU");
}

TEST(KubeObjects, TimesRoundTrip) {
  EXPECT_EQ(format_time(1767323045.0), "2026-01-02T03:04:05Z");
  EXPECT_EQ(format_micro_time(1767323045.25), "2026-01-02T03:04:05.250000Z");
  EXPECT_DOUBLE_EQ(parse_time("2026-01-02T03:04:05.250000Z"), 1767323045.25);
  EXPECT_EQ(parse_time("garbage"), 0);
}

// Everything parse_pod / parse_node produce, as text, to compare two parses.
std::string describe(const PodInfo& p) {
  std::string s = p.ns + "|" + p.name + "|" + p.uid + "|" + p.resource_version + "|" +
                  p.scheduler_name + "|" + p.node_name + "|" + p.phase + "|" +
                  std::to_string(p.deleting) + std::to_string(p.gated) + "|" +
                  std::to_string(p.created) + "|" + std::to_string(p.bound_at) + "|" +
                  std::to_string(p.grace_seconds) + "|" + std::to_string(p.demand.gpus) + "/" +
                  std::to_string(p.demand.gpu_milli) + "/" + std::to_string(p.demand.cpu_milli) +
                  "/" + std::to_string(p.demand.mem_mib) + "|" + p.group + "|" + p.queue + "|" +
                  (p.priority ? std::to_string(static_cast<int>(*p.priority)) : "-") + "|" +
                  std::to_string(p.min_member) + "|" + std::to_string(p.checkpoint_grace) + "|";
  for (int32_t i : p.gpu_index) s += std::to_string(i) + ",";
  s += "|" + std::to_string(p.power_limit_w);
  return s + "|" + p.constraints_key + "|" + p.unschedulable_message + "|" + p.invalid;
}
std::string describe(const NodeInfo& n) {
  std::string s = n.name + "|" + n.resource_version + "|" + std::to_string(n.ready) +
                  std::to_string(n.unschedulable) + "|" + std::to_string(n.gpus) + "/" +
                  std::to_string(n.cpu_milli) + "/" + std::to_string(n.mem_mib) + "|" +
                  n.gpu_product + "|";
  for (const auto& [k, v] : n.labels) s += k + "=" + v + ",";
  for (const Taint& t : n.taints) s += t.key + "=" + t.value + ":" + t.effect + ",";
  return s + "|" + std::to_string(n.thermal_headroom_w) + "|" + n.thermal_headroom_invalid;
}

// The reflectors parse only pod_fields() / node_fields(): on full objects as the API server
// sends them, that must give exactly what parsing everything gives.
TEST(KubeObjects, TheFieldMasksKeepEverythingTheParsersRead) {
  const json managed = json::parse(R"([{"manager":"kubectl","operation":"Update",
      "fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:containers":{}}}}])");
  json bound = pod({{kPodGroupLabel, "g"}, {kQueueLabel, "research"}, {kClassLabel, "production"}},
                   {{kGpuIndexAnnotation, "0,3"},
                    {kGraceAnnotation, "90"},
                    {kMinMemberAnnotation, "4"},
                    {kPowerLimitAnnotation, "215"}},
                   json::parse(R"({
      "nodeName": "n1", "priorityClassName": "ignored", "terminationGracePeriodSeconds": 45,
      "initContainers": [{"name": "init", "image": "busybox", "command": ["sh"],
                          "resources": {"requests": {"cpu": "4", "memory": "8Gi"}}}],
      "overhead": {"cpu": "250m", "memory": "128Mi"},
      "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
      "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
          {"key": "zone", "operator": "In", "values": ["a", "b"]}]}]}}},
      "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
      "volumes": [{"name": "data", "emptyDir": {}}],
      "securityContext": {"runAsUser": 1000}})"));
  bound["metadata"]["managedFields"] = managed;
  bound["metadata"]["ownerReferences"] = json::parse(R"([{"kind":"Job","name":"j","uid":"x"}])");
  bound["metadata"]["deletionTimestamp"] = "2026-01-02T03:09:00Z";
  bound["spec"]["containers"][0]["env"] = json::parse(R"([{"name":"A","value":"1"}])");
  bound["spec"]["containers"][0]["readinessProbe"] = json::parse(R"({"httpGet":{"port":80}})");
  bound["status"] = json::parse(R"({"phase": "Running", "hostIP": "10.0.0.1",
      "conditions": [{"type": "Ready", "status": "True"},
                     {"type": "PodScheduled", "status": "True",
                      "lastTransitionTime": "2026-01-02T03:05:00Z"}],
      "containerStatuses": [{"name": "main", "ready": true, "restartCount": 0}]})");
  json waiting = pod({}, {{kFractionAnnotation, "0.25"}},
                     json::parse(R"({"schedulingGates": [{"name": "wait"}]})"));
  waiting["spec"]["containers"][0]["resources"] = json::object();
  waiting["status"]["conditions"] = json::parse(R"([{"type": "PodScheduled", "status": "False",
      "reason": "Unschedulable", "message": "gang team-a/g: 8 GPUs free of 16"}])");
  json indexed = pod({}, {{kJobIndexAnnotation, "2"}});
  indexed["metadata"]["ownerReferences"] = json::parse(
      R"([{"apiVersion":"batch/v1","kind":"Job","name":"train","uid":"x","controller":true}])");
  EXPECT_EQ(parse_pod(parse_masked(indexed.dump(), pod_fields())).gang_key(), "team-a/train");
  for (const json& p : {bound, waiting, pod(), indexed}) {
    const PodInfo whole = parse_pod(p);
    const PodInfo masked = parse_pod(parse_masked(p.dump(), pod_fields()));
    EXPECT_EQ(describe(masked), describe(whole));
  }
  // Not a trivial comparison: the full pod's every field was read.
  const std::string b = describe(parse_pod(bound));
  for (const char* part : {"|n1|Running|10|", "|45|2/1000/4250/8320|g|research|", "|0,3,|215.",
                           "NVIDIA-H100-80GB-HBM3", "zone"}) {
    EXPECT_NE(b.find(part), std::string::npos) << part << " in " << b;
  }

  const json job = json::parse(R"({
    "metadata": {"name": "train", "namespace": "team-a", "resourceVersion": "3",
                 "managedFields": [{"manager": "kube-controller-manager"}]},
    "spec": {"parallelism": 4, "completions": 8, "completionMode": "Indexed", "suspend": true,
             "template": {"spec": {"containers": [{"name": "main", "image": "trainer"}]}}},
    "status": {"active": 4}})");
  for (const json& j : {job, parse_masked(job.dump(), job_fields())}) {
    const PodGroupInfo g = parse_job(j);
    EXPECT_EQ(g.min_member, 4);  // min(parallelism, completions)
    EXPECT_TRUE(g.suspended);
    EXPECT_EQ(g.key(), "job:team-a/train");
    EXPECT_EQ(g.gang_key(), "team-a/train");
  }

  const json node = json::parse(R"({
    "metadata": {"name": "n1", "resourceVersion": "9", "managedFields": [{"manager": "kubelet"}],
                 "labels": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB", "zone": "a"},
                 "annotations": {"node.alpha.kubernetes.io/ttl": "0",
                                 "tessera.io/thermal-headroom-watts": "1200"}},
    "spec": {"unschedulable": true, "podCIDR": "10.1.0.0/24",
             "taints": [{"key": "gpu", "value": "x", "effect": "NoSchedule"}]},
    "status": {"allocatable": {"nvidia.com/gpu": "8", "cpu": "96", "memory": "1Ti"},
               "capacity": {"nvidia.com/gpu": "8"},
               "conditions": [{"type": "MemoryPressure", "status": "False"},
                              {"type": "Ready", "status": "True"}],
               "images": [{"names": ["nvcr.io/nvidia/pytorch:24.01"], "sizeBytes": 9000000000}],
               "nodeInfo": {"kubeletVersion": "v1.31.0"}}})");
  EXPECT_EQ(describe(parse_node(parse_masked(node.dump(), node_fields()))),
            describe(parse_node(node)));
  EXPECT_EQ(parse_node(node).thermal_headroom_w, 1200);
  // Of the node's annotations only Tessera's is kept (agents write large ones that change).
  const json masked = parse_masked(node.dump(), node_fields());
  EXPECT_EQ(masked["metadata"]["annotations"].size(), 1u) << masked.dump();
}

// Power annotations (docs/kubernetes.md, "Power and energy"): a malformed value is ignored
// and kept for one log line, never an error that would drop the node.
TEST(KubeObjects, PowerAnnotationsParseAndMalformedValuesAreIgnored) {
  auto node = [](const std::string& headroom) {
    json n = {{"metadata", {{"name", "n1"}, {"annotations", json::object()}}},
              {"status", {{"allocatable", {{"nvidia.com/gpu", "8"}}}}}};
    if (!headroom.empty()) n["metadata"]["annotations"][kThermalHeadroomAnnotation] = headroom;
    return parse_node(n);
  };
  EXPECT_EQ(node("").thermal_headroom_w, -1);  // none: unconstrained
  EXPECT_EQ(node("0").thermal_headroom_w, 0);
  EXPECT_EQ(node("450.5").thermal_headroom_w, 450.5);
  for (const std::string bad : {"hot", "-5", "12W", "nan", "1e999"}) {
    const NodeInfo n = node(bad);
    EXPECT_EQ(n.thermal_headroom_w, -1) << bad;
    EXPECT_EQ(n.thermal_headroom_invalid, bad);
    EXPECT_EQ(n.gpus, 8) << bad;  // the node itself is read as ever
  }
  EXPECT_EQ(parse_pod(pod({}, {{kPowerLimitAnnotation, "187"}})).power_limit_w, 187);
  EXPECT_EQ(parse_pod(pod({}, {{kPowerLimitAnnotation, "low"}})).power_limit_w, 0);
  EXPECT_EQ(parse_pod(pod()).power_limit_w, 0);
  EXPECT_TRUE(parse_pod(pod({}, {{kPowerLimitAnnotation, "low"}})).invalid.empty());
}

}  // namespace
}  // namespace tessera::kube
