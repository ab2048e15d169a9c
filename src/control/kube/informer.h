// The scheduler's view in: list+watch of Nodes, Pods (those not finished), PodGroups (both
// scheduler-plugins' and Volcano's) and the workloads whose pods form groups (Jobs, JobSets,
// RayClusters), a custom resource skipped while its CRD is not installed, each
// parsed on its own watch thread and queued in an Inbox for the scheduler thread, which alone
// applies them to its ClusterModel. The API workers queue bind answers in the same Inbox, so
// one wait wakes the scheduler thread for either.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "backend/kube/kube_client.h"
#include "backend/kube/reflector.h"
#include "control/kube/kube_objects.h"
#include "control/kube/queue_objects.h"

namespace tessera::kube {

class Inbox {
 public:
  enum class Kind { kNode, kPod, kGroup, kVolcanoGroup, kJob, kJobSet, kRayCluster, kQueue };
  // The group API a group kind's objects are (PodGroups and the workloads that own pods);
  // kNone otherwise.
  static GroupApi group_api(Kind k);
  // An object added, changed or removed, or the end of a (re-)list.
  struct Event {
    Kind kind = Kind::kNode;
    bool removed = false;
    std::variant<std::monostate, NodeInfo, PodInfo, PodGroupInfo, QueueObject> object;
    std::string key;                                      // node name, pod uid, PodGroupInfo::key()
    std::shared_ptr<const std::set<std::string>> retain;  // a list ended: keep only these keys
    double at = 0;                                        // wall-clock seconds it was parsed
  };
  // The answer to one member's Binding of a bind attempt.
  struct BindResult {
    uint64_t attempt = 0;
    size_t member = 0;
    int status = 0;
    std::string error;
  };

  void push(Event e);
  void push(BindResult r);
  // Waits until something is queued, `stop` is set or `timeout_s` passes.
  void wait(double timeout_s, const std::atomic<bool>& stop);
  void wake();  // a wait() returns now (to see `stop`)
  std::vector<Event> take_events();
  std::vector<BindResult> take_results();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Event> events_;
  std::vector<BindResult> results_;
};

// Runs one Reflector per watched collection, each on its own thread, until `stop`.
class Informer {
 public:
  // `now`: wall-clock seconds, stamped on each event as it is parsed.
  Informer(Client& client, Inbox& inbox, std::function<double()> now);
  ~Informer();
  Informer(const Informer&) = delete;
  Informer& operator=(const Informer&) = delete;

  // `queue_objects`: watch Tessera's Queue objects too (--queues-from crd).
  void start(const std::atomic<bool>& stop, bool queue_objects = false);
  void join();  // after `stop` is set

  struct Stats {
    uint64_t relists = 0, reconnects = 0;
    std::string errors;  // each watch's last error, a line each
  };
  Stats stats() const;

 private:
  class Handler;
  Client& client_;
  Inbox& inbox_;
  std::function<double()> now_;
  std::vector<std::unique_ptr<Handler>> handlers_;
  std::vector<std::unique_ptr<Reflector>> reflectors_;
  std::vector<std::thread> threads_;
};

}  // namespace tessera::kube
