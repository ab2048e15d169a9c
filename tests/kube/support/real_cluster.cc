#include "kube/support/real_cluster.h"

#include <fcntl.h>
#include <httplib.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

#include "backend/kube/kube_config.h"
#include "backend/kube/quantity.h"

namespace tessera::kube::testing {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string tail(const std::string& text, size_t n = 3000) {
  return text.size() <= n ? text : text.substr(text.size() - n);
}

int pod_gpus(const json& pod) {
  int64_t milli = 0;
  for (const json& c : pod["spec"].value("containers", json::array())) {
    const json res = c.value("resources", json::object());
    const json limits = res.value("limits", json::object());
    const json requests = res.value("requests", json::object());
    const json& q = limits.contains("nvidia.com/gpu") ? limits : requests;
    if (q.contains("nvidia.com/gpu")) {
      milli += parse_quantity_milli(q["nvidia.com/gpu"].get<std::string>());
    }
  }
  return static_cast<int>(milli / 1000);
}

}  // namespace

std::string RealCluster::binary() {
  const fs::path p = fs::path(TESSERA_SOURCE_DIR) / "tools/testcluster/bin/testcluster";
  if (::access(p.c_str(), X_OK) != 0) {
    throw std::runtime_error(p.string() +
                             " is missing: scripts/setup.sh builds the real control plane "
                             "the kube tests run against (Go 1.26 and its module proxy)");
  }
  return p.string();
}

std::string RealCluster::workloads_dir() {
  const fs::path p = fs::path(TESSERA_SOURCE_DIR) / "tools/workloads/bin";
  if (::access((p / "kuberay/controller").c_str(), X_OK) != 0) {
    throw std::runtime_error(
        p.string() +
        " is missing: scripts/setup.sh builds the workload controllers "
        "(JobSet, LeaderWorkerSet, training-operator, KubeRay) from their Go modules");
  }
  return p.string();
}

RealCluster::RealCluster(fs::path dir, RealClusterOptions opt)
    : dir_(std::move(dir)), opt_(std::move(opt)) {}

RealCluster::~RealCluster() {
  stop();
}

void RealCluster::start() {
  const std::string bin = binary();
  fs::create_directories(dir_);
  std::vector<std::string> args = {bin, "up", "--dir", dir_.string()};
  if (!opt_.watch_cache) args.push_back("--watch-cache=false");
  if (!opt_.kwok) args.push_back("--kwok=false");
  if (opt_.no_fsync) args.push_back("--etcd-unsafe-no-fsync");
  for (const std::string& a : opt_.apiserver_args) args.push_back("--apiserver-arg=" + a);
  for (const std::string& a : opt_.controller_manager_args) {
    args.push_back("--controller-manager-arg=" + a);
  }
  for (const std::string& a : opt_.kwok_args) args.push_back("--kwok-arg=" + a);
  if (opt_.workloads) args.push_back("--workloads=" + workloads_dir());
  const fs::path out = dir_ / "up.out";
  const pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    // The cluster goes when the test does, even when the test crashes.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(1);
    const int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(bin.c_str(), argv.data());
    ::_exit(127);
  }
  const auto until = Clock::now() + std::chrono::minutes(3);
  while (!fs::exists(dir_ / "cluster.json")) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = 0;
      throw std::runtime_error("testcluster up exited: " + tail(read_file(out)));
    }
    if (Clock::now() > until) {
      stop();
      throw std::runtime_error("testcluster up not ready after 3 minutes: " + tail(read_file(out)));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const json info = json::parse(read_file(dir_ / "cluster.json"));
  server_ = info["server"];
  etcd_ = info["etcd"];
  ClientOptions copt;
  copt.user_agent = "tessera-test";  // the audit log tells the test's writes from the scheduler's
  client_ = std::make_unique<Client>(load_kubeconfig(kubeconfig_path()), copt);
  watcher_ = std::thread([this] { watch_pods(); });
}

void RealCluster::stop() {
  stop_watch_ = true;
  if (watcher_.joinable()) watcher_.join();
  if (pid_ > 0) {
    ::kill(pid_, SIGTERM);
    const auto until = Clock::now() + std::chrono::seconds(30);
    int status = 0;
    while (::waitpid(pid_, &status, WNOHANG) == 0) {
      if (Clock::now() > until) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    pid_ = 0;
  }
}

kube_emulator::Reply RealCluster::request(const std::string& method, const std::string& path,
                                          const std::string& body,
                                          const std::string& content_type) {
  const json parsed = body.empty() ? json(nullptr) : json::parse(body, nullptr, false);
  Response r;
  if (method == "GET") {
    r = client_->get(path);
  } else if (method == "POST") {
    r = client_->post(path, parsed);
  } else if (method == "PUT") {
    r = client_->put(path, parsed);
  } else if (method == "DELETE") {
    r = client_->del(path, parsed);
  } else if (method == "PATCH") {
    const PatchType type = content_type == "application/json-patch+json" ? PatchType::kJsonPatch
                           : content_type == "application/strategic-merge-patch+json"
                               ? PatchType::kStrategicMerge
                               : PatchType::kMerge;
    r = client_->patch(path, parsed, type);
  } else {
    throw std::invalid_argument("RealCluster::request: method " + method);
  }
  return {.status = r.status, .content_type = "application/json", .body = r.body};
}

std::vector<nlohmann::json> RealCluster::audit() {
  std::vector<json> events;
  std::ifstream in(dir_ / "audit.log");
  std::string line;
  while (std::getline(in, line)) {
    json e = json::parse(line, nullptr, false);
    if (!e.is_discarded()) events.push_back(std::move(e));  // a line still being written
  }
  return events;
}

std::vector<kube_emulator::BindRecord> RealCluster::bindings() {
  std::vector<kube_emulator::BindRecord> out;
  for (const json& e : audit()) {
    const json ref = e.value("objectRef", json::object());
    if (e.value("verb", "") != "create" || ref.value("resource", "") != "pods" ||
        ref.value("subresource", "") != "binding" || e.value("stage", "") != "ResponseComplete") {
      continue;
    }
    kube_emulator::BindRecord b;
    b.time = e.value("requestReceivedTimestamp", "");
    b.ns = ref.value("namespace", "");
    b.name = ref.value("name", "");
    const json obj = e.value("requestObject", json::object());
    const json meta = obj.value("metadata", json::object());
    b.uid = meta.value("uid", b.ns + "/" + b.name);
    b.node = obj.value("target", json::object()).value("name", "");
    b.annotations = meta.value("annotations", json::object());
    const json st = e.value("responseStatus", json::object());
    b.code = st.value("code", 0);
    b.message = st.value("message", "");
    out.push_back(std::move(b));
  }
  return out;
}

void RealCluster::add_nodes(const std::vector<kube_emulator::NodePool>& pools) {
  std::vector<json> nodes = kube_emulator::make_nodes(pools, opt_.layout, nodes_made_);
  for (json& n : nodes) {
    n["metadata"]["annotations"]["kwok.x-k8s.io/node"] = "fake";
    const std::string name = n["metadata"]["name"];
    const auto r = request("POST", "/api/v1/nodes", n.dump());
    if (r.status != 201) throw std::runtime_error("node " + name + ": " + r.body);
    std::lock_guard lock(mu_);
    node_gpus_[name] = static_cast<int>(
        parse_quantity_milli(n["status"]["capacity"].value("nvidia.com/gpu", "0")) / 1000);
  }
  nodes_made_ += static_cast<int>(nodes.size());
  if (!opt_.kwok) return;
  // KWOK takes them over: Ready, with a lease.
  const auto until = Clock::now() + std::chrono::seconds(60);
  while (Clock::now() < until) {
    int ready = 0;
    const json list = json::parse(request("GET", "/api/v1/nodes").body, nullptr, false);
    for (const json& n : list.value("items", json::array())) {
      for (const json& c : n["status"].value("conditions", json::array())) {
        ready += c.value("type", "") == "Ready" && c.value("status", "") == "True";
      }
    }
    if (ready >= nodes_made_) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  throw std::runtime_error("KWOK did not make the nodes Ready in 60 s; see " +
                           (dir_ / "logs/kwok.log").string());
}

int RealCluster::kubectl(const std::string& args, std::string* out) {
  const std::string cmd = "HOME=" + dir_.string() + " " + binary() + " kubectl --kubeconfig " +
                          kubeconfig_path() + " " + args + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return -1;
  std::string text;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) text.append(buf, n);
  const int status = ::pclose(p);
  if (out) *out = text;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::vector<std::string> RealCluster::overcommits() {
  std::lock_guard lock(mu_);
  return overcommits_;
}

void RealCluster::watch_pods() {
  ClientOptions copt;
  copt.user_agent = "tessera-test-ledger";
  Client watch_client(load_kubeconfig(kubeconfig_path()), copt);
  // Every change of a pod, in the order the API server committed them: after each, no node's
  // unfinished pods (terminating ones included, as a kubelet counts them) may ask for more
  // GPUs than it has.
  auto apply = [&](const std::string& type, const json& pod) {
    const std::string uid = pod["metadata"].value("uid", "");
    const std::string node = pod["spec"].value("nodeName", "");
    const std::string phase = pod["status"].value("phase", "");
    std::lock_guard lock(mu_);
    if (type == "DELETED" || node.empty() || phase == "Succeeded" || phase == "Failed") {
      pod_gpus_.erase(uid);
      return;
    }
    pod_gpus_[uid] = {node, pod_gpus(pod)};
    int held = 0;
    for (const auto& [u, ng] : pod_gpus_) held += ng.first == node ? ng.second : 0;
    const auto cap = node_gpus_.find(node);
    if (cap != node_gpus_.end() && held > cap->second) {
      overcommits_.push_back(node + ": " + std::to_string(held) + " GPUs of " +
                             std::to_string(cap->second) + " after " +
                             pod["metadata"].value("namespace", "") + "/" +
                             pod["metadata"].value("name", "") + " " + phase);
    }
  };
  while (!stop_watch_) {
    const Response list = watch_client.get("/api/v1/pods");
    if (!list.ok()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      continue;
    }
    const json l = list.json();
    {
      std::lock_guard lock(mu_);
      pod_gpus_.clear();
    }
    for (const json& p : l.value("items", json::array())) apply("ADDED", p);
    const std::string rv = l["metadata"].value("resourceVersion", "");
    watch_client.watch(
        "/api/v1/pods?watch=1&timeoutSeconds=30&resourceVersion=" + rv,
        [&](const WatchEvent& ev) {
          if (ev.type == "ADDED" || ev.type == "MODIFIED" || ev.type == "DELETED") {
            apply(ev.type, ev.object);
          }
          return ev.type != "ERROR";
        },
        stop_watch_);
  }
}

pid_t RealCluster::apiserver_pid() const {
  return component_pid("kube-apiserver");
}

pid_t RealCluster::component_pid(const std::string& name) const {
  std::ifstream in(dir_ / "pids" / name);
  pid_t pid = 0;
  in >> pid;
  return pid > 0 && ::kill(pid, 0) == 0 ? pid : 0;
}

void RealCluster::compact_etcd() {
  httplib::Client etcd(etcd_);
  // The range answer's header carries the current revision.
  const auto range = etcd.Post("/v3/kv/range", R"({"key":"AA==","limit":1})", "application/json");
  if (!range || range->status != 200) throw std::runtime_error("etcd range failed");
  const std::string rev = json::parse(range->body)["header"].value("revision", "0");
  const auto c = etcd.Post("/v3/kv/compaction", json{{"revision", rev}, {"physical", true}}.dump(),
                           "application/json");
  if (!c || c->status != 200) {
    throw std::runtime_error("etcd compaction failed: " + (c ? c->body : "no answer"));
  }
}

bool RealCluster::wait_ready(double seconds) {
  const auto until = Clock::now() + std::chrono::duration<double>(seconds);
  while (Clock::now() < until) {
    if (client_->get("/readyz").status == 200) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

}  // namespace tessera::kube::testing
