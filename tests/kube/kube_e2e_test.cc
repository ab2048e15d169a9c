// tessera kube end to end against the API-server emulator (HTTPS, client certificates): the
// emulator's own binding log and fake kubelet judge the scheduler, not the scheduler's view.
#include <map>
#include <set>

#include "api/kube_api.h"
#include "kube/kube_env.h"

namespace tessera::kube {
namespace {

using nlohmann::json;
using KubeE2E = testing::KubeEnvOnBoth;
using KubeE2EEmulator = testing::KubeEnv;  // tests that need the emulator's bind faults

TEST_P(KubeE2E, ThreeTenantsGangsOfOneToThirtyTwoNoPartialGangNoOvercommit) {
  start_cluster(64);
  const std::vector<std::string> teams = {"team-a", "team-b", "team-c"};
  for (const auto& ns : teams) create_namespace(ns);
  start_scheduler();
  // Each team: gangs of 32, 16, 8, 4, 2 and 1 pods of 2 GPUs, twice: 126 pods, 252 GPUs a
  // team, 1.5 times the cluster's 512 GPUs in all; each runs 2 s.
  std::map<std::string, int> group_size;
  int total = 0;
  for (const auto& ns : teams) {
    for (int round = 0; round < 2; ++round) {
      for (int size : {32, 16, 8, 4, 2, 1}) {
        const std::string g = "g" + std::to_string(size) + "-" + std::to_string(round);
        create_group(ns, g, size);
        group_size[ns + "/" + g] = size;
        for (int i = 0; i < size; ++i) {
          create_pod(ns, g + "-" + std::to_string(i), 2, g, 2.0);
          ++total;
        }
      }
    }
  }
  // Every pod is bound once and then succeeds, or is preempted (evicted: bare pods do not come
  // back) to give another team its fair share. The kubelet would fail a pod its node cannot
  // hold (OutOf...).
  ASSERT_TRUE(wait_for(
      [&] {
        int bound = 0;
        for (const auto& b : cluster_->bindings()) bound += b.code == 201;
        for (const json& p : pods()) {
          if (p["status"].value("phase", "") != "Succeeded") return false;
        }
        return bound == total;
      },
      40))
      << sched_->kube_metrics().binds_ok << " binds; " << [&] {
           std::string why;
           for (const JobView& v : sched_->jobs(JobFilter{})) {
             why += v.row.spec.name + " " + std::string(to_string(v.row.state)) + ": " +
                    v.pending_reason + "\n";
           }
           std::map<std::string, int> phases;
           for (const json& p : pods()) ++phases[p["status"].value("phase", "")];
           for (const auto& [ph, n] : phases) why += ph + "=" + std::to_string(n) + " ";
           const KubeMetrics k = sched_->kube_metrics();
           const ServiceMetrics m = sched_->metrics();
           why += " evictions=" + std::to_string(k.evictions) +
                  " rollbacks=" + std::to_string(k.gang_rollbacks) +
                  " preemptions=" + std::to_string(m.preemptions) +
                  " failed=" + std::to_string(k.binds_failed);
           for (const auto& b : cluster_->bindings()) {
             if (b.code != 201) why += "\n" + b.name + " -> " + b.node + ": " + b.message;
           }
           return why;
         }();
  // No GPU over-committed: the emulator's kubelet admits a bound pod only if its node's
  // unfinished pods (terminating victims included) leave room for it, and fails it
  // (OutOfnvidia.com/gpu) otherwise; every pod that is left succeeded.
  const json final_pods = pods();
  for (const json& p : final_pods) {
    EXPECT_EQ(p["status"].value("phase", ""), "Succeeded")
        << p["metadata"]["name"] << " " << p["status"].value("reason", "");
  }
  const auto binds = cluster_->bindings();
  // Each pod bound exactly once, and the scheduler never tried a second time.
  std::map<std::string, int> attempts, ok;
  std::map<std::string, std::vector<double>> gang_bind_times;
  for (const auto& b : binds) {
    ++attempts[b.uid];
    if (b.code == 201) {
      ++ok[b.uid];
      const std::string gang = b.ns + "/" + b.name.substr(0, b.name.rfind('-'));
      gang_bind_times[gang].push_back(parse_time(b.time));
    }
  }
  EXPECT_EQ(static_cast<int>(ok.size()), total);
  for (const auto& [uid, n] : attempts) EXPECT_EQ(n, 1) << uid;
  // Preemption takes whole gangs: a gang's pods all succeeded, or all were evicted.
  std::map<std::string, int> left;
  for (const json& p : final_pods) {
    const std::string name = p["metadata"]["name"];
    ++left[p["metadata"].value("namespace", "") + "/" + name.substr(0, name.rfind('-'))];
  }
  // A gang can also be preempted while it winds down: members that already succeeded stay,
  // and the ones still running are taken together. So every member left of a preempted gang
  // must have finished before the gang's first Preempted event.
  std::map<std::string, double> preempted_at;  // gang -> earliest Preempted event
  auto read_preempted = [&] {
    preempted_at.clear();
    for (const std::string& ns : teams) {
      const json events =
          api("GET", "/apis/events.k8s.io/v1/namespaces/" + ns + "/events").json_body();
      for (const json& e : events.value("items", json::array())) {
        if (e.value("reason", "") != "Preempted") continue;
        const std::string pod = e["regarding"].value("name", "");
        const std::string gang = ns + "/" + pod.substr(0, pod.rfind('-'));
        const double at = parse_time(e.value("eventTime", ""));
        auto [it, fresh] = preempted_at.emplace(gang, at);
        if (!fresh) it->second = std::min(it->second, at);
      }
    }
  };
  // Events are written behind the binds (rate-limited): wait for those of partial gangs.
  wait_for(
      [&] {
        read_preempted();
        for (const auto& [gang, size] : group_size) {
          if (left[gang] != 0 && left[gang] != size && preempted_at.count(gang) == 0) return false;
        }
        return true;
      },
      15);
  for (const auto& [gang, size] : group_size) {
    if (left[gang] == 0 || left[gang] == size) continue;
    ASSERT_TRUE(preempted_at.count(gang))
        << gang << ": " << left[gang] << " of " << size << " left, and none preempted";
    for (const json& p : final_pods) {
      const std::string name = p["metadata"]["name"];
      if (p["metadata"].value("namespace", "") + "/" + name.substr(0, name.rfind('-')) != gang) {
        continue;
      }
      const double finished = parse_time(
          p["status"]["containerStatuses"][0]["state"]["terminated"].value("finishedAt", ""));
      EXPECT_LE(finished, preempted_at[gang] + 1.0)  // finishedAt has whole seconds
          << gang << ": " << name << " still ran when its gang was preempted (" << left[gang]
          << " of " << size << " left)";
    }
  }
  // A gang's members are bound together, in one cycle's burst, never a part first.
  for (const auto& [gang, times] : gang_bind_times) {
    ASSERT_EQ(static_cast<int>(times.size()), group_size[gang]) << gang;
    const auto [lo, hi] = std::minmax_element(times.begin(), times.end());
    EXPECT_LT(*hi - *lo, 1.0) << gang << " bound over " << *hi - *lo << " s";
  }
  EXPECT_EQ(sched_->kube_metrics().gang_rollbacks, 0u);
}

// Three tenants weighted 2 : 1 : 1.
const char* const kWeights211 = R"(queues:
  - name: team-a
    weight: 2
  - name: team-b
    weight: 1
  - name: team-c
    weight: 1
)";

TEST_P(KubeE2E, SharesFollowTheQueueTreesWeights) {
  start_cluster(16);  // 128 GPUs
  for (const std::string ns : {"team-a", "team-b", "team-c"}) create_namespace(ns);
  // Each team asks for the whole cluster in 1-GPU pods that run until deleted.
  for (const std::string ns : {"team-a", "team-b", "team-c"}) {
    for (int i = 0; i < 128; ++i) create_pod(ns, "w" + std::to_string(i), 1);
  }
  // The scheduler finds every team's demand at once (a returning tenant's reclaim is another
  // test): its first cycles share the cluster by the weights.
  start_scheduler(kWeights211);
  std::map<std::string, int> held;
  ASSERT_TRUE(wait_for(
      [&] {
        held.clear();
        int bound = 0;
        for (const json& p : pods("?fieldSelector=status.phase%3DRunning")) {
          ++held[p["metadata"]["namespace"]];
          ++bound;
        }
        return bound == 128;
      },
      60));
  // 2 : 1 : 1 of 128 GPUs.
  EXPECT_EQ(held["team-a"], 64);
  EXPECT_EQ(held["team-b"], 32);
  EXPECT_EQ(held["team-c"], 32);
  // The read API agrees with the cluster.
  std::map<std::string, double> holds;
  for (const QueueView& q : sched_->queues()) holds[q.path] = q.holds_gpus;
  EXPECT_EQ(holds["team-a"], 64);
  EXPECT_EQ(holds["team-b"], 32);
  // A job is found by its id before any listing handed ids out (a dashboard link), and every
  // held GPU names its job in the nodes view (the dashboard's grid).
  EXPECT_TRUE(sched_->job(1).has_value());
  int marked = 0;
  for (const NodeView& n : sched_->nodes()) {
    for (const GpuView& g : n.gpus) marked += g.jobs.empty() ? 0 : 1;
  }
  EXPECT_EQ(marked, 128);
}

TEST_P(KubeE2E, SharesConvergeToTheQueueTreesAsTheFirstTenantsPodsFinish) {
  start_cluster(16);  // 128 GPUs
  for (const std::string ns : {"team-a", "team-b", "team-c"}) create_namespace(ns);
  // Weighted DRF order without reclaim: no one is evicted, shares move as pods end.
  SchedulerOptions opt = scheduler_options(kWeights211);
  opt.policy = "drf";
  start_scheduler(opt);
  // team-a alone fills the cluster with pods that end 15-17 s after they start, and has more
  // waiting. They must outlast the 384 creates below: a GPU freed before team-a's next pods
  // exist goes to team-b or team-c past their share, and without reclaim stays theirs.
  for (int i = 0; i < 128; ++i) {
    create_pod("team-a", "short" + std::to_string(i), 1, "", 15 + i % 3);
  }
  ASSERT_TRUE(wait_for([&] { return binds_by_pod().size() == 128; }, 30));
  // team-b and team-c arrive, and team-a asks for more: each GPU team-a frees goes to whoever
  // is furthest below its share, until the cluster is held 2 : 1 : 1. Created in turn, so
  // that a real server's slower creates favour no one.
  for (int i = 0; i < 128; ++i) {
    create_pod("team-a", "long" + std::to_string(i), 1);
    create_pod("team-b", "w" + std::to_string(i), 1);
    create_pod("team-c", "w" + std::to_string(i), 1);
  }
  std::map<std::string, int> held;
  auto running = [&] {
    held.clear();
    for (const json& p : pods("?fieldSelector=status.phase%3DRunning")) {
      ++held[p["metadata"]["namespace"]];
    }
  };
  EXPECT_TRUE(wait_for(
      [&] {
        running();
        return held["team-a"] == 64 && held["team-b"] == 32 && held["team-c"] == 32;
      },
      60))
      << held["team-a"] << " : " << held["team-b"] << " : " << held["team-c"];
  // And it stays there: nobody is preempted or over-served once the shares are met.
  std::this_thread::sleep_for(std::chrono::seconds(2));
  running();
  EXPECT_EQ(held["team-a"], 64);
  EXPECT_EQ(held["team-b"], 32);
  EXPECT_EQ(held["team-c"], 32);
  for (const auto& [uid, n] : binds_by_pod()) EXPECT_EQ(n, 1) << uid;
  // Without reclaim, shares moved only as team-a's pods ended: nothing was evicted.
  EXPECT_EQ(sched_->kube_metrics().evictions, 0u);
}

TEST_P(KubeE2E, LongTermUsageOutlivesASchedulerRestart) {
  start_cluster(2);  // 16 GPUs
  create_namespace("team-a");
  const std::string tree = R"(fairness:
  half_life: 1h
queues:
  - name: team-a
  - name: team-b
)";
  SchedulerOptions opt = scheduler_options(tree);
  opt.usage_save_interval = 0.5;
  start_scheduler(opt);
  for (int i = 0; i < 8; ++i) create_pod("team-a", "a" + std::to_string(i), 1);
  ASSERT_TRUE(wait_for([&] { return binds_by_pod().size() == 8; }, 20));
  auto decayed = [&](const std::string& path) {
    for (const QueueView& q : sched_->queues()) {
      if (q.path == path) return q.decayed_gpus;
    }
    return -1.0;
  };
  ASSERT_TRUE(wait_for([&] { return decayed("team-a") > 0; }, 10));
  std::this_thread::sleep_for(std::chrono::seconds(1));
  sched_->stop();
  const double before = decayed("team-a");
  ASSERT_GT(before, 0);
  // Saved where the lease lives (kube-system by default), in serve's JSON.
  const json cm =
      api("GET", "/api/v1/namespaces/kube-system/configmaps/tessera-scheduler-usage").json_body();
  ASSERT_TRUE(cm.contains("data")) << cm.dump();
  EXPECT_NE(cm["data"].value("decayed-usage", "").find("team-a"), std::string::npos);

  // team-a's pods end while no scheduler runs; a new one (a restart, or the next leader)
  // carries the usage on from the ConfigMap (it would be 0 from the cluster alone).
  for (int i = 0; i < 8; ++i) {
    delete_pod("team-a", "a" + std::to_string(i));
  }
  ASSERT_TRUE(wait_for([&] { return pods().empty(); }, 10));
  start_scheduler(opt);
  ASSERT_TRUE(wait_for([&] { return decayed("team-a") > 0; }, 10));
  EXPECT_GE(decayed("team-a"), before * 0.99);  // a 1 h half-life: nearly all of it is left
  EXPECT_LE(decayed("team-a"), before);
  EXPECT_EQ(decayed("team-b"), 0);
}

TEST_P(KubeE2E, CordonedAndTaintedNodesSelectorsAndTolerationsAreHonoured) {
  start_cluster(4);  // gpu-node-0000 .. 0003, 8 GPUs each
  create_namespace("team-a");
  auto patch_node = [&](int n, const json& body) {
    const auto r = api("PATCH", "/api/v1/nodes/gpu-node-000" + std::to_string(n), body.dump(),
                       "application/merge-patch+json");
    ASSERT_EQ(r.status, 200) << r.body;
  };
  patch_node(0, {{"spec", {{"unschedulable", true}}}});  // cordoned
  patch_node(
      1, {{"spec",
           {{"taints", {{{"key", "dedicated"}, {"value", "infer"}, {"effect", "NoSchedule"}}}}}}});
  patch_node(2, {{"metadata", {{"labels", {{"pool", "a"}}}}}});
  patch_node(3, {{"metadata", {{"labels", {{"pool", "b"}}}}}});
  start_scheduler();
  // One pod that selects pool b, one that tolerates the taint and selects the tainted node's
  // hostname, and 15 plain pods: the plain ones fit only on nodes 2 and 3 (16 GPUs less the
  // selective pod's), so exactly one of them waits.
  json sel = pod_json("team-a", "sel", 1);
  sel["spec"]["nodeSelector"] = {{"pool", "b"}};
  post_pod(sel);
  json tol = pod_json("team-a", "tol", 1);
  tol["spec"]["tolerations"] = {
      {{"key", "dedicated"}, {"operator", "Equal"}, {"value", "infer"}, {"effect", "NoSchedule"}}};
  tol["spec"]["nodeSelector"] = {{"kubernetes.io/hostname", "gpu-node-0001"}};
  post_pod(tol);
  // They are placed before the plain pods come: pods created in the same second are taken in
  // the order the scheduler learns of them, and a list gives them by name.
  ASSERT_TRUE(wait_for([&] { return binds_by_pod().size() == 2; }, 20));
  for (int i = 0; i < 16; ++i) create_pod("team-a", "p" + std::to_string(i), 1);
  ASSERT_TRUE(wait_for([&] { return binds_by_pod().size() == 17; }, 20));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(binds_by_pod().size(), 17u);  // the 18th has nowhere to go
  std::map<std::string, std::string> where;
  for (const auto& b : cluster_->bindings()) where[b.name] = b.node;
  EXPECT_EQ(where["sel"], "gpu-node-0003");
  EXPECT_EQ(where["tol"], "gpu-node-0001");
  for (const auto& [name, node] : where) {
    EXPECT_NE(node, "gpu-node-0000") << name << " on the cordoned node";
    if (name != "tol") {
      EXPECT_NE(node, "gpu-node-0001") << name << " on the tainted node";
    }
  }
}

TEST_F(KubeE2EEmulator, AConflictingBindIsDecidedAgainNotRepeatedBlindly) {
  start_cluster(1);
  create_namespace("team-a");
  // The first bind of p answers 409 (as when the pod changed under the scheduler).
  emu_->add_bind_fault({.pod = "team-a/p",
                        .node = "",
                        .count = 1,
                        .code = 409,
                        .message = "Operation cannot be fulfilled on pods \"p\": the object has "
                                   "been modified; please apply your changes to the latest "
                                   "version and try again"});
  start_scheduler();
  create_pod("team-a", "p", 1);
  ASSERT_TRUE(wait_for(
      [&] { return binds_by_pod().size() == 1 && binds_by_pod().begin()->second == 1; }, 20));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto log = cluster_->bindings();
  ASSERT_EQ(log.size(), 2u);  // the refused attempt, then one that landed: nothing more
  EXPECT_EQ(log[0].code, 409);
  EXPECT_EQ(log[1].code, 201);
  EXPECT_EQ(sched_->kube_metrics().binds_conflict, 1u);
}

TEST_P(KubeE2E, AWaitingPodSaysWhyInItsConditionEventsAndKubectlDescribe) {
  start_cluster(4);
  create_namespace("team-a");
  start_scheduler();
  // Another scheduler's pod holds 6 GPUs of the first node: Tessera counts it.
  create_pod("team-a", "theirs", 6, "", 0, "default-scheduler");
  ASSERT_EQ(api("POST", "/api/v1/namespaces/team-a/pods/theirs/binding",
                json{{"apiVersion", "v1"},
                     {"kind", "Binding"},
                     {"metadata", {{"name", "theirs"}}},
                     {"target", {{"kind", "Node"}, {"name", "gpu-node-0000"}}}}
                    .dump())
                .status,
            201);
  // A gang of 4 x 8 GPUs cannot fit on 3 free nodes and 2 GPUs.
  create_group("team-a", "big", 4);
  for (int i = 0; i < 4; ++i) create_pod("team-a", "big-" + std::to_string(i), 8, "big");
  std::string message;
  ASSERT_TRUE(wait_for(
      [&] {
        json p = api("GET", "/api/v1/namespaces/team-a/pods/big-0").json_body();
        for (const json& c : p["status"].value("conditions", json::array())) {
          // The first words may be written while the gang's pods are still being created.
          if (c.value("type", "") == "PodScheduled" && c.value("status", "") == "False" &&
              c.value("message", "").find("of minMember") == std::string::npos) {
            message = c.value("message", "");
            EXPECT_EQ(c.value("reason", ""), "Unschedulable");
            return true;
          }
        }
        return false;
      },
      30));
  EXPECT_NE(message.find("gang team-a/big"), std::string::npos) << message;
  EXPECT_NE(message.find("26"), std::string::npos) << message;  // 32 GPUs less their 6
  // kubectl shows it (the machine's against the emulator, one of the server's version against
  // the real server).
  std::string text;
  const bool shown = wait_for(
      [&] {
        cluster_->kubectl("describe pod big-0 -n team-a", &text);
        return text.find("FailedScheduling") != std::string::npos &&
               text.find("gang team-a/big") != std::string::npos;
      },
      20);
  EXPECT_TRUE(shown) << text;
  EXPECT_NE(text.find("tessera"), std::string::npos) << text;
  // Nothing of the gang was bound.
  for (const auto& b : cluster_->bindings()) EXPECT_EQ(b.name.rfind("big", 0), std::string::npos);
}

TEST_P(KubeE2E, PodGroupStatusScheduledEventsAndTheReadApiThroughTheCli) {
  start_cluster(4);
  create_namespace("team-a");
  start_scheduler();
  create_group("team-a", "train", 4);
  for (int i = 0; i < 4; ++i) create_pod("team-a", "train-" + std::to_string(i), 8, "train");
  // The PodGroup's status follows its pods: Running with 4 running.
  json status;
  ASSERT_TRUE(wait_for(
      [&] {
        status = api("GET", "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/team-a/podgroups/train")
                     .json_body()
                     .value("status", json::object());
        return status.value("phase", "") == "Running" && status.value("running", 0) == 4;
      },
      20))
      << status.dump();
  EXPECT_EQ(status.value("scheduled", 0), 4);
  // Each bound pod has a Scheduled event naming its node.
  ASSERT_TRUE(wait_for(
      [&] {
        int scheduled = 0;
        const json events = api("GET", "/api/v1/namespaces/team-a/events").json_body();
        for (const json& e : events["items"]) {
          if (e.value("reason", "") == "Scheduled" &&
              e.value("message", "").find("Successfully assigned team-a/train-") == 0) {
            ++scheduled;
          }
        }
        return scheduled == 4;
      },
      20));
  // `tessera jobs` and `tessera queues` read the same API as against serve.
  KubeApiServer read_api(*sched_, KubeReadAccess::open());
  const int port = read_api.bind("127.0.0.1", 0);
  std::thread serving([&] { read_api.run(); });
  const std::string out = (dir_ / "jobs.json").string();
  const std::string cli = std::string(TESSERA_BINARY) +
                          " jobs --json --addr 127.0.0.1:" + std::to_string(port) + " > " + out +
                          " 2>&1";
  const int rc = std::system(cli.c_str());
  read_api.stop();
  serving.join();
  std::ifstream in(out);
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  ASSERT_EQ(rc, 0) << text;
  const json jobs = json::parse(text, nullptr, false);
  ASSERT_TRUE(jobs.is_array()) << text;
  ASSERT_EQ(jobs.size(), 1u) << text;
  EXPECT_EQ(jobs[0]["name"], "team-a/train");
  EXPECT_EQ(jobs[0]["state"], "running");
  EXPECT_EQ(jobs[0]["allocation"].size(), 4u);
}

KUBE_ON_BOTH_TARGETS(KubeE2E);

}  // namespace
}  // namespace tessera::kube
