// Gangs derived from the workload that made the pods (JobSet, LeaderWorkerSet, RayCluster,
// Indexed Job): which pods belong together, and how many of them must start at once.
#include "control/kube/workload_groups.h"

#include <gtest/gtest.h>

#include "control/kube/cluster_model.h"

namespace tessera::kube {
namespace {

using nlohmann::json;

json pod(const json& labels, const json& annotations = json::object(),
         const json& owners = json::array()) {
  return {
      {"metadata",
       {{"name", "p0"},
        {"namespace", "ml"},
        {"uid", "u0"},
        {"labels", labels},
        {"annotations", annotations},
        {"ownerReferences", owners}}},
      {"spec",
       {{"schedulerName", "tessera"},
        {"containers", {{{"name", "c"}, {"resources", {{"limits", {{"nvidia.com/gpu", 1}}}}}}}}}}};
}

json owner(const char* api, const char* kind, const char* name, const char* uid) {
  return json::array(
      {{{"apiVersion", api}, {"kind", kind}, {"name", name}, {"uid", uid}, {"controller", true}}});
}

TEST(WorkloadGroups, PodsAreGroupedByTheWorkloadThatMadeThem) {
  // A JobSet's pods: one gang across its replicated Jobs, not one per Job (they are Indexed
  // Jobs' pods too).
  const PodInfo js = parse_pod(
      pod({{"jobset.sigs.k8s.io/jobset-name", "pretrain"}, {"jobset.sigs.k8s.io/jobset-uid", "s1"}},
          {{"batch.kubernetes.io/job-completion-index", "0"}},
          owner("batch/v1", "Job", "pretrain-workers-0", "j1")));
  EXPECT_EQ(js.group_api, GroupApi::kJobSet);
  EXPECT_EQ(js.gang_key(), "ml/pretrain");
  EXPECT_EQ(js.owner_uid, "s1");

  // A LeaderWorkerSet group: the set's name and group index; its size from the pod.
  const PodInfo lws = parse_pod(pod({{"leaderworkerset.sigs.k8s.io/name", "vllm"},
                                     {"leaderworkerset.sigs.k8s.io/group-index", "2"}},
                                    {{"leaderworkerset.sigs.k8s.io/size", "4"}}));
  EXPECT_EQ(lws.group_api, GroupApi::kLeaderWorkerSet);
  EXPECT_EQ(lws.gang_key(), "ml/vllm-2");
  EXPECT_EQ(lws.min_member, 4);
  EXPECT_EQ(lws.invalid, "");
  const PodInfo bad = parse_pod(pod({{"leaderworkerset.sigs.k8s.io/name", "vllm"},
                                     {"leaderworkerset.sigs.k8s.io/group-index", "2"}},
                                    {{"leaderworkerset.sigs.k8s.io/size", "four"}}));
  EXPECT_NE(bad.invalid.find("leaderworkerset.sigs.k8s.io/size"), std::string::npos) << bad.invalid;

  // A RayCluster's pods, only when the RayCluster owns them (the label alone is not enough).
  const PodInfo ray = parse_pod(pod({{"ray.io/cluster", "rc"}, {"ray.io/node-type", "worker"}},
                                    json::object(), owner("ray.io/v1", "RayCluster", "rc", "r1")));
  EXPECT_EQ(ray.group_api, GroupApi::kRayCluster);
  EXPECT_EQ(ray.gang_key(), "ml/rc");
  EXPECT_EQ(parse_pod(pod({{"ray.io/cluster", "rc"}})).group_api, GroupApi::kNone);

  // A group the pods name themselves wins over the workload's.
  const PodInfo named = parse_pod(pod(
      {{"scheduling.x-k8s.io/pod-group", "mine"}, {"jobset.sigs.k8s.io/jobset-name", "pretrain"}}));
  EXPECT_EQ(named.group_api, GroupApi::kSchedulerPlugins);
  EXPECT_EQ(named.gang_key(), "ml/mine");

  // The read API's kubectl selector for each.
  EXPECT_EQ(group_selector(js), "jobset.sigs.k8s.io/jobset-name=pretrain");
  EXPECT_EQ(group_selector(ray), "ray.io/cluster=rc");
  EXPECT_EQ(group_selector(lws), "");
}

TEST(WorkloadGroups, OwnersSayHowManyPodsStartTogether) {
  // JobSet: replicas x min(parallelism, completions) over its replicated Jobs.
  const json jobset = json::parse(R"({
    "metadata": {"name": "pretrain", "namespace": "ml", "uid": "s1", "resourceVersion": "7"},
    "spec": {"replicatedJobs": [
      {"name": "driver", "template": {"spec": {"parallelism": 1, "completions": 1}}},
      {"name": "workers", "replicas": 2,
       "template": {"spec": {"parallelism": 4, "completions": 8,
                             "template": {"spec": {"containers": [{"name": "c"}]}}}}}]},
    "status": {"replicatedJobsStatus": []}})");
  for (const json& j : {jobset, parse_masked(jobset.dump(), jobset_fields())}) {
    const PodGroupInfo g = parse_jobset(j);
    EXPECT_EQ(g.min_member, 1 + 2 * 4);
    EXPECT_EQ(g.key(), "jobset:ml/pretrain");
    EXPECT_EQ(g.gang_key(), "ml/pretrain");
    EXPECT_EQ(g.uid, "s1");
  }

  // RayCluster: the head and each worker group's desired replicas x numOfHosts (KubeRay's own
  // gang size); a suspended group counts none; with autoscaling, minReplicas.
  json ray = json::parse(R"({
    "metadata": {"name": "rc", "namespace": "ml", "uid": "r1"},
    "spec": {"headGroupSpec": {"rayStartParams": {}},
             "workerGroupSpecs": [
               {"groupName": "gpu", "replicas": 3, "minReplicas": 1, "maxReplicas": 4, "numOfHosts": 2},
               {"groupName": "cpu", "replicas": 9, "minReplicas": 0, "maxReplicas": 5},
               {"groupName": "off", "replicas": 2, "suspend": true}]}})");
  for (const json& j : {ray, parse_masked(ray.dump(), ray_cluster_fields())}) {
    EXPECT_EQ(parse_ray_cluster(j).min_member, 1 + 3 * 2 + 5);  // cpu capped at maxReplicas
  }
  ray["spec"]["enableInTreeAutoscaling"] = true;
  EXPECT_EQ(parse_ray_cluster(ray).min_member, 1 + 1 * 2 + 0);
  EXPECT_EQ(parse_ray_cluster(ray).key(), "ray:ml/rc");

  EXPECT_THROW(parse_jobset(json::parse(R"({"metadata": {"namespace": "ml"}})")),
               std::invalid_argument);
}

// A JobSet's pods start as one gang once all of them exist, and only the pods of that JobSet
// (its uid) count.
TEST(WorkloadGroups, AJobSetStartsWholeWithItsOwnPodsOnly) {
  ClusterModel m(ModelOptions{});
  NodeInfo n;
  n.name = "n0";
  n.ready = true;
  n.gpus = 8;
  n.cpu_milli = 64000;
  n.mem_mib = 1 << 20;
  m.upsert_node(n);
  m.upsert_group(parse_jobset(json::parse(R"({
    "metadata": {"name": "pretrain", "namespace": "ml", "uid": "s1"},
    "spec": {"replicatedJobs": [{"name": "w", "replicas": 2,
                                 "template": {"spec": {"parallelism": 2}}}]}})")));
  auto add = [&](int i, const char* uid) {
    json p = pod(
        {{"jobset.sigs.k8s.io/jobset-name", "pretrain"}, {"jobset.sigs.k8s.io/jobset-uid", uid}});
    p["metadata"]["name"] = "p" + std::to_string(i);
    p["metadata"]["uid"] = "u" + std::to_string(i);
    m.upsert_pod(parse_pod(p), 0);
  };
  for (int i = 0; i < 3; ++i) add(i, "s1");
  m.refresh();
  m.prepare(1);
  const Gang* g = m.gang("ml/pretrain");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->waiting_code, "GangPods") << g->waiting;
  add(3, "s0");  // a pod of an earlier JobSet of the same name: not a member
  m.refresh();
  m.prepare(2);
  EXPECT_EQ(g->waiting_code, "GangPods") << g->waiting;
  EXPECT_NE(g->waiting.find("3 of minMember 4"), std::string::npos) << g->waiting;
  add(4, "s1");
  m.refresh();
  m.prepare(3);
  EXPECT_EQ(g->waiting, "");
  EXPECT_EQ(g->pending_spec.min_members, 4);
}

}  // namespace
}  // namespace tessera::kube
