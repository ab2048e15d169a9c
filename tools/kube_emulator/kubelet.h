// A KWOK-style fake kubelet for every node: pods bound to a Ready node pass kubelet admission
// (requests of the node's running pods against status.allocatable; over-commit fails the pod
// with reason OutOf<resource>) and become Running after a start delay; they succeed after the
// duration in annotation pod-complete.stage.kwok.x-k8s.io/delay (or
// tessera.io/emulator-run-seconds); terminating pods are removed after their grace period
// (or tessera.io/emulator-stop-seconds, the time the container takes to exit on SIGTERM).
// Pods of a deleted node are removed (pod garbage collector).
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <queue>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "kube_emulator/cluster.h"

namespace kube_emulator {

struct KubeletOptions {
  bool enabled = true;
  std::chrono::milliseconds start_delay{100};  // bind -> Running
};

// Parses "10s", "500ms", "1m30s", "2h" or plain seconds ("2.5"); nullopt when malformed.
std::optional<std::chrono::milliseconds> parse_go_duration(const std::string& s);

class Kubelet {
 public:
  Kubelet(Cluster& cluster, const KubeletOptions& opt);
  ~Kubelet();
  void start();
  void stop();

 private:
  enum class Action { Start, Complete, Remove, ForceRemove };
  struct Timer {
    std::chrono::steady_clock::time_point at;
    uint64_t seq;
    Action action;
    std::string key, uid;
    bool operator>(const Timer& o) const { return at != o.at ? at > o.at : seq > o.seq; }
  };
  // Observers, called with the store lock held.
  void on_pod(const ObjPtr& before, const ObjPtr& after);
  void on_node(const ObjPtr& before, const ObjPtr& after);
  // Keeps `use_` current for a pod change.
  void account(const ObjPtr& before, const ObjPtr& after);
  void schedule(std::chrono::milliseconds delay, Action a, const std::string& key,
                const std::string& uid);
  void run();
  // With the store lock held:
  void start_pod(const std::string& key, const std::string& uid);
  void complete_pod(const std::string& key, const std::string& uid);
  void remove_pod(const std::string& key, const std::string& uid, bool force);

  Cluster& cluster_;
  KubeletOptions opt_;
  std::mutex mu_;  // timers (leaf lock: never held while taking the store lock)
  std::condition_variable cv_;
  std::priority_queue<Timer, std::vector<Timer>, std::greater<Timer>> timers_;
  uint64_t seq_ = 0;
  bool stopping_ = false;
  std::thread thread_;
  // Guarded by the store lock: pods waiting for their node to be Ready; IPs handed out.
  std::unordered_map<std::string, std::set<std::string>> waiting_;
  std::unordered_map<std::string, uint32_t> next_ip_;
  // Guarded by the store lock. Invariant: use_[node] is the sum of the requests (and the count)
  // of the Running pods bound to node, so admission need not walk the node's pods.
  struct NodeUse {
    std::map<std::string, int64_t> requests;
    int64_t pods = 0;
  };
  std::unordered_map<std::string, NodeUse> use_;
};

}  // namespace kube_emulator
