// The workloads platform teams submit through their own controllers, built from the projects'
// Go modules and run beside the real API server (testcluster --workloads): a JobSet, a
// LeaderWorkerSet, a RayCluster and a PyTorchJob from the manifests in
// deploy/kubernetes/examples/workloads,
// each scheduled by tessera kube as one gang derived from its owner, with no PodGroup written;
// and a JobSet preempted whole, recreated by its controller, and started whole again.
#include <optional>
#include <set>

#include "kube/real_server_fixture.h"

namespace tessera::kube {
namespace {

using nlohmann::json;

class KubeRealOwners : public KubeRealServer {
 protected:
  void SetUp() override {
    KubeRealServer::SetUp();
    real_options_.workloads = true;
  }
  std::string example(const std::string& name) {
    return std::string(TESSERA_SOURCE_DIR) + "/deploy/kubernetes/examples/workloads/" + name;
  }
  // The pods of `ns` matching a label selector (URL-encoded by the caller where needed): how
  // many exist (not deleting) and how many of them are bound; and their uids.
  struct Members {
    size_t exist = 0, bound = 0;
    std::set<std::string> uids;
  };
  Members members(const std::string& ns, const std::string& selector) {
    Members m;
    const json listed =
        api("GET", "/api/v1/namespaces/" + ns + "/pods?labelSelector=" + selector).json_body();
    for (const json& p : listed["items"]) {
      if (p["metadata"].contains("deletionTimestamp")) continue;
      ++m.exist;
      m.uids.insert(p["metadata"].value("uid", ""));
      m.bound += p["spec"].value("nodeName", "").empty() ? 0 : 1;
    }
    return m;
  }
  // The read API's job of gang `name` (namespace/group), if any.
  std::optional<JobView> job_named(const std::string& name) {
    for (const JobView& j : sched_->jobs(JobFilter{})) {
      if (j.row.spec.name == name) return j;
    }
    return std::nullopt;
  }
};

constexpr const char* kJobSet = "jobset.sigs.k8s.io%2Fjobset-name%3Dpretrain";
constexpr const char* kLws = "leaderworkerset.sigs.k8s.io%2Fname%3Dvllm";
constexpr const char* kRay = "ray.io%2Fcluster%3Dtune";

TEST_F(KubeRealOwners, AJobSetALeaderWorkerSetAndARayClusterEachStartAsOneGang) {
  start_cluster(4);  // 32 GPUs
  create_namespace("team-a");
  create_namespace("team-b");
  start_scheduler();
  for (int i = 0; i < 3; ++i) create_pod("team-a", "blocker-" + std::to_string(i), 8);
  ASSERT_TRUE(wait_for([&] { return pods_bound() == 3; }, 30));  // 8 GPUs left

  // The JobSet's 4 pods of 4 GPUs: 2 of them would fit; none starts.
  kubectl_ok("apply -f " + example("jobset.yaml"));
  ASSERT_TRUE(wait_for([&] { return members("team-a", kJobSet).exist == 4; }, 60));
  // Waiting for room (the engine's reason), not for its pods.
  ASSERT_TRUE(wait_for(
      [&] {
        const auto j = job_named("team-a/pretrain");
        return j && !j->reason_code.empty() && j->reason_code != "GangPods";
      },
      30));
  EXPECT_EQ(members("team-a", kJobSet).bound, 0u);
  // Two LeaderWorkerSet groups of 2 x 2 GPUs: each starts whole, in the 8 GPUs left.
  kubectl_ok("apply -f " + example("leaderworkerset.yaml"));
  ASSERT_TRUE(wait_for([&] { return members("team-b", kLws).bound == 4; }, 60))
      << members("team-b", kLws).bound << " of 4 bound";
  for (const char* group : {"team-b/vllm-0", "team-b/vllm-1"}) {
    EXPECT_TRUE(wait_for(
        [&] {
          const auto j = job_named(group);
          return j && j->placement.size() == 2;
        },
        30))
        << group;
  }
  // The RayCluster: its head (no GPU) and two GPU workers wait together; nothing is free.
  kubectl_ok("apply -f " + example("raycluster.yaml"));
  ASSERT_TRUE(wait_for([&] { return members("team-a", kRay).exist == 3; }, 60));
  EXPECT_EQ(members("team-a", kJobSet).bound, 0u);
  EXPECT_EQ(members("team-a", kRay).bound, 0u);
  const auto pretrain = job_named("team-a/pretrain");
  ASSERT_TRUE(pretrain.has_value());
  EXPECT_EQ(pretrain->row.state, JobState::kPending);
  EXPECT_EQ(pretrain->row.spec.min_members, 4);
  EXPECT_EQ(pretrain->kube->selector, "jobset.sigs.k8s.io/jobset-name=pretrain");

  // Room for both: each starts whole.
  for (int i = 0; i < 3; ++i) delete_pod("team-a", "blocker-" + std::to_string(i));
  ASSERT_TRUE(wait_for(
      [&] { return members("team-a", kJobSet).bound == 4 && members("team-a", kRay).bound == 3; },
      60))
      << members("team-a", kJobSet).bound << " of 4, " << members("team-a", kRay).bound
      << " of 3 bound";
  // The read API shows it as one job of three members (once the watch has shown the binds).
  EXPECT_TRUE(wait_for([&] { return job_named("team-a/tune")->placement.size() == 3; }, 30));
}

// A PyTorchJob: Kubeflow's training-operator writes a scheduler-plugins PodGroup for it (minMember
// master + workers); its four pods start together once all fit, and the PodGroup's status says
// so.
TEST_F(KubeRealOwners, APyTorchJobStartsWholeThroughThePodGroupItsOperatorWrites) {
  start_cluster(2);  // 16 GPUs
  create_namespace("team-a");
  start_scheduler();
  create_pod("team-a", "blocker", 4);
  ASSERT_TRUE(wait_for([&] { return pods_bound() == 1; }, 30));  // 12 GPUs left
  kubectl_ok("apply -f " + example("pytorchjob.yaml"));
  const char* job = "training.kubeflow.org%2Fjob-name%3Dfinetune";
  ASSERT_TRUE(wait_for([&] { return members("team-a", job).exist == 4; }, 90));
  ASSERT_TRUE(wait_for(
      [&] {
        const auto j = job_named("team-a/finetune");
        return j && !j->reason_code.empty() && j->reason_code != "GangPods";
      },
      30));
  EXPECT_EQ(members("team-a", job).bound, 0u);  // three of four would fit
  delete_pod("team-a", "blocker");
  ASSERT_TRUE(wait_for([&] { return members("team-a", job).bound == 4; }, 60))
      << members("team-a", job).bound << " of 4 bound";
  EXPECT_TRUE(wait_for(
      [&] {
        const json pg =
            api("GET", "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/team-a/podgroups/finetune")
                .json_body();
        return pg.value("status", json::object()).value("phase", "") == "Running";
      },
      30));
}

// A JobSet preempted by a queue taking back its guarantee is evicted whole; the JobSet
// controller recreates its Jobs, and the new pods start whole once there is room again.
TEST_F(KubeRealOwners, APreemptedJobSetIsRecreatedAndStartsWholeAgain) {
  start_cluster(2);  // 16 GPUs
  create_namespace("team-a");
  create_namespace("team-c");
  start_scheduler(R"(queues:
  - name: team-a
    guarantee: {gpus: 0}
    borrow_limit: {gpus: 16}
  - name: team-c
    guarantee: {gpus: 16}
)");
  kubectl_ok("apply -f " + example("jobset.yaml"));
  ASSERT_TRUE(wait_for([&] { return members("team-a", kJobSet).bound == 4; }, 60));
  const std::set<std::string> first = members("team-a", kJobSet).uids;

  // team-c's gang takes its guarantee back: all 16 GPUs.
  create_group("team-c", "eval", 2);
  for (int i = 0; i < 2; ++i) post_pod(pod_json("team-c", "eval-" + std::to_string(i), 8, "eval"));
  ASSERT_TRUE(wait_for([&] { return members("team-c", "").bound == 2; }, 90))
      << members("team-c", "").bound << " of team-c's 2 bound";
  // The JobSet's controller made new pods; none of them runs beside team-c.
  ASSERT_TRUE(wait_for(
      [&] {
        const Members m = members("team-a", kJobSet);
        if (m.exist != 4) return false;
        for (const std::string& uid : m.uids) {
          if (first.count(uid) > 0) return false;
        }
        return true;
      },
      90));
  EXPECT_EQ(members("team-a", kJobSet).bound, 0u);

  // team-c done: the recreated JobSet starts whole, never in part.
  for (int i = 0; i < 2; ++i) delete_pod("team-c", "eval-" + std::to_string(i));
  ASSERT_TRUE(wait_for([&] { return members("team-a", kJobSet).bound == 4; }, 90))
      << members("team-a", kJobSet).bound << " of 4 bound";
  EXPECT_TRUE(wait_for([&] { return job_named("team-a/pretrain")->placement.size() == 4; }, 30));
}

}  // namespace
}  // namespace tessera::kube
