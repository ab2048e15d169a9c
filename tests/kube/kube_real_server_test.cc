// tessera kube against what only a real kube-apiserver shows: apiextensions validating the
// PodGroup CRD, RBAC enforcing the shipped ServiceAccount's rights, the server killed and
// restarted on its etcd, and watches resumed from a compacted revision (410 Gone). The real
// server's audit log is the judge.
#include <signal.h>

#include <fstream>
#include <iostream>
#include <set>

#include "kube/real_server_fixture.h"
#include "kube/support/process.h"

namespace tessera::kube {
namespace {

using nlohmann::json;
using testing::Process;
using testing::Target;

TEST_F(KubeRealServer, DeployManifestsAreAcceptedAndTheCrdRefusesAnInvalidPodGroup) {
  start_cluster(9);  // the examples' two 4 x 8-GPU gangs and three half-GPU replicas
  const std::string dir = std::string(TESSERA_SOURCE_DIR) + "/deploy/kubernetes";
  // Server-side validation of every object, once their namespace exists, then the objects
  // themselves.
  kubectl_ok("apply -f " + dir + "/00-namespace.yaml");
  kubectl_ok("apply --dry-run=server -f " + dir);
  const std::string applied = kubectl_ok("apply -f " + dir);
  for (const char* what :
       {"namespace/tessera-system", "customresourcedefinition",
        "clusterrole.rbac.authorization.k8s.io/tessera-scheduler",
        "clusterrole.rbac.authorization.k8s.io/tessera-viewer", "configmap/tessera-queues",
        "deployment.apps/tessera-scheduler", "networkpolicy.networking.k8s.io/tessera-scheduler"}) {
    EXPECT_NE(applied.find(what), std::string::npos) << what << "\n" << applied;
  }
  // The examples, each with its namespace.
  const std::string examples = kubectl_ok("apply -f " + dir + "/examples");
  for (const char* what :
       {"podgroup.scheduling.x-k8s.io/llm-pretrain", "job.batch/llm-pretrain",
        "podgroup.scheduling.x-k8s.io/bare-gang", "deployment.apps/llm-serving"}) {
    EXPECT_NE(examples.find(what), std::string::npos) << what << "\n" << examples;
  }
  // Scheduled, each example's pods are placed: the Job's (made by its controller) and the bare
  // pods as two whole gangs, the Deployment's replicas on half GPUs. Their queues grant the
  // classes the examples name (as the deployed tree does), with no quota: both of team-a's
  // gangs fit at once.
  start_scheduler(R"(queues:
  - name: team-a
    priority_classes: [production, research, best-effort]
  - name: team-inference
    priority_classes: [inference-critical, production, best-effort]
)");
  const auto bound_in = [&](const std::string& ns) {
    size_t n = 0;
    const json listed = api("GET", "/api/v1/namespaces/" + ns + "/pods").json_body();
    for (const json& p : listed["items"]) n += p["spec"].value("nodeName", "").empty() ? 0 : 1;
    return n;
  };
  EXPECT_TRUE(
      wait_for([&] { return bound_in("team-a") == 8 && bound_in("team-inference") == 3; }, 60))
      << bound_in("team-a") << " of 8 in team-a, " << bound_in("team-inference")
      << " of 3 in team-inference; pods:\n"
      << kubectl_ok("get pods -A -o wide");
  EXPECT_EQ(kubectl_ok("get pg -n team-a llm-pretrain -o jsonpath={.spec.minMember}"), "4");
  // apiextensions found the schema structural and serves it.
  const json crd =
      api("GET",
          "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/podgroups.scheduling.x-k8s.io")
          .json_body();
  std::map<std::string, std::string> conditions;
  for (const json& c : crd["status"]["conditions"]) conditions[c["type"]] = c["status"];
  EXPECT_EQ(conditions["Established"], "True") << crd["status"].dump();
  EXPECT_EQ(conditions.count("NonStructuralSchema"), 0u) << crd["status"].dump();
  // And refuses what the schema forbids, naming the field.
  const auto bad = api("POST", "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/default/podgroups",
                       json{{"apiVersion", "scheduling.x-k8s.io/v1alpha1"},
                            {"kind", "PodGroup"},
                            {"metadata", {{"name", "bad"}}},
                            {"spec", {{"minMember", -1}}}}
                           .dump());
  EXPECT_EQ(bad.status, 422) << bad.body;
  EXPECT_NE(bad.body.find("spec.minMember"), std::string::npos) << bad.body;
}

TEST_F(KubeRealServer, TheSchedulerRunsWithItsServiceAccountAndTheShippedRbacAlone) {
  start_cluster(8);  // 64 GPUs
  const std::string kubeconfig = service_account_kubeconfig();
  // The Deployment's queue tree and flags (its ConfigMap, leader election in tessera-system).
  const std::string queues = (dir_ / "queues.yaml").string();
  std::ofstream(queues) << kubectl_ok(
      "get configmap tessera-queues -n tessera-system -o 'jsonpath={.data.queues\\.yaml}'");
  const std::string log = (dir_ / "kube.log").string();
  Process sched({"kube", "--kubeconfig", kubeconfig, "--queues", queues, "--leader-elect",
                 "--lease-namespace", "tessera-system", "--lease-name", "tessera-scheduler",
                 "--identity", "replica-0", "--listen", "127.0.0.1:0", "--checkpoint-grace", "1"},
                log);
  // Work that makes the calls the scheduler makes: gangs (PodGroup status), waiting pods
  // (conditions, events), and a tenant reclaiming its guarantee (DisruptionTarget condition,
  // Eviction API).
  // The shipped queue tree: team-research (guarantee 8 GPUs, may borrow 32 more) and team-a
  // (guarantee 32); each namespace charges its own queue.
  for (const std::string ns : {"team-a", "team-research"}) create_namespace(ns);
  for (int g = 0; g < 5; ++g) {
    const std::string name = "r" + std::to_string(g);
    create_group("team-research", name, 4);
    for (int i = 0; i < 4; ++i)
      create_pod("team-research", name + "-" + std::to_string(i), 2, name);
  }
  ASSERT_TRUE(wait_for([&] { return binds_by_pod().size() == 20; }, 60)) << log;
  // team-a's gang of 32 GPUs finds 24 free: research gives back a gang it borrowed.
  create_group("team-a", "a", 4);
  for (int i = 0; i < 4; ++i) create_pod("team-a", "a-" + std::to_string(i), 8, "a");
  ASSERT_TRUE(wait_for(
      [&] {
        return pods("?fieldSelector=metadata.namespace%3Dteam-a,status.phase%3DRunning").size() ==
               4;
      },
      60))
      << log;
  // Not one request of the ServiceAccount was refused (reads are audited for it too).
  const std::string sa = "system:serviceaccount:tessera-system:tessera-scheduler";
  int requests = 0;
  std::set<std::string> verbs;
  for (const json& e : real_->audit()) {
    if (e["user"].value("username", "") != sa) continue;
    ++requests;
    const json ref = e.value("objectRef", json::object());
    verbs.insert(e.value("verb", "") + " " + ref.value("resource", "") +
                 (ref.contains("subresource") ? "/" + ref.value("subresource", "") : ""));
    EXPECT_NE(e["responseStatus"].value("code", 0), 403)
        << e.value("verb", "") << " " << e.value("requestURI", "") << ": "
        << e["responseStatus"].value("message", "");
  }
  // The audit saw the calls that matter (so the check above had something to check).
  for (const char* v : {"create pods/binding", "create pods/eviction", "patch pods/status",
                        "watch pods", "list nodes", "create leases"}) {
    EXPECT_EQ(verbs.count(v), 1u) << v << " not seen among " << requests << " requests";
  }
  std::ifstream in(log);
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  // As the client words a refusal ("HTTP 403"): a bare "403" also matches a port number.
  EXPECT_EQ(text.find("HTTP 403"), std::string::npos) << text;
  EXPECT_EQ(text.find("forbidden"), std::string::npos) << text;
}

TEST_F(KubeRealServer, AnApiServerKilledMidRunComesBackOnItsEtcdAndNothingIsBoundTwice) {
  start_cluster(8);  // 64 GPUs
  create_namespace("team-a");
  start_scheduler();
  for (int i = 0; i < 32; ++i) create_pod("team-a", "a" + std::to_string(i), 1);
  ASSERT_TRUE(wait_for([&] { return binds_by_pod().size() == 32; }, 30));
  const pid_t victim = real_->apiserver_pid();
  ASSERT_GT(victim, 0);
  ::kill(victim, SIGKILL);  // testcluster starts it again on the same port and etcd
  ASSERT_TRUE(
      wait_for([&] { return real_->apiserver_pid() > 0 && real_->apiserver_pid() != victim; }, 30));
  ASSERT_TRUE(real_->wait_ready(60));
  for (int i = 0; i < 24; ++i) create_pod("team-a", "b" + std::to_string(i), 1);
  ASSERT_TRUE(wait_for([&] { return binds_by_pod().size() == 56; }, 60))
      << binds_by_pod().size() << " bound";
  for (const auto& [uid, n] : binds_by_pod()) EXPECT_EQ(n, 1) << uid;
  EXPECT_TRUE(wait_for([&] { return all_in(pods(), {"Running"}); }, 20));
  EXPECT_GT(sched_->kube_metrics().reconnects, 0u);
}

TEST_F(KubeRealServer, WatchesResumedFromACompactedRevisionGet410RelistAndLoseNothing) {
  real_options_.watch_cache = false;  // watches go to etcd, which has compacted their start
  start_cluster(16);                  // 128 GPUs
  create_namespace("team-a");
  start_scheduler();
  for (int i = 0; i < 128; ++i) create_pod("team-a", "a" + std::to_string(i), 1);
  ASSERT_TRUE(wait_for([&] { return binds_by_pod().size() == 128; }, 60));
  // etcd moves on past the revisions the scheduler's watches have reached; the server goes,
  // and etcd is compacted before it is back, so every resume answers 410 Gone and the
  // scheduler must list again.
  ASSERT_EQ(api("POST", "/api/v1/namespaces/team-a/configmaps",
                json{{"metadata", {{"name", "bump"}}}, {"data", {{"k", "v"}}}}.dump())
                .status,
            201);
  const uint64_t relists_before = sched_->kube_metrics().relists;
  ::kill(real_->apiserver_pid(), SIGKILL);
  real_->compact_etcd();  // testcluster waits 0.5 s before starting the server again
  ASSERT_TRUE(real_->wait_ready(60));
  // Half the pods go; their GPUs must be learned free from the new list.
  for (int i = 0; i < 64; ++i) {
    delete_pod("team-a", "a" + std::to_string(i));
  }
  for (int i = 0; i < 64; ++i) create_pod("team-a", "b" + std::to_string(i), 1);
  ASSERT_TRUE(wait_for([&] { return binds_by_pod().size() == 192; }, 60))
      << binds_by_pod().size() << " bound";
  for (const auto& [uid, n] : binds_by_pod()) EXPECT_EQ(n, 1) << uid;
  const KubeMetrics k = sched_->kube_metrics();
  EXPECT_GT(k.relists, relists_before);
  EXPECT_GT(k.reconnects, 0u);
}

// The scheduler's writes, from the audit log, by kind ("create pods/binding", ...), leaving
// out its Lease and usage ConfigMap (periodic, not per pod).
std::map<std::string, int> scheduler_writes(testing::RealCluster& real) {
  std::map<std::string, int> n;
  for (const json& e : real.audit()) {
    if (e.value("userAgent", "").rfind("tessera-scheduler", 0) != 0) continue;
    const json ref = e.value("objectRef", json::object());
    const std::string resource = ref.value("resource", "");
    if (resource == "leases" || resource == "configmaps") continue;
    ++n[e.value("verb", "") + " " + resource +
        (ref.contains("subresource") ? "/" + ref.value("subresource", "") : "")];
  }
  return n;
}

std::string describe(const std::map<std::string, int>& n) {
  std::string s;
  for (const auto& [k, v] : n) s += k + "=" + std::to_string(v) + " ";
  return s;
}

TEST_F(KubeRealServer, TwoReplicasOnARealLeaseTheStandbyLeadsWithinTheLeaseAfterASigkill) {
  start_cluster(16);  // 128 GPUs
  create_namespace("team-a");
  const std::string log = (dir_ / "kube.log").string();
  auto replica = [&](const std::string& id) {
    return std::make_unique<Process>(
        std::vector<std::string>{"kube", "--kubeconfig", kubeconfig_, "--leader-elect",
                                 "--identity", id, "--listen", "127.0.0.1:0", "--gang-timeout",
                                 "3"},
        log);
  };
  std::map<std::string, std::unique_ptr<Process>> replicas;
  replicas["replica-0"] = replica("replica-0");
  replicas["replica-1"] = replica("replica-1");
  auto holder = [&] {
    return api("GET",
               "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/tessera-scheduler")
        .json_body()
        .value("spec", json::object())
        .value("holderIdentity", "");
  };
  ASSERT_TRUE(wait_for([&] { return replicas.count(holder()) == 1; }, 30)) << log;
  add_gangs(6);
  ASSERT_TRUE(wait_for([&] { return binds_by_pod().size() >= 8; }, 30)) << log;
  // The leader is killed mid-run (perhaps between a gang's binds); more gangs come.
  const std::string leader = holder();
  const auto killed = std::chrono::steady_clock::now();
  replicas[leader]->signal(SIGKILL);
  add_gangs(6);
  ASSERT_TRUE(wait_for([&] { return !holder().empty() && holder() != leader; }, 40)) << log;
  const double takeover =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  // client-go's defaults, which tessera kube keeps: a 15 s lease, retried every 2 s.
  EXPECT_LE(takeover, 15 + 2 + 1) << "the standby led " << takeover << " s after the kill";
  ASSERT_TRUE(wait_for([&] { return pods_bound() == 96; }, 60)) << pods_bound() << " bound\n"
                                                                << log;
  for (const auto& [uid, n] : binds_by_pod()) EXPECT_EQ(n, 1) << uid;
  // No gang partly bound: every gang's 8 pods run.
  ASSERT_TRUE(wait_for(
      [&] {
        std::map<std::string, int> running;
        for (const json& p : pods("?fieldSelector=status.phase%3DRunning")) {
          const std::string name = p["metadata"]["name"];
          ++running[name.substr(0, name.find('-'))];
        }
        if (static_cast<int>(running.size()) != gangs_made_) return false;
        for (const auto& [g, n] : running) {
          if (n != 8) return false;
        }
        return true;
      },
      30));
  std::cout << "[ lease ] standby led " << takeover << " s after the leader's SIGKILL\n";
}

TEST_F(KubeRealServer, ApiPriorityAndFairnessAnswers429TheSchedulerWaitsAndLosesNothing) {
  // A small server (30 seats), and the scheduler's ServiceAccount in a priority level of one
  // seat that rejects the rest at once: its bursts of binds are answered 429.
  real_options_.apiserver_args = {"--max-requests-inflight=20",
                                  "--max-mutating-requests-inflight=10"};
  start_cluster(16);  // 128 GPUs
  create_namespace("team-a");
  const std::string kubeconfig = service_account_kubeconfig();
  ASSERT_EQ(api("POST", "/apis/flowcontrol.apiserver.k8s.io/v1/prioritylevelconfigurations",
                json{{"apiVersion", "flowcontrol.apiserver.k8s.io/v1"},
                     {"kind", "PriorityLevelConfiguration"},
                     {"metadata", {{"name", "tessera-tight"}}},
                     {"spec",
                      {{"type", "Limited"},
                       {"limited",
                        {{"nominalConcurrencyShares", 1},
                         {"lendablePercent", 0},
                         {"limitResponse", {{"type", "Reject"}}}}}}}}
                    .dump())
                .status,
            201);
  ASSERT_EQ(api("POST", "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas",
                json{{"apiVersion", "flowcontrol.apiserver.k8s.io/v1"},
                     {"kind", "FlowSchema"},
                     {"metadata", {{"name", "tessera-tight"}}},
                     {"spec",
                      {{"priorityLevelConfiguration", {{"name", "tessera-tight"}}},
                       {"matchingPrecedence", 100},
                       {"distinguisherMethod", {{"type", "ByUser"}}},
                       {"rules",
                        {{{"subjects",
                           {{{"kind", "ServiceAccount"},
                             {"serviceAccount",
                              {{"namespace", "tessera-system"}, {"name", "tessera-scheduler"}}}}}},
                          {"resourceRules",
                           {{{"verbs", {"*"}},
                             {"apiGroups", {"*"}},
                             {"resources", {"*"}},
                             {"namespaces", {"*"}},
                             {"clusterScope", true}}}}}}}}}}
                    .dump())
                .status,
            201);
  const std::string log = (dir_ / "kube.log").string();
  const std::string addr = (dir_ / "addr").string();
  Process sched({"kube", "--kubeconfig", kubeconfig, "--leader-elect", "--lease-namespace",
                 "tessera-system", "--listen", "127.0.0.1:0", "--addr-file", addr},
                log);
  for (int i = 0; i < 96; ++i) create_pod("team-a", "p" + std::to_string(i), 1);
  ASSERT_TRUE(wait_for([&] { return binds_by_pod().size() == 96; }, 120))
      << binds_by_pod().size() << " bound\n"
      << log;
  for (const auto& [uid, n] : binds_by_pod()) EXPECT_EQ(n, 1) << uid;
  // The server did push back, and each refused bind came again after the wait it asked for
  // (a second at least), not at once.
  const std::string sa = "system:serviceaccount:tessera-system:tessera-scheduler";
  std::map<std::string, std::vector<std::pair<double, int>>> tries;  // pod -> (time, code)
  int refused = 0;
  for (const json& e : real_->audit()) {
    if (e["user"].value("username", "") != sa) continue;
    const int code = e["responseStatus"].value("code", 0);
    refused += code == 429;
    const json ref = e.value("objectRef", json::object());
    if (ref.value("subresource", "") == "binding") {
      tries[ref.value("name", "")].emplace_back(parse_time(e.value("requestReceivedTimestamp", "")),
                                                code);
    }
  }
  EXPECT_GT(refused, 0) << "API Priority and Fairness never answered 429";
  int waited = 0;
  for (const auto& [pod, t] : tries) {
    for (size_t i = 1; i < t.size(); ++i) {
      if (t[i - 1].second != 429) continue;
      EXPECT_GE(t[i].first - t[i - 1].first, 0.9) << pod << " tried again at once after a 429";
      ++waited;
    }
  }
  std::cout << "[ apf ] " << refused << " requests answered 429; " << waited
            << " binds sent again after waiting\n";
}

TEST_F(KubeRealServer, AtMostTwoWritesPerBoundPodAndAWaitingPodIsToldOnce) {
  start_cluster(32);  // 256 GPUs
  create_namespace("team-a");
  SchedulerOptions opt = scheduler_options();
  opt.event_interval = 300;  // the default: words with new numbers but the same reason wait
  start_scheduler(opt);
  // Everything fits: 200 lone pods and 6 gangs of 8, 248 GPUs, arriving as a burst.
  for (int i = 0; i < 200; ++i) create_pod("team-a", "p" + std::to_string(i), 1);
  for (int g = 0; g < 6; ++g) {
    const std::string name = "g" + std::to_string(g);
    create_group("team-a", name, 8);
    for (int i = 0; i < 8; ++i) create_pod("team-a", name + "-" + std::to_string(i), 1, name);
  }
  ASSERT_TRUE(wait_for([&] { return binds_by_pod().size() == 248; }, 60));
  std::this_thread::sleep_for(std::chrono::seconds(4));  // events and group status land
  const std::map<std::string, int> fit = scheduler_writes(*real_);
  // Per pod, its Binding and its Scheduled event, nothing more; each group's status once
  // (Running), or twice where its binds spread over more than a second.
  EXPECT_EQ(fit.at("create pods/binding"), 248) << describe(fit);
  EXPECT_EQ(fit.at("create events"), 248) << describe(fit);
  EXPECT_EQ(fit.count("patch pods/status"), 0u) << describe(fit);
  EXPECT_LE(fit.at("patch podgroups/status"), 2 * 6) << describe(fit);
  std::cout << "[ writes ] all fit, 248 pods: " << describe(fit) << "\n";

  // 100 more: 8 fit, 92 wait and are told why once (a condition and an event each), however
  // often the numbers in the words change as pods come and go.
  for (int i = 0; i < 100; ++i) create_pod("team-a", "w" + std::to_string(i), 1);
  ASSERT_TRUE(wait_for([&] { return binds_by_pod().size() == 256; }, 60));
  auto told = [&] {
    const std::map<std::string, int> n = scheduler_writes(*real_);
    return n.count("patch pods/status") ? n.at("patch pods/status") : 0;
  };
  ASSERT_TRUE(wait_for([&] { return told() == 92; }, 30)) << told();
  for (int i = 0; i < 40; ++i) {  // 40 lone pods end: 40 of the waiting ones start
    delete_pod("team-a", "p" + std::to_string(i));
  }
  ASSERT_TRUE(wait_for([&] { return binds_by_pod().size() == 296; }, 60));
  std::this_thread::sleep_for(std::chrono::seconds(4));
  const std::map<std::string, int> after = scheduler_writes(*real_);
  std::cout << "[ writes ] then 100 more, 92 waiting, 40 started: " << describe(after) << "\n";
  EXPECT_EQ(after.at("patch pods/status"), 92) << describe(after);
  // 296 Scheduled events and 92 FailedScheduling ones.
  EXPECT_EQ(after.at("create events"), 296 + 92) << describe(after);
}

}  // namespace
}  // namespace tessera::kube
