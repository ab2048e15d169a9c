// The fidelity proof: real kubectl binaries (1.27 ... 1.33 and the default one) against the
// emulator over TLS with a client certificate. Versions that are not installed are skipped.
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "kube_emulator/emulator_test_util.h"

extern char** environ;

namespace kube_emulator::testing {
namespace {

std::string find_kubectl(const std::string& version) {
  const std::string name = version.empty() ? "kubectl" : "kubectl." + version;
  for (const char* dir : {"/usr/lib/google-cloud-sdk/bin/", "/usr/bin/", "/usr/local/bin/"}) {
    const std::string p = std::string(dir) + name;
    if (access(p.c_str(), X_OK) == 0) return p;
  }
  return "";
}

struct Out {
  int rc = -1;
  std::string text;
};

Out sh(const std::string& cmd) {
  Out o;
  FILE* f = popen((cmd + " 2>&1").c_str(), "r");
  if (f == nullptr) return o;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), f)) > 0) o.text.append(buf.data(), n);
  const int st = pclose(f);
  o.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return o;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// One emulator for every version; each version works in its own namespace.
class KubectlTest : public ::testing::TestWithParam<std::string> {
 protected:
  static void SetUpTestSuite() {
    Options o = small_options(4, 8);
    o.generate_tls = true;
    o.kubelet.start_delay = std::chrono::milliseconds(50);
    emu_ = new Emulator(o);
    emu_->start();
    dir_ = ::testing::TempDir() + "emu_kubectl_" + std::to_string(getpid());
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ + "/kubeconfig") << emu_->kubeconfig();
  }
  static void TearDownTestSuite() {
    delete emu_;
    emu_ = nullptr;
    std::filesystem::remove_all(dir_);
  }
  // kubectl with the emulator's kubeconfig, its own HOME and discovery cache.
  Out kubectl(const std::string& args) {
    return sh("cd " + dir_ + " && HOME=" + dir_ + " KUBECONFIG=" + dir_ +
              "/kubeconfig timeout 60 " + bin_ + " --cache-dir " + dir_ + "/cache-" + tag_ + " " +
              args);
  }
  static Emulator* emu_;
  static std::string dir_;
  std::string bin_, tag_;
};
Emulator* KubectlTest::emu_ = nullptr;
std::string KubectlTest::dir_;

TEST_P(KubectlTest, EverydayCommands) {
  bin_ = find_kubectl(GetParam());
  if (bin_.empty()) GTEST_SKIP() << "kubectl " << GetParam() << " is not installed";
  tag_ = GetParam().empty() ? "default" : "v" + GetParam().substr(0, 1) + GetParam().substr(2);
  const std::string ns = "ns-" + tag_;
  const std::string pod = "demo-" + tag_;
  Http http(emu_->port());  // hooks need no credentials; the API does
  ASSERT_EQ(
      emu_->request("POST", "/api/v1/namespaces", json{{"metadata", {{"name", ns}}}}.dump()).status,
      201);

  const std::string pod_yaml = dir_ + "/pod-" + tag_ + ".yaml";
  std::ofstream(pod_yaml) << "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " << pod
                          << "\n  namespace: " << ns
                          << "\nspec:\n  schedulerName: tessera\n  containers:\n  - name: main\n"
                             "    image: busybox:1.36\n    resources:\n      limits:\n"
                             "        nvidia.com/gpu: 2\n";
  // Default validation: the emulator's schema-less OpenAPI document lets it pass.
  auto created = kubectl("create -f " + pod_yaml);
  ASSERT_EQ(created.rc, 0) << created.text;
  EXPECT_NE(created.text.find("pod/" + pod + " created"), std::string::npos) << created.text;
  EXPECT_EQ(emu_->request("GET", "/api/v1/namespaces/" + ns + "/pods/" + pod)
                .json_body()["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"],
            "2");

  // `kubectl get pods -w` in the background prints the changes that follow.
  const std::string watch_out = dir_ + "/watch-" + tag_ + ".txt";
  pid_t watcher = 0;
  {
    const std::string cmd = "HOME=" + dir_ + " KUBECONFIG=" + dir_ + "/kubeconfig exec " + bin_ +
                            " --cache-dir " + dir_ + "/cache-w-" + tag_ + " get pods -w -n " + ns +
                            " > " + watch_out + " 2>&1";
    const char* argv[] = {"/bin/sh", "-c", cmd.c_str(), nullptr};
    ASSERT_EQ(posix_spawn(&watcher, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ),
              0);
  }
  ASSERT_TRUE(eventually([&] { return slurp(watch_out).find(pod) != std::string::npos; }, 20000ms))
      << slurp(watch_out);

  auto bound = emu_->request("POST", "/api/v1/namespaces/" + ns + "/pods/" + pod + "/binding",
                             binding_json(pod, "gpu-node-0002", ns).dump());
  ASSERT_EQ(bound.status, 201) << bound.body;
  ASSERT_TRUE(eventually([&] {
    return emu_->request("GET", "/api/v1/namespaces/" + ns + "/pods/" + pod)
               .json_body()["status"]["phase"] == "Running";
  }));
  auto wide = kubectl("get pods -o wide -n " + ns);
  ASSERT_EQ(wide.rc, 0) << wide.text;
  EXPECT_NE(wide.text.find("NODE"), std::string::npos) << wide.text;
  EXPECT_NE(wide.text.find("NOMINATED NODE"), std::string::npos) << wide.text;
  EXPECT_NE(wide.text.find("gpu-node-0002"), std::string::npos) << wide.text;
  EXPECT_NE(wide.text.find("Running"), std::string::npos) << wide.text;

  auto nodes = kubectl("get nodes");
  ASSERT_EQ(nodes.rc, 0) << nodes.text;
  EXPECT_NE(nodes.text.find("gpu-node-0003   Ready"), std::string::npos) << nodes.text;

  auto as_json = kubectl("get pod " + pod + " -n " + ns + " -o json");
  ASSERT_EQ(as_json.rc, 0) << as_json.text;
  const json pj = json::parse(as_json.text, nullptr, false);
  ASSERT_FALSE(pj.is_discarded()) << as_json.text;
  EXPECT_EQ(pj["spec"]["nodeName"], "gpu-node-0002");
  const std::string uid = pj["metadata"]["uid"];

  json ev = {
      {"apiVersion", "events.k8s.io/v1"},
      {"kind", "Event"},
      {"metadata", {{"generateName", pod + "-"}, {"namespace", ns}}},
      {"eventTime", rfc3339_micro(Clock::now())},
      {"type", "Warning"},
      {"reason", "FailedScheduling"},
      {"action", "Scheduling"},
      {"note", "gang " + ns + "/g: 6/8 members placeable"},
      {"reportingController", "tessera.io/scheduler"},
      {"reportingInstance", "tessera-0"},
      {"regarding",
       {{"apiVersion", "v1"}, {"kind", "Pod"}, {"namespace", ns}, {"name", pod}, {"uid", uid}}}};
  ASSERT_EQ(emu_->request("POST", "/apis/events.k8s.io/v1/namespaces/" + ns + "/events", ev.dump())
                .status,
            201);
  auto described = kubectl("describe pod " + pod + " -n " + ns);
  ASSERT_EQ(described.rc, 0) << described.text;
  EXPECT_NE(described.text.find("FailedScheduling"), std::string::npos) << described.text;
  EXPECT_NE(described.text.find("6/8 members placeable"), std::string::npos) << described.text;
  EXPECT_NE(described.text.find("gpu-node-0002"), std::string::npos) << described.text;

  // A Binding created with kubectl, as a scheduler would POST it.
  ASSERT_EQ(emu_->request("POST", "/api/v1/namespaces/" + ns + "/pods",
                          pod_json(pod + "-b", "", ns).dump())
                .status,
            201);
  const std::string binding_yaml = dir_ + "/binding-" + tag_ + ".yaml";
  std::ofstream(binding_yaml)
      << "apiVersion: v1\nkind: Binding\nmetadata:\n  name: " << pod << "-b\n  namespace: " << ns
      << "\ntarget:\n  apiVersion: v1\n  kind: Node\n  name: gpu-node-0001\n";
  auto bind = kubectl("create --validate=false -f " + binding_yaml);
  EXPECT_EQ(bind.rc, 0) << bind.text;
  EXPECT_EQ(emu_->request("GET", "/api/v1/namespaces/" + ns + "/pods/" + pod + "-b")
                .json_body()["spec"]["nodeName"],
            "gpu-node-0001");

  auto deleted = kubectl("delete pod " + pod + " -n " + ns + " --grace-period=1");
  ASSERT_EQ(deleted.rc, 0) << deleted.text;
  EXPECT_NE(deleted.text.find("pod \"" + pod + "\" deleted"), std::string::npos) << deleted.text;
  EXPECT_EQ(emu_->request("GET", "/api/v1/namespaces/" + ns + "/pods/" + pod).status, 404);

  ASSERT_TRUE(eventually(
      [&] {
        const std::string w = slurp(watch_out);
        return w.find("Running") != std::string::npos && w.find("Terminating") != std::string::npos;
      },
      10000ms))
      << slurp(watch_out);
  kill(watcher, SIGTERM);
  waitpid(watcher, nullptr, 0);
  const std::string w = slurp(watch_out);
  EXPECT_NE(w.find("Pending"), std::string::npos) << w;

  // The PodGroup CRD applied, `kubectl get pg` prints its printer columns, as the real server
  // prints a custom resource.
  auto crd = kubectl("apply -f " + std::string(TESSERA_SOURCE_DIR) +
                     "/deploy/kubernetes/01-podgroup-crd.yaml");
  ASSERT_EQ(crd.rc, 0) << crd.text;
  ASSERT_EQ(
      emu_->request("POST", "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/" + ns + "/podgroups",
                    json{{"metadata", {{"name", "gang"}}}, {"spec", {{"minMember", 3}}}}.dump())
          .status,
      201);
  auto pg = kubectl("get pg gang -n " + ns);
  ASSERT_EQ(pg.rc, 0) << pg.text;
  EXPECT_NE(pg.text.find("PHASE"), std::string::npos) << pg.text;
  EXPECT_NE(pg.text.find("MINMEMBER"), std::string::npos) << pg.text;
  EXPECT_NE(pg.text.find("RUNNING"), std::string::npos) << pg.text;
  EXPECT_NE(pg.text.find(" 3 "), std::string::npos) << pg.text;

  // A client-side dry-run apply of every kind a Tessera deployment uses: kubectl GETs each
  // object and must read the 404 as "create".
  const std::string manifests =
      std::string(TESSERA_SOURCE_DIR) + "/tests/kube_emulator/testdata/apply_all.yaml";
  auto applied = kubectl("apply --dry-run=client --validate=false -f " + manifests);
  ASSERT_EQ(applied.rc, 0) << applied.text;
  for (const char* what :
       {"namespace/tessera-demo", "serviceaccount/tessera-scheduler",
        "clusterrole.rbac.authorization.k8s.io/tessera-scheduler",
        "clusterrolebinding.rbac.authorization.k8s.io/tessera-scheduler",
        "configmap/tessera-config", "deployment.apps/tessera-scheduler", "job.batch/train",
        "customresourcedefinition.apiextensions.k8s.io/widgets.example.com",
        "podgroup.scheduling.x-k8s.io/train", "priorityclass.scheduling.k8s.io/tessera-high",
        "lease.coordination.k8s.io/tessera", "poddisruptionbudget.policy/train"}) {
    EXPECT_NE(applied.text.find(std::string(what) + " created (dry run)"), std::string::npos)
        << what << "\n"
        << applied.text;
  }
}

INSTANTIATE_TEST_SUITE_P(Versions, KubectlTest,
                         ::testing::Values("1.27", "1.28", "1.29", "1.30", "1.31", "1.32", "1.33",
                                           ""),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           return i.param.empty() ? std::string("default")
                                                  : "v1_" + i.param.substr(2);
                         });

}  // namespace
}  // namespace kube_emulator::testing
