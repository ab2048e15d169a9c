// What the cluster is told while pods wait: each waiting pod's PodScheduled=False condition and
// FailedScheduling event, PodGroup status, and the scheduler's other Events.
//
// A pod's reason is written when its kind changes, once the new kind has held reason_delay (a
// pod placed within it is told nothing), and otherwise at most every event_interval: the words
// carry live numbers that change with every bind elsewhere. A group's status is written once it
// has held reason_delay. Writes go out on two rate-limited queues, Events on their own, so that
// a flood of FailedScheduling never delays a condition or a Scheduled event.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>

#include "backend/kube/kube_client.h"
#include "control/kube/cluster_model.h"
#include "control/kube/event_journal.h"
#include "control/kube/work_queue.h"

namespace tessera::kube {

struct StatusWriterOptions {
  int workers = 2;
  double qps = 200;  // writes a second (Events on their own queue: half of it)
  double event_interval = 300;
  double reason_delay = 1;
  std::string reporting_instance = "tessera";  // Events' reportingInstance
};

class StatusWriter {
 public:
  // `now`: wall-clock seconds, for the times written (conditions, Events).
  StatusWriter(Client& client, StatusWriterOptions opt, std::function<double()> now);
  StatusWriter(const StatusWriter&) = delete;
  StatusWriter& operator=(const StatusWriter&) = delete;

  void start();
  void stop();  // waits for the writes queued

  // Why a gang waits: the kind of reason (a change of kind is said at once) and the words.
  struct Why {
    std::string kind, text;
  };
  // Tells each waiting gang's pending pods why they wait.
  void write_reasons(const ClusterModel& model, const std::map<const Gang*, Why>& why, double t);
  // Each PodGroup's status; `done`: members seen finishing, by group key (succeeded, failed).
  void write_group_status(const ClusterModel& model,
                          const std::map<std::string, std::pair<int32_t, int32_t>>& done, double t);
  void forget_pod(const std::string& uid);  // a pod gone: nothing more to say to it

  // An events.k8s.io/v1 Event about the pod, and one posted on the status queue.
  nlohmann::json event_body(const PodInfo& p, const std::string& type, const std::string& reason,
                            const std::string& action, const std::string& note);
  void post_event(const PodInfo& p, const std::string& type, const std::string& reason,
                  const std::string& action, const std::string& note);
  // A Normal Event about a batch/v1 Job (a suspended Job admitted), in its gang's journal too.
  void post_job_event(const PodGroupInfo& job, const std::string& reason, const std::string& action,
                      const std::string& note);

  // Every Event made, by gang: the read API's job history.
  const EventJournal& journal() const { return journal_; }
  uint64_t events() const { return events_made_.load(); }
  uint64_t status_writes() const { return status_writes_.load(); }
  uint64_t api_errors() const { return api_errors_.load(); }

 private:
  // An events.k8s.io/v1 Event about the object `regarding` (an ObjectReference), named after it.
  nlohmann::json event_about(const nlohmann::json& regarding, const std::string& type,
                             const std::string& reason, const std::string& action,
                             const std::string& note);
  // What a waiting pod was last told, and a newer reason not yet said.
  struct Written {
    std::string kind, message;
    double at = 0;
    std::string held_kind, held_message;  // said once it has held reason_delay
    double held_since = 0;
  };
  struct GroupWritten {
    std::string sent;  // the status JSON last written
    std::string held;  // a newer one, written once it has held reason_delay
    double held_since = 0, first_held = 0;
  };
  // Writes why the pod waits: its PodScheduled condition (unless it says so already) and a
  // FailedScheduling event; records it in w.
  void say_why(const PodRecord& r, Written& w, const std::string& kind, const std::string& msg,
               double t);
  void post(const PodInfo& p, nlohmann::json body, WorkQueue& queue);

  Client& client_;
  StatusWriterOptions opt_;
  std::function<double()> now_;
  std::unique_ptr<WorkQueue> status_, events_;
  std::unordered_map<std::string, Written> written_;  // by pod uid
  std::set<std::string> held_;                        // pods with a reason not yet said
  std::map<std::string, GroupWritten> group_status_;  // by podgroup key
  EventJournal journal_;
  std::atomic<uint64_t> events_made_{0}, status_writes_{0}, api_errors_{0};
  std::atomic<int64_t> last_event_nanos_{0};  // names events uniquely
};

}  // namespace tessera::kube
