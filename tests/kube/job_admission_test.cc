// Suspended Jobs admitted whole: a suspended Job of ours is a gang before its pods exist, the
// room it is given is held until they do (or its Job goes, or the hold passes), and a Job
// labelled for Kueue is left to Kueue.
#include <gtest/gtest.h>

#include "control/kube/cluster_model.h"
#include "control/kube/workload_groups.h"

namespace tessera::kube {
namespace {

using nlohmann::json;

json suspended_job(const std::string& name, int parallelism, int gpus, bool kueue = false,
                   const std::string& cls = "production") {
  json job = json::parse(R"({
    "metadata": {"namespace": "ml", "labels": {}, "creationTimestamp": "2026-11-29T00:00:00Z"},
    "spec": {"completionMode": "Indexed", "suspend": true,
             "template": {"metadata": {"labels": {"tessera.io/class": "production"}},
                          "spec": {"schedulerName": "tessera",
                                   "containers": [{"name": "c", "resources": {"limits": {}}}]}}},
    "status": {}})");
  job["metadata"]["name"] = name;
  job["metadata"]["uid"] = "uid-" + name;
  if (kueue) job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "user-queue";
  job["spec"]["template"]["metadata"]["labels"]["tessera.io/class"] = cls;
  job["spec"]["parallelism"] = parallelism;
  job["spec"]["completions"] = parallelism;
  job["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = gpus;
  return job;
}

class JobAdmission : public ::testing::Test {
 protected:
  void SetUp() override {
    NodeInfo n;
    n.name = "n0";
    n.ready = true;
    n.gpus = 8;
    n.cpu_milli = 64000;
    n.mem_mib = 1 << 20;
    m_.upsert_node(n);
    m_.refresh();
  }
  int free_gpus() const { return m_.ledger().node_free_whole(0); }
  ClusterModel m_{ModelOptions{}};
};

TEST_F(JobAdmission, ASuspendedJobIsOfferedWholeFromItsTemplateAndKueuesIsLeftAlone) {
  m_.set_queue_tree(parse_queue_tree_yaml("queues:\n  - name: ml\n    priority_classes: "
                                          "[production, research]\n",
                                          "queues.yaml"),
                    "queues.yaml");
  const PodGroupInfo job = parse_job(suspended_job("train", 3, 2));
  ASSERT_NE(job.pod_template, nullptr);
  m_.upsert_group(job);
  m_.upsert_group(parse_job(suspended_job("kq", 2, 1, /*kueue=*/true)));
  CycleInput in = m_.prepare(1);
  ASSERT_EQ(in.pending.size(), 1u);  // Kueue's Job is Kueue's to admit
  const Gang* g = m_.gang("ml/train");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->waiting, "");
  EXPECT_EQ(g->queue, "ml");
  EXPECT_EQ(g->pending_spec.priority, PriorityClass::kProduction);
  EXPECT_EQ(g->pending_spec.min_members, 3);
  EXPECT_EQ(g->pending_spec.max_members, 3);
  EXPECT_EQ(g->pending_spec.demand.gpus, 2);
  EXPECT_EQ(g->pending_spec.submit_time, parse_time("2026-11-29T00:00:00Z"));
  EXPECT_EQ(m_.gang("ml/kq"), nullptr);

  // Unsuspended by someone else before Tessera admits it: no longer ours to admit.
  json resumed = suspended_job("train", 3, 2);
  resumed["spec"]["suspend"] = false;
  m_.upsert_group(parse_job(resumed));
  in = m_.prepare(2);
  EXPECT_TRUE(in.pending.empty());
  EXPECT_EQ(m_.gang("ml/train"), nullptr);
}

// A class its queue does not grant is refused, naming the class and what the queue allows:
// else any namespace could label its pods to preempt everyone else's.
TEST_F(JobAdmission, AClassItsQueueDoesNotGrantIsRefused) {
  m_.upsert_group(parse_job(suspended_job("train", 3, 2)));  // production, in a flat tree
  CycleInput in = m_.prepare(1);
  EXPECT_TRUE(in.pending.empty());
  const Gang* g = m_.gang("ml/train");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->waiting_code, "Invalid");
  EXPECT_NE(g->waiting.find("queue ml does not allow priority class production (it allows "
                            "best-effort, research"),
            std::string::npos)
      << g->waiting;
  // Never used either: a spec built for it (as for a gang already bound, or a goodput round's
  // plan) holds the highest class granted below it.
  EXPECT_EQ(g->pending_spec.priority, PriorityClass::kResearch);

  // A queue whose default is production allows it (and lower classes), but not more.
  m_.set_queue_tree(
      parse_queue_tree_yaml("queues:\n  - name: ml\n    default_priority_class: production\n",
                            "queues.yaml"),
      "queues.yaml");
  in = m_.prepare(2);
  ASSERT_EQ(in.pending.size(), 1u);
  EXPECT_EQ(m_.gang("ml/train")->waiting, "");
  m_.upsert_group(parse_job(suspended_job("serve", 1, 1, false, "inference-critical")));
  in = m_.prepare(3);
  EXPECT_EQ(in.pending.size(), 1u);
  EXPECT_EQ(m_.gang("ml/serve")->waiting_code, "Invalid");
}

TEST_F(JobAdmission, TheRoomGivenIsHeldUntilItsPodsExistOrTheHoldPasses) {
  m_.upsert_group(parse_job(suspended_job("train", 3, 2, false, "research")));
  m_.prepare(1);
  Gang* g = m_.gang("ml/train");
  ASSERT_NE(g, nullptr);
  Allocation a;
  a.gpus_per_member = 2;
  std::vector<GpuShare> shares;
  for (int i = 0; i < 3; ++i) {
    a.member_node.push_back(0);
    for (int k = 0; k < 2; ++k) a.shares.push_back({static_cast<GpuId>(2 * i + k), kMilliPerGpu});
  }
  m_.reserve(*g, a, 1);
  EXPECT_EQ(free_gpus(), 2);

  // Unsuspended, its pods not yet made: still held, and not offered again.
  json resumed = suspended_job("train", 3, 2, false, "research");
  resumed["spec"]["suspend"] = false;
  m_.upsert_group(parse_job(resumed));
  CycleInput in = m_.prepare(2);
  EXPECT_TRUE(in.pending.empty());
  EXPECT_EQ(free_gpus(), 2);
  EXPECT_EQ(m_.gang("ml/train")->waiting_code, "GangPods");

  // Its pods exist (status.active): the room is given back for them to be placed in.
  resumed["status"]["active"] = 3;
  m_.upsert_group(parse_job(resumed));
  m_.prepare(3);
  EXPECT_EQ(free_gpus(), 8);
  EXPECT_EQ(m_.gang("ml/train"), nullptr);  // no pods in the model yet: nothing left of it

  // A Job whose pods never come holds its room only for the hold.
  m_.upsert_group(parse_job(suspended_job("stuck", 2, 4, false, "research")));
  m_.prepare(4);
  Gang* s = m_.gang("ml/stuck");
  ASSERT_NE(s, nullptr);
  Allocation b;
  b.gpus_per_member = 4;
  b.member_node = {0, 0};
  for (int k = 0; k < 8; ++k) b.shares.push_back({static_cast<GpuId>(k), kMilliPerGpu});
  m_.reserve(*s, b, 4);
  EXPECT_EQ(free_gpus(), 0);
  m_.prepare(4 + ModelOptions{}.admission_hold - 1);
  EXPECT_EQ(free_gpus(), 0);
  m_.prepare(4 + ModelOptions{}.admission_hold + 1);
  EXPECT_EQ(free_gpus(), 8);
}

}  // namespace
}  // namespace tessera::kube
