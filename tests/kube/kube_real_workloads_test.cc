// The workloads platform teams submit, made into pods by their real controllers (the
// kube-controller-manager of the test cluster runs the Job controller) and scheduled by
// tessera kube: an Indexed Job's pods start whole, as one gang of its parallelism, with no
// PodGroup written; a non-indexed Job's pods are independent.
#include "kube/real_server_fixture.h"

namespace tessera::kube {
namespace {

using nlohmann::json;

class KubeRealWorkloads : public KubeRealServer {
 protected:
  json job_json(const std::string& ns, const std::string& name, int parallelism, int gpus,
                bool indexed) {
    json limits = {{"nvidia.com/gpu", std::to_string(gpus)}};
    return {{"apiVersion", "batch/v1"},
            {"kind", "Job"},
            {"metadata", {{"name", name}, {"namespace", ns}}},
            {"spec",
             {{"parallelism", parallelism},
              {"completions", parallelism},
              {"completionMode", indexed ? "Indexed" : "NonIndexed"},
              {"template",
               {{"spec",
                 {{"schedulerName", "tessera"},
                  {"restartPolicy", "Never"},
                  {"terminationGracePeriodSeconds", 1},
                  {"containers",
                   {{{"name", "main"},
                     {"image", "trainer"},
                     {"resources", {{"limits", limits}}}}}}}}}}}}};
  }
  // The pods of Job `name` (by the controller's label).
  json job_pod_list(const std::string& ns, const std::string& name) {
    return api("GET", "/api/v1/namespaces/" + ns +
                          "/pods?labelSelector=batch.kubernetes.io%2Fjob-name%3D" + name)
        .json_body()["items"];
  }
  // How many exist, and how many of them are bound.
  std::pair<size_t, size_t> job_pods(const std::string& ns, const std::string& name) {
    const json listed = job_pod_list(ns, name);
    size_t bound = 0;
    for (const json& p : listed) bound += p["spec"].value("nodeName", "").empty() ? 0 : 1;
    return {listed.size(), bound};
  }
  std::vector<std::string> job_pods_names(const std::string& ns, const std::string& name) {
    std::vector<std::string> out;
    const json listed = job_pod_list(ns, name);
    for (const json& p : listed) out.push_back(p["metadata"].value("name", ""));
    if (out.empty()) out.push_back("");
    return out;
  }
};

TEST_F(KubeRealWorkloads, AnIndexedJobStartsWholeAndANonIndexedJobsPodsEachAlone) {
  start_cluster(2);  // 16 GPUs
  create_namespace("team-a");
  start_scheduler();
  // 10 GPUs taken: 6 left.
  create_pod("team-a", "blocker", 8);
  create_pod("team-a", "blocker-2", 2);
  ASSERT_TRUE(wait_for([&] { return pods_bound() == 2; }, 30));

  // A non-indexed Job of 3 x 3 GPUs: its pods are independent; two fit the 6 left and start.
  ASSERT_EQ(api("POST", "/apis/batch/v1/namespaces/team-a/jobs",
                job_json("team-a", "sweep", 3, 3, false).dump())
                .status,
            201);
  ASSERT_TRUE(wait_for([&] { return job_pods("team-a", "sweep").second == 2; }, 30))
      << job_pods("team-a", "sweep").second << " of 3 bound";

  // An Indexed Job of 3 x 4 GPUs: it waits whole, named as its gang, while it cannot fit.
  ASSERT_EQ(api("POST", "/apis/batch/v1/namespaces/team-a/jobs",
                job_json("team-a", "train", 3, 4, true).dump())
                .status,
            201);
  ASSERT_TRUE(wait_for([&] { return job_pods("team-a", "train").first == 3; }, 30));
  ASSERT_TRUE(wait_for(
      [&] {
        return waiting_message("team-a", job_pods_names("team-a", "train").front())
                   .find("gang team-a/train (3 pending pods)") != std::string::npos;
      },
      30))
      << waiting_message("team-a", job_pods_names("team-a", "train").front());

  // Room made for two of its pods (8 GPUs free), none starts: it needs all three. (The sweep
  // Job is deleted with its pods, so that its controller makes no new ones.)
  delete_pod("team-a", "blocker-2");
  ASSERT_EQ(
      api("DELETE", "/apis/batch/v1/namespaces/team-a/jobs/sweep?propagationPolicy=Foreground")
          .status,
      200);
  ASSERT_TRUE(wait_for([&] { return job_pods("team-a", "sweep").first == 0; }, 60));
  std::this_thread::sleep_for(std::chrono::seconds(2));
  EXPECT_EQ(job_pods("team-a", "train").second, 0u);

  // Room for all three: they are bound together, each once.
  delete_pod("team-a", "blocker");
  EXPECT_TRUE(wait_for([&] { return job_pods("team-a", "train").second == 3; }, 60))
      << job_pods("team-a", "train").second << " of 3 bound";
  for (const auto& [uid, n] : binds_by_pod()) EXPECT_EQ(n, 1) << uid;
}

// Suspended Jobs are admitted whole, as Kueue admits them: unsuspended only when all their pods
// fit, one after another as room frees; a Job labelled for Kueue is left to Kueue.
TEST_F(KubeRealWorkloads, SuspendedJobsAreAdmittedWholeInTurnAndKueuesAreLeftAlone) {
  start_cluster(2);  // 16 GPUs
  create_namespace("team-a");
  start_scheduler();
  auto suspended = [&](const std::string& name, int parallelism, int gpus, bool kueue) {
    json job = job_json("team-a", name, parallelism, gpus, true);
    job["spec"]["suspend"] = true;
    if (kueue) job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "user-queue";
    ASSERT_EQ(api("POST", "/apis/batch/v1/namespaces/team-a/jobs", job.dump()).status, 201);
  };
  auto is_suspended = [&](const std::string& name) {
    return api("GET", "/apis/batch/v1/namespaces/team-a/jobs/" + name)
        .json_body()["spec"]
        .value("suspend", false);
  };
  suspended("first", 3, 4, false);   // 12 GPUs
  suspended("second", 2, 4, false);  // 8 GPUs: not beside the first
  suspended("kueues", 1, 1, true);

  ASSERT_TRUE(wait_for([&] { return job_pods("team-a", "first").second == 3; }, 60))
      << job_pods("team-a", "first").second << " of 3 bound";
  EXPECT_TRUE(is_suspended("second"));
  EXPECT_EQ(job_pods("team-a", "second").first, 0u);
  EXPECT_TRUE(is_suspended("kueues"));
  // `kubectl describe job first` says who admitted it.
  EXPECT_TRUE(wait_for(
      [&] {
        const json events =
            api("GET", "/apis/events.k8s.io/v1/namespaces/team-a/events").json_body();
        for (const json& e : events["items"]) {
          const json regarding = e.value("regarding", json::object());
          if (e.value("reason", "") == "Admitted" && regarding.value("kind", "") == "Job" &&
              regarding.value("name", "") == "first") {
            return true;
          }
        }
        return false;
      },
      30));
  // `tessera jobs` shows the suspended Job waiting as the pods its template will make.
  bool shown = false;
  for (const JobView& j : sched_->jobs(JobFilter{})) {
    if (j.row.spec.name != "team-a/second") continue;
    shown = true;
    EXPECT_EQ(j.row.state, JobState::kPending);
    EXPECT_EQ(j.row.spec.gpus, 4);
    EXPECT_EQ(j.row.spec.max_members, 2);
    EXPECT_EQ(j.kube->selector, "batch.kubernetes.io/job-name=second");
  }
  EXPECT_TRUE(shown);

  // The first Job gone: the second is admitted, and its pods start together.
  ASSERT_EQ(
      api("DELETE", "/apis/batch/v1/namespaces/team-a/jobs/first?propagationPolicy=Foreground")
          .status,
      200);
  ASSERT_TRUE(wait_for([&] { return job_pods("team-a", "second").second == 2; }, 60))
      << job_pods("team-a", "second").second << " of 2 bound";
  EXPECT_TRUE(is_suspended("kueues"));
  for (const auto& [uid, n] : binds_by_pod()) EXPECT_EQ(n, 1) << uid;
}

}  // namespace
}  // namespace tessera::kube
