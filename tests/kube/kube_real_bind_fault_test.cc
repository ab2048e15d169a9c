// A bind the real API server refuses: a ValidatingAdmissionPolicy on pods/binding denies one
// member of a gang, as a webhook or policy engine of a real cluster might. The members whose
// binds landed are evicted, so the gang never runs in part, and the refused member is not bound
// alone.
#include "kube/real_server_fixture.h"

namespace tessera::kube {
namespace {

using nlohmann::json;

constexpr const char* kPolicy = R"yaml(apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: refuse-g-2
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
      - apiGroups: [""]
        apiVersions: ["v1"]
        operations: ["CREATE"]
        resources: ["pods/binding"]
  validations:
    - expression: "!(object.metadata.name in ['g-2', 'probe'])"
      message: "refused by the test's admission policy"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: refuse-g-2
spec:
  policyName: refuse-g-2
  validationActions: [Deny]
)yaml";

class KubeRealBindFault : public KubeRealServer {};

TEST_F(KubeRealBindFault, ABindTheServerRefusesRollsTheGangBackAndBindsNothingAlone) {
  start_cluster(4);  // 32 GPUs: the gang of 4 x 8 fits only whole
  create_namespace("team-a");
  const std::string policy = (dir_ / "policy.yaml").string();
  std::ofstream(policy) << kPolicy;
  kubectl_ok("apply -f " + policy);
  // The policy is in force once a probe's bind is refused (it compiles and syncs first).
  create_pod("team-a", "probe", 0, "", 0, "nobody");
  ASSERT_TRUE(wait_for(
      [&] {
        const auto r = api("POST", "/api/v1/namespaces/team-a/pods/probe/binding",
                           json{{"apiVersion", "v1"},
                                {"kind", "Binding"},
                                {"metadata", {{"name", "probe"}}},
                                {"target", {{"kind", "Node"}, {"name", "gpu-node-0000"}}}}
                               .dump());
        return r.status >= 400 && r.body.find("admission policy") != std::string::npos;
      },
      30));
  start_scheduler();
  create_group("team-a", "g", 4);
  for (int i = 0; i < 4; ++i) create_pod("team-a", "g-" + std::to_string(i), 8, "g");
  // Three binds land, g-2's is refused: the three are evicted (bare pods: they go).
  ASSERT_TRUE(wait_for([&] { return sched_->kube_metrics().gang_rollbacks >= 1; }, 60));
  ASSERT_TRUE(wait_for(
      [&] {
        for (const json& p : pods("?fieldSelector=metadata.namespace%3Dteam-a")) {
          const std::string name = p["metadata"]["name"];
          if (name.rfind("g-", 0) == 0 && name != "g-2" &&
              !p["metadata"].contains("deletionTimestamp")) {
            return false;
          }
        }
        return true;
      },
      20));
  // g-2 is not bound on its own meanwhile.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  const json g2 = api("GET", "/api/v1/namespaces/team-a/pods/g-2").json_body();
  EXPECT_EQ(g2["spec"].value("nodeName", ""), "");
  int refused = 0;
  for (const auto& b : cluster_->bindings()) {
    if (b.name != "g-2") continue;
    EXPECT_NE(b.code, 201);
    ++refused;
  }
  EXPECT_GE(refused, 1);
  // It is told why, in the server's words, as kube-scheduler tells it: kubectl shows it.
  std::string events;
  EXPECT_TRUE(wait_for(
      [&] {
        cluster_->kubectl("get events -n team-a --field-selector involvedObject.name=g-2",
                          &events);
        return events.find("binding rejected") != std::string::npos &&
               events.find("admission policy") != std::string::npos;
      },
      10))
      << events;
}

}  // namespace
}  // namespace tessera::kube
