#include "kube_emulator/kubelet.h"

#include <cmath>

#include "kube_emulator/pods.h"

namespace kube_emulator {

namespace {
const std::string kPods = "/pods";
const std::string kNodes = "/nodes";
}  // namespace

std::optional<std::chrono::milliseconds> parse_go_duration(const std::string& s) {
  if (s.empty()) return std::nullopt;
  double total_ms = 0;
  size_t i = 0;
  bool any = false;
  while (i < s.size()) {
    size_t j = i;
    while (j < s.size() && ((s[j] >= '0' && s[j] <= '9') || s[j] == '.')) ++j;
    if (j == i) return std::nullopt;
    double v = 0;
    try {
      v = std::stod(s.substr(i, j - i));
    } catch (const std::exception&) {
      return std::nullopt;
    }
    size_t k = j;
    while (k < s.size() && std::isalpha(static_cast<unsigned char>(s[k]))) ++k;
    const std::string unit = s.substr(j, k - j);
    double mult = 0;
    if (unit.empty()) {
      if (any || k != s.size()) return std::nullopt;
      mult = 1000;  // plain seconds
    } else if (unit == "ms") {
      mult = 1;
    } else if (unit == "s") {
      mult = 1000;
    } else if (unit == "m") {
      mult = 60000;
    } else if (unit == "h") {
      mult = 3600000;
    } else if (unit == "us" || unit == "µs") {
      mult = 0.001;
    } else {
      return std::nullopt;
    }
    total_ms += v * mult;
    any = true;
    i = k;
  }
  return std::chrono::milliseconds(static_cast<int64_t>(std::llround(total_ms)));
}

Kubelet::Kubelet(Cluster& cluster, const KubeletOptions& opt) : cluster_(cluster), opt_(opt) {
  if (!opt_.enabled) return;
  cluster_.set_pod_observer([this](const ObjPtr& b, const ObjPtr& a) { on_pod(b, a); });
  cluster_.set_node_observer([this](const ObjPtr& b, const ObjPtr& a) { on_node(b, a); });
}

Kubelet::~Kubelet() {
  stop();
}

void Kubelet::start() {
  if (!opt_.enabled || thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = false;
  }
  thread_ = std::thread([this] { run(); });
  // Pods already bound (a loaded state file) resume where they were.
  std::lock_guard<std::mutex> lock(cluster_.store().mutex());
  use_.clear();
  for (const auto& [key, o] : cluster_.store().collection(kPods).items) on_pod(nullptr, o);
}

void Kubelet::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Kubelet::schedule(std::chrono::milliseconds delay, Action a, const std::string& key,
                       const std::string& uid) {
  std::lock_guard<std::mutex> lock(mu_);
  timers_.push(Timer{std::chrono::steady_clock::now() + delay, seq_++, a, key, uid});
  cv_.notify_all();
}

void Kubelet::account(const ObjPtr& before, const ObjPtr& after) {
  const auto running = [](const ObjPtr& o) {
    return o && string_at(o->j(), "status.phase") == "Running";
  };
  const bool was = running(before), is = running(after);
  if (!was && !is) return;
  // A pod's requests do not change while it runs (no in-place resize here), nor its node.
  if (was && is) return;
  const ObjPtr& o = is ? after : before;
  NodeUse& u = use_[string_at(o->j(), "spec.nodeName")];
  const int64_t sign = is ? 1 : -1;
  u.pods += sign;
  for (const auto& [k, v] : pod_requests(o->j())) u.requests[k] += sign * v;
}

void Kubelet::on_pod(const ObjPtr& before, const ObjPtr& after) {
  account(before, after);
  if (!after) return;
  const json& p = after->j();
  const std::string key =
      object_key(string_at(p, "metadata.namespace"), string_at(p, "metadata.name"));
  const std::string uid = string_at(p, "metadata.uid");
  const std::string node = string_at(p, "spec.nodeName");
  const bool deleting = p["metadata"].contains("deletionTimestamp");
  const std::string phase = string_at(p, "status.phase");
  if (!deleting && !node.empty() && phase == "Pending" &&
      (!before || string_at(before->j(), "spec.nodeName").empty())) {
    schedule(opt_.start_delay, Action::Start, key, uid);
  }
  if (!before && !deleting && phase == "Running") {  // loaded from a state file
    const json* ann = find_path(p, "metadata.annotations");
    const auto started = parse_rfc3339(string_at(p, "status.startTime"));
    for (const char* k :
         {"pod-complete.stage.kwok.x-k8s.io/delay", "tessera.io/emulator-run-seconds"}) {
      if (ann == nullptr || !ann->is_object() || !ann->contains(k) || !(*ann)[k].is_string())
        continue;
      if (const auto d = parse_go_duration((*ann)[k].get<std::string>())) {
        auto left = *d;
        if (started) {
          left -= std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - *started);
        }
        schedule(std::max(left, std::chrono::milliseconds(0)), Action::Complete, key, uid);
        break;
      }
    }
  }
  const auto grace_of = [](const json& j) {
    return j["metadata"].value("deletionGracePeriodSeconds", int64_t{-1});
  };
  if (deleting && (!before || !before->j()["metadata"].contains("deletionTimestamp") ||
                   grace_of(before->j()) != grace_of(p))) {
    const int64_t grace = std::max<int64_t>(grace_of(p), 0);
    std::chrono::milliseconds delay(grace * 1000);
    if (phase != "Running") {
      delay = std::chrono::milliseconds(0);
    } else if (const json* a = find_path(p, "metadata.annotations");
               a != nullptr && a->is_object() && a->contains("tessera.io/emulator-stop-seconds")) {
      if (const auto d =
              parse_go_duration((*a)["tessera.io/emulator-stop-seconds"].get<std::string>())) {
        delay = std::min(delay, *d);
      }
    }
    schedule(delay, Action::Remove, key, uid);
  }
}

void Kubelet::on_node(const ObjPtr& before, const ObjPtr& after) {
  if (!after) {  // pod GC: pods bound to a node that no longer exists go away
    const std::string node = string_at(before->j(), "metadata.name");
    const auto& idx = cluster_.store().collection(kPods).by_node;
    if (const auto it = idx.find(node); it != idx.end()) {
      for (const auto& key : it->second)
        schedule(std::chrono::milliseconds(0), Action::ForceRemove, key, "");
    }
    waiting_.erase(node);
    return;
  }
  const std::string node = string_at(after->j(), "metadata.name");
  const bool ready = condition_status(after->j(), "Ready") == "True";
  const bool was_ready = before && condition_status(before->j(), "Ready") == "True";
  if (ready && !was_ready) {
    const auto it = waiting_.find(node);
    if (it != waiting_.end()) {
      for (const auto& key : it->second)
        schedule(std::chrono::milliseconds(0), Action::Start, key, "");
      waiting_.erase(it);
    }
  }
}

void Kubelet::run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    if (timers_.empty()) {
      cv_.wait(lock);
      continue;
    }
    const auto now = std::chrono::steady_clock::now();
    if (timers_.top().at > now) {
      cv_.wait_until(lock, timers_.top().at);
      continue;
    }
    std::vector<Timer> due;
    while (!timers_.empty() && timers_.top().at <= now && due.size() < 4096) {
      due.push_back(timers_.top());
      timers_.pop();
    }
    lock.unlock();
    for (const auto& t : due) {
      // The store lock per pod, not per batch: API requests (binds) wait for one pod's
      // start at most, not for thousands.
      std::lock_guard<std::mutex> store_lock(cluster_.store().mutex());
      switch (t.action) {
        case Action::Start:
          start_pod(t.key, t.uid);
          break;
        case Action::Complete:
          complete_pod(t.key, t.uid);
          break;
        case Action::Remove:
          remove_pod(t.key, t.uid, false);
          break;
        case Action::ForceRemove:
          remove_pod(t.key, t.uid, true);
          break;
      }
    }
    lock.lock();
  }
}

void Kubelet::start_pod(const std::string& key, const std::string& uid) {
  ObjPtr pod = cluster_.get_locked(kPods, key);
  if (!pod) return;
  const json& p = pod->j();
  if ((!uid.empty() && string_at(p, "metadata.uid") != uid) ||
      p["metadata"].contains("deletionTimestamp") || string_at(p, "status.phase") != "Pending") {
    return;
  }
  const std::string node_name = string_at(p, "spec.nodeName");
  ObjPtr node = cluster_.get_locked(kNodes, node_name);
  if (!node) return;  // no kubelet for a node that does not exist
  if (condition_status(node->j(), "Ready") != "True") {
    waiting_[node_name].insert(key);
    return;
  }
  // Kubelet admission: the node's admitted (running) pods plus this one must fit.
  const NodeUse& use = use_[node_name];
  const int64_t pods_used = use.pods;
  Resources used = use.requests;
  Resources alloc;
  if (const json* a = find_path(node->j(), "status.allocatable"); a != nullptr && a->is_object()) {
    for (const auto& [k, v] : a->items()) {
      if (v.is_string()) {
        if (const auto q = parse_quantity_milli(v.get<std::string>())) alloc[k] = *q;
      }
    }
  }
  std::string reason, message;
  if (alloc.count("pods") != 0 && (pods_used + 1) * 1000 > alloc["pods"]) {
    reason = "OutOfpods";
    message =
        "Node didn't have enough resource: pods, requested: 1, used: " + std::to_string(pods_used) +
        ", capacity: " + std::to_string(alloc["pods"] / 1000);
  }
  const Resources req = pod_requests(p);
  for (const auto& [res, amount] : req) {
    if (!reason.empty() || amount <= 0) continue;
    const int64_t cap = alloc.count(res) != 0 ? alloc[res] : 0;
    if (used[res] + amount > cap) {
      const bool cpu = res == "cpu";
      const auto show = [&](int64_t m) { return std::to_string(cpu ? m : milli_to_units_ceil(m)); };
      reason = "OutOf" + res;
      message = "Node didn't have enough resource: " + res + ", requested: " + show(amount) +
                ", used: " + show(used[res]) + ", capacity: " + show(cap);
    }
  }
  json nw = p;
  const std::string now = rfc3339(Clock::now());
  if (!reason.empty()) {
    nw["status"]["phase"] = "Failed";
    nw["status"]["reason"] = reason;
    nw["status"]["message"] = "Pod was rejected: " + message;
    nw["status"]["startTime"] = now;
    cluster_.put_locked(kPods, key, std::move(nw));
    return;
  }
  std::string host_ip;
  if (const json* a = find_path(node->j(), "status.addresses"); a != nullptr && a->is_array()) {
    for (const auto& addr : *a) {
      if (addr.value("type", "") == "InternalIP") host_ip = addr.value("address", "");
    }
  }
  std::string cidr = string_at(node->j(), "spec.podCIDR", "10.244.0.0/24");
  cidr = cidr.substr(0, cidr.rfind('.'));
  const uint32_t n = next_ip_[node_name]++;
  const std::string pod_ip = cidr + "." + std::to_string(2 + n % 250);
  json& st = nw["status"];
  st["phase"] = "Running";
  st["startTime"] = now;
  if (!host_ip.empty()) {
    st["hostIP"] = host_ip;
    st["hostIPs"] = {{{"ip", host_ip}}};
  }
  st["podIP"] = pod_ip;
  st["podIPs"] = {{{"ip", pod_ip}}};
  for (const char* c :
       {"PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"}) {
    set_condition(nw, c, "True");
  }
  json statuses = json::array();
  uint64_t h = std::hash<std::string>{}(uid + key);
  for (const auto& c : p["spec"]["containers"]) {
    char id[32];
    std::snprintf(id, sizeof id, "%016llx", static_cast<unsigned long long>(h++));
    statuses.push_back({{"name", c.value("name", "")},
                        {"image", c.value("image", "")},
                        {"imageID", c.value("image", "")},
                        {"containerID", std::string("containerd://") + id + id},
                        {"ready", true},
                        {"started", true},
                        {"restartCount", 0},
                        {"lastState", json::object()},
                        {"state", {{"running", {{"startedAt", now}}}}}});
  }
  st["containerStatuses"] = statuses;
  const std::string pod_uid = string_at(p, "metadata.uid");
  cluster_.put_locked(kPods, key, std::move(nw));
  const json* ann = find_path(p, "metadata.annotations");
  if (ann != nullptr && ann->is_object()) {
    for (const char* k :
         {"pod-complete.stage.kwok.x-k8s.io/delay", "tessera.io/emulator-run-seconds"}) {
      const auto it = ann->find(k);
      if (it == ann->end() || !it->is_string()) continue;
      if (const auto d = parse_go_duration(it->get<std::string>())) {
        schedule(*d, Action::Complete, key, pod_uid);
        break;
      }
    }
  }
}

void Kubelet::complete_pod(const std::string& key, const std::string& uid) {
  ObjPtr pod = cluster_.get_locked(kPods, key);
  if (!pod || string_at(pod->j(), "metadata.uid") != uid) return;
  const json& p = pod->j();
  if (string_at(p, "status.phase") != "Running" || p["metadata"].contains("deletionTimestamp")) {
    return;
  }
  int exit_code = 0;
  if (const json* a = find_path(p, "metadata.annotations"); a != nullptr && a->is_object()) {
    if (const auto it = a->find("tessera.io/emulator-exit-code");
        it != a->end() && it->is_string()) {
      exit_code = std::atoi(it->get<std::string>().c_str());
    }
  }
  json nw = p;
  const std::string now = rfc3339(Clock::now());
  nw["status"]["phase"] = exit_code == 0 ? "Succeeded" : "Failed";
  set_condition(nw, "Ready", "False", "PodCompleted");
  set_condition(nw, "ContainersReady", "False", "PodCompleted");
  set_condition(nw, "PodReadyToStartContainers", "False");
  for (auto& cs : nw["status"]["containerStatuses"]) {
    const std::string started = string_at(cs, "state.running.startedAt", now);
    cs["ready"] = false;
    cs["started"] = false;
    cs["state"] = {{"terminated",
                    {{"exitCode", exit_code},
                     {"reason", exit_code == 0 ? "Completed" : "Error"},
                     {"startedAt", started},
                     {"finishedAt", now},
                     {"containerID", cs.value("containerID", "")}}}};
  }
  cluster_.put_locked(kPods, key, std::move(nw));
}

void Kubelet::remove_pod(const std::string& key, const std::string& uid, bool force) {
  ObjPtr pod = cluster_.get_locked(kPods, key);
  if (!pod || (!uid.empty() && string_at(pod->j(), "metadata.uid") != uid)) return;
  const json& p = pod->j();
  if (!force && !p["metadata"].contains("deletionTimestamp")) return;
  const json* fin = find_path(p, "metadata.finalizers");
  if (fin != nullptr && fin->is_array() && !fin->empty()) {
    // The kubelet's final delete (grace 0) waits for the finalizers.
    json nw = p;
    nw["metadata"]["deletionGracePeriodSeconds"] = 0;
    if (!nw["metadata"].contains("deletionTimestamp")) {
      nw["metadata"]["deletionTimestamp"] = rfc3339(Clock::now());
    }
    if (nw != p) cluster_.put_locked(kPods, key, std::move(nw));
    return;
  }
  cluster_.erase_locked(kPods, key);
}

}  // namespace kube_emulator
