// tessera kube when things go wrong: watches dropped and expired, the API server restarted,
// the scheduler killed, a node NotReady, a bind refused, a tenant reclaiming its share. The
// emulator's binding log and kubelet judge: nothing bound twice, nothing lost, no GPU
// over-committed, no gang left partly running.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>

#include <fstream>
#include <iostream>
#include <set>
#include <vector>

#include "kube/kube_env.h"
#include "kube/support/process.h"

namespace tessera::kube {
namespace {

using nlohmann::json;
using KubeFaults = testing::KubeEnvOnBoth;
using testing::Process;
// Faults only the emulator can make on demand (watches cut, a bind refused once, a node's
// Ready condition flipped); tests/kube/kube_real_server_test.cc makes the real server's own.
using KubeFaultsEmulator = testing::KubeEnv;

TEST_F(KubeFaultsEmulator, DroppedAndExpiredWatchesLoseNothingAndLearnWhatChangedMeanwhile) {
  start_cluster(16);  // 128 GPUs
  create_namespace("team-a");
  start_scheduler();
  for (int i = 0; i < 128; ++i) create_pod("team-a", "a" + std::to_string(i), 1);
  ASSERT_TRUE(wait_for([&] { return binds_by_pod().size() == 128; }, 30));
  // Streams cut, then history expired: the next resumes get 410 and re-list.
  emu_->drop_watches();
  emu_->compact();
  // Half the pods go away while the scheduler re-lists; their GPUs must be learned free.
  for (int i = 0; i < 64; ++i) {
    delete_pod("team-a", "a" + std::to_string(i));
  }
  emu_->compact();
  for (int i = 0; i < 64; ++i) create_pod("team-a", "b" + std::to_string(i), 1);
  ASSERT_TRUE(wait_for([&] { return binds_by_pod().size() == 192; }, 30))
      << binds_by_pod().size() << " bound";
  for (const auto& [uid, n] : binds_by_pod()) EXPECT_EQ(n, 1) << uid;
  EXPECT_TRUE(wait_for([&] { return all_in(pods(), {"Running"}); }, 10));  // none OutOf...
  const KubeMetrics k = sched_->kube_metrics();
  EXPECT_GT(k.relists, 0u);
  EXPECT_GT(k.reconnects, 0u);
}

TEST_P(KubeFaults, ASchedulerKilledMidRunRestartsFromTheApiAndBindsNothingTwice) {
  start_cluster(32);  // 256 GPUs
  create_namespace("team-a");
  const std::string log = (dir_ / "kube.log").string();
  auto kube_args = [&] {
    return std::vector<std::string>{"kube",        "--kubeconfig",   kubeconfig_, "--listen",
                                    "127.0.0.1:0", "--gang-timeout", "3"};
  };
  // Gangs of 8 x 1 GPU arrive while the scheduler is killed and restarted twice.
  {
    Process first(kube_args(), log);
    add_gangs(10);
    ASSERT_TRUE(wait_for([&] { return binds_by_pod().size() >= 8; }, 30)) << log;
    add_gangs(10);
    first.signal(SIGKILL);  // perhaps between the binds of a gang
  }
  {
    Process second(kube_args(), log);
    add_gangs(10);
    ASSERT_TRUE(wait_for([&] { return pods_bound() >= 160; }, 30));
    second.signal(SIGKILL);
  }
  Process third(kube_args(), log);
  ASSERT_TRUE(wait_for([&] { return pods_bound() == 240; }, 30)) << pods_bound() << " bound";
  for (const auto& [uid, n] : binds_by_pod()) EXPECT_EQ(n, 1) << uid;
  // No gang is left partly running: every pod of every gang runs.
  EXPECT_TRUE(wait_for([&] { return all_in(pods(), {"Running"}) && pods().size() == 240; }, 10));
}

TEST_F(KubeFaultsEmulator, AnApiServerRestartIsRiddenOutAndNothingIsBoundTwice) {
  // The API server persists its objects (as etcd would) and comes back on the same address
  // with the same certificates; the scheduler keeps running throughout.
  kube_emulator::Options opt = emulator_options(8);  // 64 GPUs
  opt.state_file = (dir_ / "state.json").string();
  start_cluster(opt);
  create_namespace("team-a");
  start_scheduler();
  for (int i = 0; i < 32; ++i) create_pod("team-a", "a" + std::to_string(i), 1);
  ASSERT_TRUE(wait_for([&] { return binds_by_pod().size() == 32; }, 30));
  ASSERT_TRUE(wait_for([&] { return all_in(pods(), {"Running"}); }, 10));

  // The restarted server listens on the old port, with the old CA and keys, from files.
  const kube_emulator::Pki pki = *emu_->pki();
  auto write = [&](const std::string& name, const std::string& text) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  };
  opt.generate_tls = false;
  opt.tls_cert_file = write("server.crt", pki.server.cert);
  opt.tls_key_file = write("server.key", pki.server.key);
  opt.client_ca_file = write("ca.crt", pki.ca.cert);
  opt.port = emu_->port();
  std::vector<kube_emulator::BindRecord> before = cluster_->bindings();
  emu_->stop();
  emu_.reset();
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // the scheduler sees it gone
  emu_ = std::make_unique<kube_emulator::Emulator>(opt);
  emu_->start();
  // Work that arrives after the restart: the scheduler must re-watch and bind it, and must
  // not bind again what it bound before.
  for (int i = 0; i < 24; ++i) create_pod("team-a", "b" + std::to_string(i), 1);
  auto all_binds = [&] {  // successful binds per pod name, from both servers' logs
    std::map<std::string, int> n;
    for (const auto& b : before) n[b.name] += b.code == 201;
    for (const auto& b : cluster_->bindings()) n[b.name] += b.code == 201;
    return n;
  };
  ASSERT_TRUE(wait_for([&] { return all_binds().size() == 56; }, 40))
      << all_binds().size() << " bound; " << sched_->kube_metrics().watch_errors;
  for (const auto& [name, n] : all_binds()) EXPECT_EQ(n, 1) << name;
  // 56 of 64 GPUs: every pod runs, none was refused by the kubelet for lack of GPUs.
  EXPECT_TRUE(wait_for([&] { return all_in(pods(), {"Running"}) && pods().size() == 56; }, 10));
  EXPECT_GT(sched_->kube_metrics().reconnects, 0u);
}

TEST_F(KubeFaultsEmulator, ANotReadyNodeTakesNoNewPodsUntilItIsReadyAgain) {
  start_cluster(2);
  create_namespace("team-a");
  ASSERT_TRUE(emu_->set_node_ready("gpu-node-0000", "False"));
  start_scheduler();
  for (int i = 0; i < 16; ++i) create_pod("team-a", "p" + std::to_string(i), 1);
  ASSERT_TRUE(wait_for([&] { return binds_by_pod().size() == 8; }, 20));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  for (const auto& b : cluster_->bindings()) EXPECT_EQ(b.node, "gpu-node-0001") << b.name;
  EXPECT_EQ(binds_by_pod().size(), 8u);
  ASSERT_TRUE(emu_->set_node_ready("gpu-node-0000", "True"));
  ASSERT_TRUE(wait_for([&] { return binds_by_pod().size() == 16; }, 20));
  EXPECT_TRUE(wait_for([&] { return all_in(pods(), {"Running"}); }, 10));
}

TEST_P(KubeFaults, PodsOfAnotherSchedulerHoldTheirGpus) {
  start_cluster(2);
  create_namespace("team-a");
  // kube-scheduler's pods (bound by it) hold 7 GPUs of each node.
  for (int n = 0; n < 2; ++n) {
    json pod = pod_json("team-a", "theirs" + std::to_string(n), 7, "", 0, "default-scheduler");
    pod["spec"]["nodeName"] = "gpu-node-000" + std::to_string(n);
    post_pod(pod);
  }
  start_scheduler();
  for (int i = 0; i < 4; ++i) create_pod("team-a", "p" + std::to_string(i), 1);
  ASSERT_TRUE(wait_for([&] { return binds_by_pod().size() == 2; }, 20));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(binds_by_pod().size(), 2u);  // one free GPU on each node
  EXPECT_TRUE(
      all_in(pods("?fieldSelector=spec.schedulerName%3Dtessera,spec.nodeName%21%3D"), {"Running"}));
}

TEST_F(KubeFaultsEmulator, AFailedBindEvictsTheGangsBoundMembers) {
  start_cluster(4);
  create_namespace("team-a");
  emu_->add_bind_fault(
      {.pod = "team-a/g-2", .node = "", .count = 1, .code = 500, .message = "etcd timeout"});
  start_scheduler();
  create_group("team-a", "g", 4);
  for (int i = 0; i < 4; ++i) create_pod("team-a", "g-" + std::to_string(i), 8, "g");
  // Three binds land, one fails: the three are evicted (bare pods: they are gone), so the
  // gang never runs in part.
  ASSERT_TRUE(wait_for([&] { return sched_->kube_metrics().gang_rollbacks == 1; }, 20));
  ASSERT_TRUE(wait_for(
      [&] {
        for (const json& p : pods()) {
          const std::string name = p["metadata"]["name"];
          if (name != "g-2" && !p["metadata"].contains("deletionTimestamp")) return false;
        }
        return true;
      },
      10));
  // g-2 is not bound on its own meanwhile (its failed bind must not be retried while the
  // attempt's other binds are in flight, nor once they are given back).
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  for (const json& p : pods()) {
    const std::string name = p["metadata"]["name"];
    if (name == "g-2") {
      EXPECT_EQ(p["spec"].value("nodeName", ""), "");
    }
  }
  for (const auto& b : cluster_->bindings()) {
    if (b.name == "g-2") {
      EXPECT_NE(b.code, 201) << "g-2 bound alone";
    }
  }
}

TEST_P(KubeFaults, AReturningTenantReclaimsWholeGangsAfterTheirCheckpointGrace) {
  start_cluster(4);  // 32 GPUs
  create_namespace("team-a");
  create_namespace("team-b");
  start_scheduler();
  // team-a fills the cluster with 4 gangs of 4 x 2 GPUs, each with a 2 s checkpoint grace.
  for (int g = 0; g < 4; ++g) {
    const std::string name = "a" + std::to_string(g);
    create_group("team-a", name, 4);
    for (int i = 0; i < 4; ++i) {
      json pod = pod_json("team-a", name + "-" + std::to_string(i), 2, name);
      pod["metadata"]["annotations"][kGraceAnnotation] = "2";
      pod["spec"]["terminationGracePeriodSeconds"] = 2;
      post_pod(pod);
    }
  }
  ASSERT_TRUE(wait_for([&] { return binds_by_pod().size() == 16; }, 20));
  // team-b returns with a gang of 4 x 4 GPUs: its fair share is half the cluster.
  const auto t0 = std::chrono::system_clock::now();
  create_group("team-b", "b", 4);
  for (int i = 0; i < 4; ++i) create_pod("team-b", "b-" + std::to_string(i), 4, "b");
  ASSERT_TRUE(wait_for(
      [&] {
        return pods("?fieldSelector=metadata.namespace%3Dteam-b,status.phase%3DRunning").size() ==
               4;
      },
      30));
  // Whole gangs of team-a were evicted, each member told why, after the grace.
  std::map<std::string, int> left;
  for (const json& p : pods("?fieldSelector=metadata.namespace%3Dteam-a")) {
    const std::string name = p["metadata"]["name"];
    ++left[name.substr(0, name.find('-'))];
  }
  int evicted = 0;
  for (int g = 0; g < 4; ++g) {
    const int n = left["a" + std::to_string(g)];
    EXPECT_TRUE(n == 0 || n == 4) << "a" << g << ": " << n << " of 4 left";
    evicted += n == 0;
  }
  EXPECT_EQ(evicted, 2);  // 16 GPUs freed for team-b's 16
  // team-b's pods were bound only once the victims had used their 2 s grace.
  double first_b = 1e300;
  for (const auto& b : cluster_->bindings()) {
    if (b.ns == "team-b" && b.code == 201) first_b = std::min(first_b, parse_time(b.time));
  }
  const double since = first_b - std::chrono::duration<double>(t0.time_since_epoch()).count();
  EXPECT_GE(since, 1.9);
  EXPECT_EQ(sched_->metrics().preemptions, 2u);
}

TEST_P(KubeFaults, FractionalPodsShareGpusAndAreToldWhichOne) {
  start_cluster(1, 2);  // one node, 2 GPUs
  create_namespace("team-i");
  start_scheduler();
  for (int i = 0; i < 5; ++i) {
    json pod = pod_json("team-i", "infer-" + std::to_string(i), 0);
    pod["metadata"]["annotations"][kFractionAnnotation] = "0.5";
    post_pod(pod);
  }
  ASSERT_TRUE(wait_for([&] { return binds_by_pod().size() == 4; }, 20));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(binds_by_pod().size(), 4u);  // 4 halves of 2 GPUs; the fifth waits
  std::map<std::string, int> per_gpu;
  for (const json& p : pods("?fieldSelector=spec.nodeName%21%3D")) {
    const auto& notes = p["metadata"]["annotations"];
    ASSERT_TRUE(notes.contains(kGpuIndexAnnotation)) << p["metadata"]["name"];
    ++per_gpu[notes[kGpuIndexAnnotation].get<std::string>()];
  }
  EXPECT_EQ(per_gpu["0"], 2);
  EXPECT_EQ(per_gpu["1"], 2);
}

KUBE_ON_BOTH_TARGETS(KubeFaults);

}  // namespace
}  // namespace tessera::kube
