// Leader election on a Lease in the API emulator: one holder at a time, takeover only after
// the lease ran out by the taker's own clock, and two schedulers of which one binds.
#include "control/kube/leader_elector.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "control/kube/kube_scheduler.h"
#include "kube_emulator/emulator.h"

namespace tessera::kube {
namespace {

using nlohmann::json;

struct Emu {
  explicit Emu(int nodes = 0) {
    kube_emulator::Options o;
    if (nodes > 0) o.nodes = {kube_emulator::NodePool{.count = nodes, .gpus = 8}};
    o.kubelet.start_delay = std::chrono::milliseconds(20);
    emu = std::make_unique<kube_emulator::Emulator>(o);
    emu->start();
    path = std::filesystem::temp_directory_path() /
           ("tessera-leader-" + std::to_string(::getpid()) + "-" + std::to_string(emu->port()));
    std::ofstream(path) << emu->kubeconfig();
  }
  ~Emu() {
    emu->stop();
    std::filesystem::remove(path);
  }
  std::shared_ptr<Client> client() const {
    return std::make_shared<Client>(load_kubeconfig(path.string()));
  }
  json lease(const std::string& name) {
    return emu->request("GET", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/" + name)
        .json_body();
  }
  std::unique_ptr<kube_emulator::Emulator> emu;
  std::filesystem::path path;
};

TEST(LeaderElection, OneHolderAndATakeoverOnlyAfterTheLeaseRanOut) {
  Emu e;
  auto ca = e.client(), cb = e.client();
  double ta = 1000, tb = 5000;  // the replicas' monotonic clocks need not agree
  LeaseOptions oa{"kube-system", "sched", "a", 15, 10, 2};
  LeaseOptions ob = oa;
  ob.identity = "b";
  LeaderElector a(*ca, oa, [&] { return ta; });
  LeaderElector b(*cb, ob, [&] { return tb; });
  EXPECT_TRUE(a.try_acquire_or_renew());
  EXPECT_FALSE(b.try_acquire_or_renew());
  EXPECT_EQ(e.lease("sched")["spec"]["holderIdentity"], "a");
  // a renews: b's clock restarts from the new record.
  ta += 5;
  tb += 10;
  EXPECT_TRUE(a.try_acquire_or_renew());
  tb += 10;
  EXPECT_FALSE(b.try_acquire_or_renew());  // 10 s since b saw a renew
  // a stops renewing: after 15 s of b's clock b takes over, and the transition is counted.
  tb += 16;
  EXPECT_TRUE(b.try_acquire_or_renew());
  const json lease = e.lease("sched");
  EXPECT_EQ(lease["spec"]["holderIdentity"], "b");
  EXPECT_EQ(lease["spec"]["leaseTransitions"], 1);
  // a comes back: it sees b's record and does not write over it.
  ta += 30;
  EXPECT_FALSE(a.try_acquire_or_renew());
  EXPECT_EQ(e.lease("sched")["spec"]["holderIdentity"], "b");
}

TEST(LeaderElection, TwoSchedulersOneBindsAndTheStandbyTakesOverWithoutDoubleBinds) {
  Emu e(8);
  ASSERT_EQ(
      e.emu
          ->request(
              "POST", "/api/v1/namespaces",
              json{{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "team-a"}}}}
                  .dump())
          .status,
      201);
  auto make = [&](const std::string& id) {
    SchedulerOptions opt;
    opt.leader_elect = true;
    opt.lease = LeaseOptions{"kube-system", "tessera", id, 2, 1.5, 0.2};
    auto s = std::make_unique<KubeScheduler>(e.client(), opt);
    s->start();
    return s;
  };
  auto first = make("first");
  auto second = make("second");
  auto wait_for = [](auto pred, double seconds) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (!pred() && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return pred();
  };
  ASSERT_TRUE(wait_for([&] { return first->leading() || second->leading(); }, 10));
  EXPECT_FALSE(first->leading() && second->leading());
  auto create = [&](int from, int to) {
    for (int i = from; i < to; ++i) {
      json pod = {{"apiVersion", "v1"},
                  {"kind", "Pod"},
                  {"metadata", {{"name", "p" + std::to_string(i)}, {"namespace", "team-a"}}},
                  {"spec",
                   {{"schedulerName", "tessera"},
                    {"containers",
                     {{{"name", "m"}, {"resources", {{"limits", {{"nvidia.com/gpu", "1"}}}}}}}}}}};
      ASSERT_EQ(e.emu->request("POST", "/api/v1/namespaces/team-a/pods", pod.dump()).status, 201);
    }
  };
  auto bound = [&] {
    std::map<std::string, int> n;
    for (const auto& b : e.emu->bindings()) n[b.uid] += b.code == 201;
    return n;
  };
  create(0, 20);
  ASSERT_TRUE(wait_for([&] { return bound().size() == 20; }, 20));
  // The leader goes away; the standby takes over and binds what comes next.
  std::unique_ptr<KubeScheduler>& leader = first->leading() ? first : second;
  std::unique_ptr<KubeScheduler>& standby = first->leading() ? second : first;
  leader->stop();
  leader.reset();
  ASSERT_TRUE(wait_for([&] { return standby->leading(); }, 10));
  create(20, 40);
  ASSERT_TRUE(wait_for([&] { return bound().size() == 40; }, 20));
  // Every pod bound once, no bind refused as a second attempt.
  for (const auto& [uid, n] : bound()) EXPECT_EQ(n, 1) << uid;
  for (const auto& b : e.emu->bindings()) EXPECT_EQ(b.code, 201) << b.name << ": " << b.message;
}

}  // namespace
}  // namespace tessera::kube
