// `tessera kube`: the Kubernetes scheduler on the engine. Kubernetes owns the pods; Tessera
// only decides (DESIGN.md, "The Kubernetes scheduler"):
//
//   Informer (list+watch Pods, Nodes, PodGroups) -> Inbox -> ClusterModel (incremental)
//     -> engine cycle (schedule_cycle, as simulate and serve) -> Decisions
//     -> binder (every member of a gang, in parallel, at most once per pod)
//     -> evictor (whole gangs, DisruptionTarget then the Eviction API with the checkpoint grace)
//     -> StatusWriter (PodScheduled=False + reason, Events, PodGroup status), rate-limited
//   The read API's views (read_views.cc) are built under the model's lock.
//
// Threads: one reflector thread per watched collection parses objects and queues them; the
// scheduler thread owns the model (applies queued events, runs cycles, handles bind results);
// pools of workers talk to the API server. The model's mutex is held by the scheduler thread
// while it works and by the read API while it builds a view.
//
// Only the leader (with --leader-elect) binds, evicts and writes status; a standby keeps its
// cache warm so that it can take over at once.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "backend/kube/kube_client.h"
#include "control/cycle_driver.h"
#include "control/dashboard_samples.h"
#include "control/kube/cluster_model.h"
#include "control/kube/informer.h"
#include "control/kube/leader_elector.h"
#include "control/kube/power.h"
#include "control/kube/status_writer.h"
#include "control/kube/usage_store.h"
#include "control/kube/work_queue.h"
#include "control/read_model.h"
#include "engine/decayed_usage.h"
#include "engine/goodput_allocation.h"
#include "engine/goodput_model.h"
#include "engine/pending_queue.h"
#include "engine/policy.h"

namespace tessera::kube {

struct SchedulerOptions {
  ModelOptions model;
  std::string policy = "fair";
  uint64_t seed = 0;
  double checkpoint_grace = 30;  // eviction grace for pods that name none (seconds)
  bool leader_elect = false;
  LeaseOptions lease;
  int bind_workers = 48;
  double queue_status_interval = 2;   // Queue objects' status written at most this often (s)
  int action_workers = 4;             // evictions, DisruptionTarget conditions
  int status_workers = 2;             // pod conditions, events, PodGroup status
  double status_qps = 200;            // at most this many status writes a second
  double min_cycle_interval = 0.005;  // batch events arriving together
  double max_cycle_interval = 1.0;    // a cycle at least this often (timeouts, retries)
  double gang_timeout = 30;           // a gang partly bound this long has its bound members evicted
  // A waiting pod's condition and FailedScheduling event are rewritten when the kind of reason
  // changes, else at most this often.
  double event_interval = 300;
  // A new reason is written once it has held this long (seconds): pods placed sooner (a
  // gang's binds in flight, its pods still being created) get no condition and no event.
  double reason_delay = 1;
  // Waiting gangs are kept in a queue between cycles, and a cycle stops once nothing more can
  // start: a gang gets the engine's reason when it enters the queue (or changes), and every
  // this often one cycle gives every waiting gang its reason anew. 0: every cycle.
  double reason_refresh = 30;
  std::string reporting_instance = "tessera";  // Events' reportingInstance
  // Long-term usage (when the queue tree sets fairness.half_life) is saved this often, and on
  // the way out, to ConfigMap <lease.name>-usage in lease.ns; 0: kept in memory only.
  double usage_save_interval = 60;
  // The dashboard's history (GET /v1/history): a sample this often (<= 0: none), kept this
  // long, in memory (a restart starts it again).
  double history_interval = 10;
  double history_window = 86400;
  // Power policies (control/kube/power.h; docs/kubernetes.md, "Power and energy").
  PowerOptions power;
  // --policy goodput (docs/kubernetes.md, "Adaptive training"): seconds between goodput rounds
  // (a round also runs at the next cycle when an adaptive group waits that no round has
  // planned), and how they weigh groups. The report tokens derive from a Secret
  // (<lease.name>-report in lease.ns), created by the first leader that needs it.
  double goodput_round = 60;
  // A new adaptive group is first planned once none of its pods has arrived for this long (a
  // controller creates them in turn; sized by the few that exist, it would be restarted as soon
  // as the rest arrived).
  double adaptive_settle = 1.0;
  GoodputAllocationOptions goodput;
  // Data locality (docs/data.md): a gang whose pods name a dataset (tessera.io/dataset) goes to
  // nodes labelled as holding it when it fits there, and waits up to this long (from its pods'
  // creation) for them before going elsewhere (reason DataLocality).
  double locality_wait = 0;
  // Pre-staging: at most this many nodes asked at once (annotation stage.data.tessera.io/NAME)
  // to copy a waiting gang's dataset ahead, the nodes with the most free GPUs first; 0: none.
  int prestage_datasets = 0;
};

// Counters for /metrics beyond the service's.
struct KubeMetrics {
  uint64_t binds_ok = 0, binds_failed = 0, binds_conflict = 0;
  uint64_t evictions = 0, status_writes = 0, events = 0, api_errors = 0;
  uint64_t gang_rollbacks = 0;       // gangs whose bound members were evicted after a failed bind
  uint64_t power_limit_patches = 0;  // running pods' power-limit annotations changed
  uint64_t stage_requests = 0;       // nodes asked to stage a waiting gang's dataset
  std::vector<double> bind_bucket_bounds;    // create -> bind latency, seconds
  std::vector<uint64_t> bind_bucket_counts;  // cumulative
  double bind_latency_sum = 0;
  uint64_t relists = 0, reconnects = 0;
  uint64_t throttled = 0;    // requests answered 429 (or 5xx with Retry-After) and sent again
  std::string watch_errors;  // each watch's last failure ("" when none), for logs and tests
  bool leading = false;
};

class KubeScheduler final : public ReadModel {
 public:
  KubeScheduler(std::shared_ptr<Client> client, SchedulerOptions opt);
  ~KubeScheduler();
  KubeScheduler(const KubeScheduler&) = delete;
  KubeScheduler& operator=(const KubeScheduler&) = delete;

  void start();
  void stop();
  bool leading() const;
  // The model holds a whole list of nodes and of pods (the cache is warm).
  bool synced() const;

  // The read API (the same views as `tessera serve`): a job is a gang (pod group). A caller
  // who may not see every namespace passes those it may see.
  using Namespaces = std::optional<std::set<std::string>>;  // nullopt: every namespace
  std::vector<QueueView> queues() const;
  std::vector<JobView> jobs(const JobFilter& f, const Namespaces& visible = std::nullopt) const;
  std::optional<JobView> job(int64_t id, const Namespaces& visible = std::nullopt) const;
  // The namespaces that have jobs now.
  std::vector<std::string> job_namespaces() const;
  std::vector<NodeView> nodes() const;
  ServiceMetrics metrics() const;
  KubeMetrics kube_metrics() const;
  // The history samples in [since, until], averaged into buckets of `step` seconds.
  std::vector<HistorySample> history(double since, double until, double step) const {
    return history_.query(since, until, step);
  }
  double history_interval() const override { return opt_.history_interval; }
  double history_window() const override { return opt_.history_window; }
  double clock_now() const override { return now(); }
  // The read API's view (ReadModel): a reader's owners are the namespaces it may see. Queues,
  // nodes and the history are the cluster's: for a reader of every namespace only (kForbidden
  // otherwise; the API asks RBAC before it gets here).
  std::vector<JobView> jobs(const Reader& r, const JobFilter& f) const override;
  JobView job(const Reader& r, int64_t id) const override;
  std::vector<JobEvent> job_events(const Reader& r, int64_t id) const override;
  std::vector<QueueView> queues(const Reader& r) const override;
  std::vector<NodeView> nodes(const Reader& r) const override;
  std::vector<HistorySample> history(const Reader& r, double since, double until,
                                     double step) const override;
  // An adaptive pod group's report (POST /v1/groups/NS/NAME/report): by the group's own token
  // (annotation tessera.io/report-token on its bound pods). ServiceError: kUnauthorized for a
  // wrong token, kNotFound for an unknown group, kInvalid for one that is not adaptive or a
  // report that cannot be true, kConflict when it is not running, kUnavailable on a standby
  // replica (the leader plans; the client retries).
  JobReportView report(const std::string& ns, const std::string& group, const std::string& token,
                       const JobReport& r);

 private:
  struct BindAttempt;

  void run_loop();
  void drain_inbox();
  void drain_bind_results();
  void run_cycle();
  // Long-term usage: follow the tree as queues appear, take in what was saved, save it.
  void carry_usage();
  UsageByPath usage_to_save() const;
  void save_usage(bool synchronously);
  void apply(const Decisions& d, const CycleInput& in);
  void bind_gang(Gang& g, const Start& s);
  // A suspended Job's gang started (Gang::admits): its room held, the Job unsuspended
  // (kube_admission.cc).
  void admit_job(Gang& g, const Start& s);
  // A running gang's new GPU power limit (Decisions::power_limits): each bound pod's
  // annotation patched, with an Event.
  void write_power_limit(const Gang& g, double limit_w);
  // Pre-staging (SchedulerOptions::prestage_datasets): asks nodes' data agents to copy the
  // datasets of gangs still waiting after this cycle, within the bound on asks outstanding.
  void ask_prestaging(const CycleInput& in, const Decisions& d);
  // Sets node `node`'s stage annotation for `dataset` to `value` (the gang asking, ns/group),
  // or removes it (null: nobody waiting wants it now).
  void patch_stage_ask(const std::string& node, const std::string& dataset, nlohmann::json value);
  // Evicts these pods (a whole gang, or the bound part of one): DisruptionTarget, then Eviction.
  void evict_pods(const std::vector<std::string>& uids, const std::string& why, double grace);
  void roll_back_partial_gangs(double now);
  void say_ready(double cycle_began);
  void write_status(const CycleInput& in, const Decisions& d, double now);
  double grace_for(const Gang& g) const;
  // Goodput rounds (kube_goodput.cc): whether one is due; one run (true when a group's size
  // changed, so the cycle's input is prepared again); the report secret, read or created; a
  // group's report token; the annotations a bound pod of an adaptive group is told.
  bool goodput_round_due(double t) const;
  // A group not yet planned whose pods are still arriving (adaptive_settle).
  bool arriving(const Gang& g, double t) const;
  bool goodput_round(double t);
  bool ensure_report_secret();
  std::string report_token(const std::string& gang_key) const;
  void add_goodput_annotations(const Gang& g, const Allocation& a, size_t member,
                               nlohmann::json& annotations);
  GoodputModel& goodput_model(const Gang& g);
  // Queue objects (--queues-from crd; kube_queues.cc): a changed set builds the tree again
  // (kept only when it is one); each Queue's status says what it holds and whether the tree
  // was accepted, written when it changes, at most every queue_status_interval.
  void apply_queue_objects();
  void write_queue_status(double t);
  std::map<std::string, QueueObject> queue_objects_;
  bool queue_objects_changed_ = false;
  QueueTreeBuild queue_build_;  // the last build's verdict (its tree moved into the model)
  double queue_build_at_ = 0;   // when it was made (the conditions' transition time)
  std::map<std::string, std::string> queue_status_sent_;  // by Queue name: the status JSON
  double queue_status_at_ = 0;
  std::map<std::string, GoodputModel> goodput_;  // by gang key: what each group reported
  // Groups a round is restarting at a new size, since when: until their old pods are gone and
  // their controller has made as many as the round gave them (at most gang_timeout), no round
  // runs (their GPUs are neither theirs nor free).
  std::map<std::string, double> resizing_;
  std::string report_secret_;  // "" until read or created
  double now() const;
  int64_t job_id(const std::string& gang_key) const;  // stable per gang, for the read API
  JobView view_locked(const Gang& g) const;
  std::vector<QueueView> queues_locked() const;

  std::shared_ptr<Client> client_;
  SchedulerOptions opt_;
  Policy policy_;
  CycleDriver driver_;  // the kept queue, reason refreshes, long-term usage, cycle metrics
  Inbox inbox_;
  Informer informer_;
  StatusWriter writer_;
  std::unique_ptr<LeaderElector> elector_;
  std::unique_ptr<WorkQueue> binder_, actions_;

  mutable std::mutex mu_;  // the model and everything below
  ClusterModel model_;
  KubePower power_;
  double last_cycle_ = 0;
  std::map<uint64_t, BindAttempt> attempts_;
  uint64_t next_attempt_ = 1;
  std::unordered_map<std::string, PendingReason> reasons_;  // gang key -> its latest reason
  // The waiting gangs offered to the engine (driver_.queue()), each with a copy of its spec as
  // it was queued (the gang's own is derived again in place) and its key (its reason goes when
  // it leaves); brought up to date from ClusterModel::take_changed() (sync_queue).
  struct Queued {
    JobSpec spec;
    std::string key;  // the gang's
  };
  std::unordered_map<JobId, Queued> queued_;
  void sync_queue(const CycleInput& in);
  mutable std::map<std::string, int64_t> ids_;  // gang key -> read-API id
  mutable int64_t next_id_ = 1;
  // Pod-group members seen finishing (succeeded, failed), for PodGroup status: finished pods
  // leave the watch (it selects unfinished ones), so they are counted as they go.
  std::map<std::string, std::pair<int32_t, int32_t>> done_;
  ServiceMetrics counters_;
  KubeMetrics kube_counters_;
  // Pre-staging asks outstanding: node -> dataset, until the node is labelled as holding it or
  // no waiting gang reads that dataset any more.
  std::map<std::string, std::string> stage_asked_;
  HistoryLog history_;
  HistorySampler history_sampler_;
  std::atomic<uint64_t> api_errors_{0};  // failed writes, counted by the worker threads
  // Saved usage not yet given to a queue: read when this replica starts leading, applied to
  // each queue as it appears (a namespace with no pods yet has no queue in a flat tree).
  std::unique_ptr<UsageStore> usage_store_;
  UsageByPath usage_restore_;
  bool usage_loaded_ = false;
  double usage_saved_at_ = 0;

  // The model has taken in a whole list of nodes / of pods (set by the scheduler thread as it
  // applies the list's end, so a cycle never decides on part of the first list).
  std::atomic<bool> listed_nodes_{false}, listed_pods_{false};
  double started_at_ = 0, nodes_listed_at_ = 0, pods_listed_at_ = 0;
  bool said_ready_ = false;
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

}  // namespace tessera::kube
