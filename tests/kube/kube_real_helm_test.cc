// The Helm chart (deploy/helm/tessera) as a user meets it: `helm lint` passes, `helm template`
// renders what deploy/kubernetes/ applies (the same RBAC rules, CRDs, queue tree and command),
// the options do what values.yaml says, and the rendered chart installed on a real
// kube-apiserver runs: `tessera kube` started with the args of the rendered Deployment and the
// token of the chart's ServiceAccount binds a gang, each pod once, and is refused nothing.
// The helm binary is tools/helm/bin/helm (scripts/setup.sh builds it).
#include <httplib.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "kube/real_server_fixture.h"
#include "kube/support/process.h"

namespace tessera::kube {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::Process;

const std::string kSource = TESSERA_SOURCE_DIR;
const std::string kChart = kSource + "/deploy/helm/tessera";
const std::string kManifests = kSource + "/deploy/kubernetes";
const std::string kEverything = kChart + "/ci/everything-values.yaml";
const std::string kNamespace = "tessera-system";

std::string tool(const std::string& name) {
  const std::string p = kSource + "/tools/helm/bin/" + name;
  if (::access(p.c_str(), R_OK) != 0) {
    throw std::runtime_error(p + " is missing: scripts/setup.sh builds helm from tools/helm");
  }
  return p;
}

struct Ran {
  int rc = -1;
  std::string out;  // stdout, and stderr unless it went to a file
};

Ran sh(const std::string& cmd) {
  Ran r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int status = ::pclose(p);
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// helm with its config, cache and data under `home`, so that a test reads no user's settings;
// its stderr into *err when given (else with stdout).
Ran helm(const fs::path& home, const std::string& args, std::string* err = nullptr) {
  const std::string h = (home / "helm").string();
  const std::string err_file = h + ".err";
  Ran r =
      sh("HELM_CONFIG_HOME=" + h + "/config HELM_CACHE_HOME=" + h + "/cache HELM_DATA_HOME=" + h +
         "/data " + tool("helm") + " " + args + (err ? " 2>" + err_file : " 2>&1"));
  if (err) *err = read_text(err_file);
  return r;
}

// A parsed YAML value as JSON (scalars as strings), so that two documents compare by content:
// flow or block style, key order, quoting and comments do not count.
json as_json(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map: {
      json o = json::object();
      for (const auto& kv : n) o[kv.first.as<std::string>()] = as_json(kv.second);
      return o;
    }
    case YAML::NodeType::Sequence: {
      json a = json::array();
      for (const auto& v : n) a.push_back(as_json(v));
      return a;
    }
    case YAML::NodeType::Scalar:
      return n.Scalar();
    default:
      return nullptr;
  }
}

// Objects of a YAML stream (documents that are not maps, e.g. empty ones, are left out).
struct Objects {
  std::vector<json> items;
  std::vector<std::string> texts;  // each object's own text, as rendered

  static Objects parse(const std::string& stream) {
    Objects o;
    std::istringstream in(stream);
    std::string line, doc;
    const auto flush = [&] {
      const YAML::Node n = YAML::Load(doc);
      if (n.IsMap()) {
        o.items.push_back(as_json(n));
        o.texts.push_back(doc);
      }
      doc.clear();
    };
    while (std::getline(in, line)) {
      if (line == "---") {
        flush();
      } else {
        doc += line + "\n";
      }
    }
    flush();
    return o;
  }
  static Objects file(const std::string& path) { return parse(read_text(path)); }
  // The object of this kind and name; null when there is none.
  json get(const std::string& kind, const std::string& name) const {
    for (const json& i : items) {
      if (i.value("kind", "") == kind && i["metadata"].value("name", "") == name) return i;
    }
    return nullptr;
  }
  std::set<std::string> kinds() const {
    std::set<std::string> k;
    for (const json& i : items) k.insert(i.value("kind", ""));
    return k;
  }
  json deployment() const { return get("Deployment", "tessera-scheduler"); }
  // The scheduler container's command, "tessera" first.
  std::vector<std::string> command() const {
    const json d = deployment();
    if (d.is_null()) return {};
    return d["spec"]["template"]["spec"]["containers"][0]["command"]
        .get<std::vector<std::string>>();
  }
};

bool has(const std::vector<std::string>& args, const std::string& flag) {
  return std::find(args.begin(), args.end(), flag) != args.end();
}
// The values that follow `flag` wherever it occurs.
std::vector<std::string> values_of(const std::vector<std::string>& args, const std::string& flag) {
  std::vector<std::string> out;
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] == flag) out.push_back(args[i + 1]);
  }
  return out;
}
std::string joined(const std::vector<std::string>& args) {
  std::string s;
  for (const std::string& a : args) s += a + " ";
  return s;
}

class HelmChart : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tessera-helm-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }
  // `helm template tessera CHART -n tessera-system ARGS`, which must succeed without a warning.
  Objects render(const std::string& args = "") {
    std::string err;
    const Ran r = helm(dir_, "template tessera " + kChart + " -n " + kNamespace + " " + args, &err);
    EXPECT_EQ(r.rc, 0) << args << "\n" << err;
    EXPECT_EQ(err, "") << args;
    return Objects::parse(r.out);
  }
  std::string values_file(const std::string& name, const std::string& yaml) {
    const std::string p = (dir_ / name).string();
    std::ofstream(p) << yaml;
    return p;
  }
  fs::path dir_;
};

TEST_F(HelmChart, LintsCleanWithTheDefaultsAndWithEveryOptionOn) {
  for (const std::string& values : {std::string(), "-f " + kEverything}) {
    const Ran r = helm(dir_, "lint --strict " + kChart + " " + values);
    EXPECT_EQ(r.rc, 0) << values << "\n" << r.out;
    EXPECT_NE(r.out.find("0 chart(s) failed"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("[WARNING]"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("[ERROR]"), std::string::npos) << r.out;
  }
}

TEST_F(HelmChart, DefaultsRenderWhatTheManifestsApply) {
  const Objects chart = render("--include-crds");
  const Objects podgroup_crd = Objects::file(kManifests + "/01-podgroup-crd.yaml");
  const Objects rbac = Objects::file(kManifests + "/02-rbac.yaml");
  const Objects config = Objects::file(kManifests + "/03-config.yaml");
  const Objects deploy = Objects::file(kManifests + "/04-deployment.yaml");
  const Objects queue_crd = Objects::file(kManifests + "/01-queue-crd.yaml");
  // The same objects under the same names (the Namespace is Helm's: --create-namespace).
  for (const auto& [kind, name] : std::vector<std::pair<std::string, std::string>>{
           {"ServiceAccount", "tessera-scheduler"},
           {"ClusterRole", "tessera-scheduler"},
           {"ClusterRoleBinding", "tessera-scheduler"},
           {"Role", "tessera-scheduler-leader-election"},
           {"RoleBinding", "tessera-scheduler-leader-election"},
           {"ClusterRole", "tessera-viewer"},
           {"ConfigMap", "tessera-queues"},
           {"Deployment", "tessera-scheduler"},
           {"Service", "tessera-scheduler"},
           {"NetworkPolicy", "tessera-scheduler"},
           {"CustomResourceDefinition", "podgroups.scheduling.x-k8s.io"},
           {"CustomResourceDefinition", "queues.scheduling.tessera.io"}}) {
    const json o = chart.get(kind, name);
    ASSERT_FALSE(o.is_null()) << kind << " " << name << " not rendered";
    if (o["metadata"].contains("namespace")) {
      EXPECT_EQ(o["metadata"]["namespace"], kNamespace);
    }
  }
  EXPECT_EQ(chart.kinds().count("ServiceMonitor"), 0u);
  EXPECT_EQ(chart.kinds().count("Queue"), 0u);
  // RBAC: rule for rule what 02-rbac.yaml grants, compared parsed.
  for (const auto& [kind, name] : std::vector<std::pair<std::string, std::string>>{
           {"ClusterRole", "tessera-scheduler"},
           {"Role", "tessera-scheduler-leader-election"},
           {"ClusterRole", "tessera-viewer"}}) {
    EXPECT_EQ(chart.get(kind, name)["rules"], rbac.get(kind, name)["rules"]) << kind << " " << name;
  }
  for (const std::string binding : {"ClusterRoleBinding", "RoleBinding"}) {
    const std::string name =
        binding == "RoleBinding" ? "tessera-scheduler-leader-election" : "tessera-scheduler";
    EXPECT_EQ(chart.get(binding, name)["subjects"], rbac.get(binding, name)["subjects"]);
    EXPECT_EQ(chart.get(binding, name)["roleRef"], rbac.get(binding, name)["roleRef"]);
  }
  // The CRDs Helm installs from crds/ are the manifests'.
  EXPECT_EQ(chart.get("CustomResourceDefinition", "podgroups.scheduling.x-k8s.io"),
            podgroup_crd.get("CustomResourceDefinition", "podgroups.scheduling.x-k8s.io"));
  EXPECT_EQ(chart.get("CustomResourceDefinition", "queues.scheduling.tessera.io"),
            queue_crd.get("CustomResourceDefinition", "queues.scheduling.tessera.io"));
  // The queue tree: 03-config.yaml's, parsed.
  const auto tree = [](const Objects& o) {
    return as_json(
        YAML::Load(o.get("ConfigMap", "tessera-queues")["data"]["queues.yaml"].get<std::string>()));
  };
  EXPECT_EQ(tree(chart), tree(config));
  // The scheduler: 04-deployment.yaml's command word for word (2 replicas, leader election,
  // the ConfigMap's tree, --read-auth kubernetes), the same pod and container security.
  EXPECT_EQ(chart.command(), deploy.command()) << joined(chart.command());
  const json c = chart.deployment(), m = deploy.deployment();
  EXPECT_EQ(c["spec"]["replicas"], m["spec"]["replicas"]);
  EXPECT_EQ(c["spec"]["strategy"], m["spec"]["strategy"]);
  const json cs = c["spec"]["template"]["spec"], ms = m["spec"]["template"]["spec"];
  for (const char* f : {"securityContext", "priorityClassName", "serviceAccountName",
                        "terminationGracePeriodSeconds", "volumes"}) {
    EXPECT_EQ(cs[f], ms[f]) << f;
  }
  for (const char* f : {"resources", "securityContext", "volumeMounts", "env", "ports"}) {
    EXPECT_EQ(cs["containers"][0][f], ms["containers"][0][f]) << f;
  }
  // The image: tessera:<appVersion> here (Helm's convention), tessera:latest there.
  EXPECT_EQ(cs["containers"][0]["image"], "tessera:0.1.0");
  // The read API: the Service's port, and who the NetworkPolicy lets reach it.
  const json np = chart.get("NetworkPolicy", "tessera-scheduler")["spec"];
  EXPECT_EQ(np["ingress"], Objects::file(kManifests + "/05-networkpolicy.yaml")
                               .get("NetworkPolicy", "tessera-scheduler")["spec"]["ingress"]);
  EXPECT_EQ(chart.get("Service", "tessera-scheduler")["spec"]["ports"][0]["port"], "10259");
  // Both select the Deployment's pods.
  const json pod_labels = c["spec"]["template"]["metadata"]["labels"];
  for (const json& selector : {np["podSelector"]["matchLabels"],
                               chart.get("Service", "tessera-scheduler")["spec"]["selector"],
                               c["spec"]["selector"]["matchLabels"]}) {
    for (const auto& [k, v] : selector.items()) EXPECT_EQ(pod_labels.value(k, ""), v) << k;
  }
}

TEST_F(HelmChart, TheQueueTreeGivenInValuesIsTheConfigMapTheSchedulerReads) {
  const std::string given = R"(queues:
  fairness: {half_life: 12h}
  queues:
    - name: vision
      weight: 3
      guarantee: {gpus: 4}
      namespaces: [cv, cv-dev]
    - name: speech
      guarantee: {gpus: 2}
)";
  const Objects chart = render("-f " + values_file("tree.yaml", given));
  const json cm = chart.get("ConfigMap", "tessera-queues");
  ASSERT_FALSE(cm.is_null());
  EXPECT_EQ(as_json(YAML::Load(cm["data"]["queues.yaml"].get<std::string>())),
            as_json(YAML::Load(given)["queues"]));
  // ... and it is the file --queues names, mounted from that ConfigMap.
  const json pod = chart.deployment()["spec"]["template"];
  EXPECT_EQ(values_of(chart.command(), "--queues"),
            std::vector<std::string>{"/etc/tessera/queues.yaml"});
  EXPECT_EQ(pod["spec"]["volumes"][0]["configMap"]["name"], "tessera-queues");
  EXPECT_EQ(pod["spec"]["containers"][0]["volumeMounts"][0]["mountPath"], "/etc/tessera");
  // A changed tree rolls the pods: their checksum annotation changes with it.
  const std::string before = pod["metadata"]["annotations"].value("checksum/queues", "");
  EXPECT_FALSE(before.empty());
  const Objects changed = render("-f " + values_file("tree2.yaml", given + "      weight: 2\n"));
  EXPECT_NE(changed.deployment()["spec"]["template"]["metadata"]["annotations"].value(
                "checksum/queues", ""),
            before);
  // As a string, the tree is written as given, comments and all.
  const std::string text = "queues:\n  - name: solo  # the only one\n";
  const Objects raw = render("--set-string queues='" + text + "'");
  EXPECT_EQ(raw.get("ConfigMap", "tessera-queues")["data"]["queues.yaml"], text);
}

TEST_F(HelmChart, EveryOptionOnRendersAServiceMonitorQueueObjectsAndLeaderElection) {
  const Objects chart = render("-f " + kEverything);
  const YAML::Node values = YAML::LoadFile(kEverything);
  const std::vector<std::string> cmd = chart.command();
  // Queues from the Queue objects, not from a file.
  EXPECT_EQ(values_of(cmd, "--queues-from"), std::vector<std::string>{"crd"}) << joined(cmd);
  EXPECT_FALSE(has(cmd, "--queues")) << joined(cmd);
  EXPECT_TRUE(chart.get("ConfigMap", "tessera-queues").is_null());
  // The Queue objects given, spec for spec.
  for (const auto& kv : values["queueObjects"]) {
    const std::string name = kv.first.as<std::string>();
    const json q = chart.get("Queue", name);
    ASSERT_FALSE(q.is_null()) << name;
    EXPECT_EQ(q["apiVersion"], "scheduling.tessera.io/v1alpha1");
    EXPECT_FALSE(q["metadata"].contains("namespace")) << "a Queue is cluster-scoped";
    EXPECT_EQ(q["spec"], as_json(kv.second)) << name;
  }
  // Two replicas: leader election on the Lease the Role lets it renew.
  EXPECT_EQ(chart.deployment()["spec"]["replicas"], "2");
  EXPECT_TRUE(has(cmd, "--leader-elect")) << joined(cmd);
  const std::vector<std::string> lease = values_of(cmd, "--lease-name");
  ASSERT_EQ(lease.size(), 1u);
  bool renewable = false;
  const json role = chart.get("Role", "tessera-scheduler-leader-election");
  for (const json& rule : role["rules"]) {
    if (rule.contains("resourceNames") && rule["resources"][0] == "leases") {
      renewable = rule["resourceNames"] == json::array({lease[0]});
    }
  }
  EXPECT_TRUE(renewable) << lease[0];
  // Scheduler names, extra args, placement.
  EXPECT_EQ(values_of(cmd, "--scheduler-name"),
            (std::vector<std::string>{"tessera", "tessera-gpu"}));
  EXPECT_EQ(values_of(cmd, "--gang-timeout"), std::vector<std::string>{"60"});
  const json pod = chart.deployment()["spec"]["template"]["spec"];
  EXPECT_EQ(pod["nodeSelector"], as_json(values["nodeSelector"]));
  EXPECT_EQ(pod["tolerations"], as_json(values["tolerations"]));
  // The ServiceMonitor scrapes the Service's port, with the token of a ServiceAccount bound to
  // the viewer role (kept in a token Secret).
  const json sm = chart.get("ServiceMonitor", "tessera-scheduler");
  ASSERT_FALSE(sm.is_null()) << "no ServiceMonitor";
  EXPECT_EQ(sm["apiVersion"], "monitoring.coreos.com/v1");
  EXPECT_EQ(sm["metadata"]["labels"].value("release", ""), "kube-prometheus-stack");
  const json svc = chart.get("Service", "tessera-scheduler");
  const json ep = sm["spec"]["endpoints"][0];
  EXPECT_EQ(ep["port"], svc["spec"]["ports"][0]["name"]);
  EXPECT_EQ(ep["path"], "/metrics");
  for (const auto& [k, v] : sm["spec"]["selector"]["matchLabels"].items()) {
    EXPECT_EQ(svc["metadata"]["labels"].value(k, ""), v) << k;
  }
  const json secret =
      chart.get("Secret", ep["authorization"]["credentials"]["name"].get<std::string>());
  ASSERT_FALSE(secret.is_null()) << ep.dump();
  EXPECT_EQ(secret["type"], "kubernetes.io/service-account-token");
  const auto reader =
      secret["metadata"]["annotations"]["kubernetes.io/service-account.name"].get<std::string>();
  const json binding = chart.get("ClusterRoleBinding", reader);
  EXPECT_EQ(binding["roleRef"]["name"], "tessera-viewer");
  EXPECT_EQ(binding["subjects"][0]["name"], reader);
  EXPECT_FALSE(chart.get("ServiceAccount", reader).is_null());
  // The extra NetworkPolicy peer.
  EXPECT_EQ(chart.get("NetworkPolicy", "tessera-scheduler")["spec"]["ingress"][0]["from"][2],
            as_json(values["networkPolicy"]["extraFrom"][0]));
}

TEST_F(HelmChart, LeaderElectionFollowsReplicasAndABadQueueSourceIsRefused) {
  const std::vector<std::string> one = render("--set replicaCount=1").command();
  EXPECT_FALSE(has(one, "--leader-elect")) << joined(one);
  // The lease namespace still names the release's: long-term usage is saved there.
  EXPECT_EQ(values_of(one, "--lease-namespace"), std::vector<std::string>{kNamespace});
  EXPECT_TRUE(has(render("--set replicaCount=1 --set leaderElection.enabled=true").command(),
                  "--leader-elect"));
  EXPECT_FALSE(has(render("--set leaderElection.enabled=false").command(), "--leader-elect"));
  // No tree at all: no ConfigMap, no --queues (one queue per queue name).
  const Objects none = render("--set-json queues={}");
  EXPECT_TRUE(none.get("ConfigMap", "tessera-queues").is_null());
  EXPECT_FALSE(has(none.command(), "--queues")) << joined(none.command());
  // A release not named tessera prefixes its objects, and the Role follows the Lease name.
  std::string err;
  const Ran other = helm(dir_, "template prod " + kChart + " -n ml", &err);
  EXPECT_EQ(other.rc, 0) << err;
  const Objects prod = Objects::parse(other.out);
  EXPECT_EQ(
      values_of(
          prod.get("Deployment",
                   "prod-tessera-scheduler")["spec"]["template"]["spec"]["containers"][0]["command"]
              .get<std::vector<std::string>>(),
          "--lease-name"),
      std::vector<std::string>{"prod-tessera-scheduler"});
  EXPECT_EQ(prod.get("Role", "prod-tessera-scheduler-leader-election")["rules"][1]["resourceNames"],
            json::array({"prod-tessera-scheduler"}));
  // What cannot work is refused at render time, naming the value.
  const Ran bad = helm(dir_, "template tessera " + kChart + " --set queuesFrom=configmap");
  EXPECT_NE(bad.rc, 0);
  EXPECT_NE(bad.out.find("queuesFrom"), std::string::npos) << bad.out;
  const Ran blind =
      helm(dir_, "template tessera " + kChart +
                     " --set serviceMonitor.enabled=true --set service.enabled=false");
  EXPECT_NE(blind.rc, 0);
  EXPECT_NE(blind.out.find("service.enabled"), std::string::npos) << blind.out;
}

// The rendered chart on a real API server, with `tessera kube` as the Deployment's pod would run
// it (KWOK runs no containers, and testcluster has no kube-scheduler to place that pod).
class KubeRealHelm : public KubeRealServer {
 protected:
  // `kubectl create namespace` (as helm install --create-namespace) and the chart rendered with
  // `args`, applied CRDs first and each one established before the rest.
  Objects install(const std::string& args) {
    std::string err;
    const Ran r = helm(
        dir_, "template tessera " + kChart + " -n " + kNamespace + " --include-crds " + args, &err);
    EXPECT_EQ(r.rc, 0) << err;
    const Objects o = Objects::parse(r.out);
    std::ofstream crds(dir_ / "crds.yaml"), rest(dir_ / "chart.yaml");
    std::vector<std::string> crd_names;
    for (size_t i = 0; i < o.items.size(); ++i) {
      const bool crd = o.items[i]["kind"] == "CustomResourceDefinition";
      if (crd) crd_names.push_back(o.items[i]["metadata"]["name"]);
      (crd ? crds : rest) << "---\n" << o.texts[i];
    }
    crds.close();
    rest.close();
    kubectl_ok("create namespace " + kNamespace);
    kubectl_ok("apply -f " + (dir_ / "crds.yaml").string());
    for (const std::string& n : crd_names) {
      kubectl_ok("wait --for condition=established --timeout=60s crd/" + n);
    }
    std::cout << "$ kubectl apply -f chart.yaml  # helm template ... " << args << "\n"
              << kubectl_ok("apply -f " + (dir_ / "chart.yaml").string());
    return o;
  }

  // Starts `tessera kube` with the rendered Deployment's command, as its pod would: the token of
  // its ServiceAccount, its ConfigMap volumes (read back from the server) at local paths, its
  // $(VAR)s expanded; --listen moves to a free loopback port, read from --addr-file.
  std::unique_ptr<Process> run_as_deployment(const Objects& chart, const std::string& identity) {
    const json pod = chart.deployment()["spec"]["template"]["spec"];
    const json container = pod["containers"][0];
    auto args = container["command"].get<std::vector<std::string>>();
    EXPECT_EQ(args.at(0), "tessera");
    args.erase(args.begin());
    // Volumes: each ConfigMap mount a directory of the keys' files, as the kubelet makes it.
    std::vector<std::pair<std::string, std::string>> mounts;  // mountPath -> local dir
    for (const json& m : container.value("volumeMounts", json::array())) {
      for (const json& v : pod["volumes"]) {
        if (v["name"] != m["name"] || !v.contains("configMap")) continue;
        const fs::path local = dir_ / "mounts" / v["name"].get<std::string>();
        fs::create_directories(local);
        const json cm = api("GET", "/api/v1/namespaces/" + kNamespace + "/configmaps/" +
                                       v["configMap"]["name"].get<std::string>())
                            .json_body();
        for (const json& item : v["configMap"]["items"]) {
          std::ofstream(local / item["path"].get<std::string>())
              << cm["data"][item["key"].get<std::string>()].get<std::string>();
        }
        mounts.emplace_back(m["mountPath"].get<std::string>(), local.string());
      }
    }
    std::map<std::string, std::string> env;
    for (const json& e : container.value("env", json::array())) {
      // A value, else (POD_NAME) the pod's name from the downward API.
      env[e["name"].get<std::string>()] =
          e.contains("value") ? e["value"].get<std::string>() : identity;
    }
    addr_file_ = (dir_ / "addr").string();
    for (size_t i = 0; i < args.size(); ++i) {
      for (const auto& [name, value] : env) {
        for (size_t at; (at = args[i].find("$(" + name + ")")) != std::string::npos;) {
          args[i].replace(at, name.size() + 3, value);
        }
      }
      for (const auto& [path, local] : mounts) {
        if (args[i].rfind(path + "/", 0) == 0) args[i] = local + args[i].substr(path.size());
      }
      if (i > 0 && args[i - 1] == "--listen") args[i] = "127.0.0.1:0";
    }
    args.insert(args.end(),
                {"--kubeconfig", kubeconfig_of(pod["serviceAccountName"].get<std::string>()),
                 "--addr-file", addr_file_});
    std::cout << "$ tessera " << joined(args) << "\n";
    log_ = (dir_ / "kube.log").string();
    return std::make_unique<Process>(args, log_);
  }

  // A kubeconfig with a fresh token of ServiceAccount tessera-system/`sa`.
  std::string kubeconfig_of(const std::string& sa) {
    const std::string path = (dir_ / (sa + ".kubeconfig")).string();
    std::ofstream(path) << "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n"
                        << "    server: " << real_->server() << "\n"
                        << "    certificate-authority: " << (dir_ / "cluster" / "ca.crt").string()
                        << "\nusers:\n- name: u\n  user:\n    token: " << token_of(kNamespace, sa)
                        << "\ncontexts:\n- name: c\n"
                        << "  context: {cluster: c, user: u}\ncurrent-context: c\n";
    return path;
  }

  // Every pod of `ns` bound once, by the chart's ServiceAccount.
  void expect_bound_once_by_the_chart(const std::string& ns, size_t n) {
    const auto bound = [&] {
      size_t b = 0;
      const json listed = api("GET", "/api/v1/namespaces/" + ns + "/pods").json_body();
      for (const json& p : listed["items"]) {
        b += p["spec"].value("nodeName", "").empty() ? 0 : 1;
      }
      return b;
    };
    ASSERT_TRUE(wait_for([&] { return bound() == n; }, 90))
        << bound() << " of " << n << " bound\n"
        << kubectl_ok("get pods -A -o wide") << kubectl_ok("describe pods -n " + ns) << log_text();
    std::cout << "$ kubectl get pods -n " << ns << " -o wide\n"
              << kubectl_ok("get pods -n " + ns + " -o wide") << "$ kubectl get pods -n "
              << kNamespace << " -o wide\n"
              << kubectl_ok("get pods -n " + kNamespace + " -o wide");
    const std::string sa = "system:serviceaccount:" + kNamespace + ":tessera-scheduler";
    std::map<std::string, int> binds;
    std::set<std::string> refused;  // "verb resource: the server's words", once each
    int requests = 0;
    for (const json& e : real_->audit()) {
      if (e["user"].value("username", "") != sa) continue;
      ++requests;
      const json ref = e.value("objectRef", json::object());
      const int code = e["responseStatus"].value("code", 0);
      if (code == 403) {
        refused.insert(e.value("verb", "") + " " + ref.value("apiGroup", "") + "/" +
                       ref.value("resource", "") + ": " + e["responseStatus"].value("message", ""));
      }
      if (ref.value("subresource", "") == "binding" && code == 201 &&
          e.value("stage", "") == "ResponseComplete") {
        ++binds[ref.value("namespace", "") + "/" + ref.value("name", "")];
      }
    }
    EXPECT_EQ(binds.size(), n) << requests << " requests of " << sa;
    for (const auto& [pod, count] : binds) EXPECT_EQ(count, 1) << pod;
    EXPECT_GT(requests, 0);
    // The audit sees every request of the ServiceAccount (reads too): RBAC refused none.
    EXPECT_EQ(refused, std::set<std::string>{}) << requests << " requests of " << sa;
    const std::string log = log_text();
    // As the client words a refusal ("HTTP 403"): a bare "403" also matches a port number.
    EXPECT_EQ(log.find("HTTP 403"), std::string::npos) << log;
    EXPECT_EQ(log.find("forbidden"), std::string::npos) << log;
  }

  std::string log_text() const { return read_text(log_); }
  std::string addr_file_, log_;
};

TEST_F(KubeRealHelm, TheDefaultChartInstalledSchedulesAGangWithItsOwnServiceAccount) {
  start_cluster(6);  // 48 GPUs: the default tree's guarantees (32 + 8 + 8)
  const Objects chart = install("");
  auto sched = run_as_deployment(chart, "tessera-scheduler-0");
  // The example gang: PodGroup bare-gang (minMember 4), four 8-GPU pods in team-a (queue team-a
  // of the ConfigMap's tree). Its namespace first, so that its default ServiceAccount exists.
  create_namespace("team-a");
  kubectl_ok("apply -f " + kManifests + "/examples/bare-pod-gang.yaml");
  expect_bound_once_by_the_chart("team-a", 4);
  EXPECT_TRUE(sched->running()) << log_text();
  // The queue tree it runs with is the ConfigMap's (team-a's 32-GPU guarantee holds the gang).
  EXPECT_TRUE(wait_for(
      [&] {
        return kubectl_ok("get pg -n team-a bare-gang -o jsonpath={.status.scheduled}") == "4";
      },
      30))
      << kubectl_ok("get pg -n team-a bare-gang -o yaml");
  // Two replicas elect a leader: this one holds the chart's Lease.
  EXPECT_TRUE(wait_for(
      [&] {
        return kubectl_ok("get lease tessera-scheduler -n " + kNamespace +
                          " -o jsonpath={.spec.holderIdentity}") == "tessera-scheduler-0";
      },
      30));
}

TEST_F(KubeRealHelm, EveryOptionOnIsAcceptedByTheServerAndItsQueuesTokenAndLeaseWork) {
  start_cluster(4);  // 32 GPUs: Queue research's guarantee of 16 fits
  // prometheus-operator's ServiceMonitor CRD, so the server validates the chart's against it.
  kubectl_ok("apply --server-side -f " + tool("servicemonitors.monitoring.coreos.com.yaml"));
  kubectl_ok(
      "wait --for condition=established --timeout=60s "
      "crd/servicemonitors.monitoring.coreos.com");
  const Objects chart = install("-f " + kEverything);
  EXPECT_EQ(kubectl_ok("get servicemonitor -n " + kNamespace + " -o name"),
            "servicemonitor.monitoring.coreos.com/tessera-scheduler\n");
  auto sched = run_as_deployment(chart, "tessera-scheduler-0");
  // A gang of the second scheduler name, in Queue nlp (under research, which admits team-a).
  create_namespace("team-a");
  create_group("team-a", "g", 4);
  for (int i = 0; i < 4; ++i) {
    json pod = pod_json("team-a", "g-" + std::to_string(i), 2, "g", 0, "tessera-gpu");
    pod["metadata"]["labels"][kQueueLabel] = "nlp";
    post_pod(pod);
  }
  expect_bound_once_by_the_chart("team-a", 4);
  // Its Queue's status, written through the chart's RBAC, says what it holds.
  EXPECT_TRUE(wait_for(
      [&] { return kubectl_ok("get queue nlp -o jsonpath={.status.allocatedGpus}") == "8"; }, 30))
      << kubectl_ok("get queues -o yaml");
  std::cout << "$ kubectl get queues\n" << kubectl_ok("get queues");
  EXPECT_EQ(kubectl_ok("get lease tessera-scheduler -n " + kNamespace +
                       " -o jsonpath={.spec.holderIdentity}"),
            "tessera-scheduler-0");
  // The ServiceMonitor's identity reads /metrics; no token gets 401.
  std::string addr;
  ASSERT_TRUE(wait_for(
      [&] {
        std::ifstream in(addr_file_);
        return static_cast<bool>(in >> addr);
      },
      30));
  httplib::Client http("http://" + addr);
  const auto anonymous = http.Get("/metrics");
  ASSERT_TRUE(anonymous);
  EXPECT_EQ(anonymous->status, 401);
  const auto scraped = http.Get(
      "/metrics", {{"Authorization", "Bearer " + token_of(kNamespace, "tessera-metrics")}});
  ASSERT_TRUE(scraped);
  EXPECT_EQ(scraped->status, 200) << scraped->body;
  EXPECT_NE(scraped->body.find("tessera_leader 1"), std::string::npos) << scraped->body;
  EXPECT_TRUE(sched->running()) << log_text();
}

}  // namespace
}  // namespace tessera::kube
