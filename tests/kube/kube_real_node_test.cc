// Nodes whose kubelet stops heartbeating, on a real control plane: KWOK (every node's fake
// kubelet) is stopped, kube-controller-manager's node lifecycle marks the nodes Ready=Unknown
// and taints them unreachable, and tessera kube places nothing until the kubelets are back.
#include <signal.h>

#include "kube/real_server_fixture.h"

namespace tessera::kube {
namespace {

using nlohmann::json;

class KubeRealNode : public KubeRealServer {
 protected:
  void SetUp() override {
    // A lease renewed every second or so and a node lifecycle that notices within 6 s (the
    // defaults, 40 s and 50 s, are a real cluster's).
    real_options_.kwok_args = {"--node-lease-duration-seconds=4"};
    real_options_.controller_manager_args = {"--node-monitor-grace-period=6s",
                                             "--node-monitor-period=1s"};
    KubeRealServer::SetUp();
  }
  std::string ready(const std::string& node) {
    const json n = api("GET", "/api/v1/nodes/" + node).json_body();
    for (const json& c : n["status"].value("conditions", json::array())) {
      if (c.value("type", "") == "Ready") return c.value("status", "");
    }
    return "";
  }
};

TEST_F(KubeRealNode, NodesWhoseKubeletsStopTakeNoNewPodsUntilTheyAreBack) {
  start_cluster(2);
  create_namespace("team-a");
  for (const char* n : {"gpu-node-0000", "gpu-node-0001"}) {
    ASSERT_TRUE(wait_for([&] { return ready(n) == "True"; }, 30)) << n;
  }
  start_scheduler();
  const pid_t kwok = real_->component_pid("kwok");
  ASSERT_GT(kwok, 0);
  ASSERT_EQ(::kill(kwok, SIGSTOP), 0);
  for (const char* n : {"gpu-node-0000", "gpu-node-0001"}) {
    EXPECT_TRUE(wait_for([&] { return ready(n) == "Unknown"; }, 30)) << n;
  }
  for (int i = 0; i < 8; ++i) create_pod("team-a", "p" + std::to_string(i), 2);
  // The pods wait, and say so; nothing is bound to a node that is not Ready.
  std::string why;
  const bool told = wait_for(
      [&] {
        why = waiting_message("team-a", "p7");
        return !why.empty();
      },
      30);
  ::kill(kwok, SIGCONT);
  ASSERT_TRUE(told);
  EXPECT_EQ(binds_by_pod().size(), 0u) << why;
  // "Not now", not "never": the nodes are only away.
  EXPECT_EQ(why.rfind("pod team-a/p7: no Ready, uncordoned node set can host it now "
                      "(2 node(s) NotReady or cordoned)",
                      0),
            0u)
      << why;
  // The kubelets are back: every pod is bound, once.
  ASSERT_TRUE(wait_for([&] { return binds_by_pod().size() == 8; }, 40)) << why;
  EXPECT_TRUE(wait_for([&] { return all_in(pods(), {"Running"}); }, 20));
  for (const auto& [uid, n] : binds_by_pod()) EXPECT_EQ(n, 1) << uid;
}

}  // namespace
}  // namespace tessera::kube
