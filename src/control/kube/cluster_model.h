// What the Kubernetes scheduler knows of the cluster, kept up to date from watch events and
// turned into the engine's snapshot each cycle without rebuilding it from scratch:
//  - the engine's Cluster is rebuilt only when nodes come, go, or change capacity, readiness
//    or topology labels; the ledger (ClusterState) then replays every bound pod;
//  - otherwise a pod event allocates or releases just that pod's share of its node;
//  - pods are grouped into gangs (pod groups) as they arrive, so a cycle walks gangs, not pods.
// The pod cache is cluster_model.cc; what a cycle is offered of each gang (prepare(), the gang
// builder) is gang_builder.cc.
//
// Single-threaded: only the scheduler thread calls it (watch threads queue their events).
//
// Each pod is a small state machine (as kube-scheduler's cache: Assume / Forget / Add / Remove):
//
//   upsert_pod (no node) --assume--> assumed --upsert_pod shows a node--> bound
//        ^                              |                                   |
//        +------------forget------------+          mark_evicting --> evicting
//                                                                           |
//   any state --remove_pod (deleted, finished, or left out of a re-list)--> gone
//
//  - assumed: a bind is in flight; its shares are held on the assumed node, so the next cycle
//    does not give them away. forget (a failed bind) releases them.
//  - bound: the watch shows spec.nodeName; the API is the truth from then on (a pod bound
//    elsewhere by someone else moves there).
//  - evicting: an eviction was asked for; it holds its node until it is gone, but is no
//    longer a running member (not offered for preemption again).
//
// Invariants:
//  - every pod that holds a node (bound or assumed, not finished) and whose node is in the
//    Cluster has exactly one slot in the ledger, on that node;
//  - the ledger never over-commits: a pod of another scheduler that does not fit where the
//    API says it runs is counted up to what is free there (and noted in `overflow_pods`);
//  - gang g lists exactly the pods of ours whose gang_key() is g.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "control/kube/kube_objects.h"
#include "engine/snapshot.h"
#include "model/cluster.h"
#include "model/cluster_state.h"
#include "model/interner.h"
#include "model/node_set.h"
#include "model/queue_tree.h"

namespace tessera::kube {

struct ModelOptions {
  std::vector<std::string> scheduler_names{"tessera"};
  std::vector<std::string> topology_labels;  // coarsest first
  std::string queues_path;                   // empty: one queue per queue name, equal weights
  // --queues-from crd: the tree comes from Queue objects (set_queue_tree); until the first, one
  // queue per queue name, as with no file.
  bool queues_from_objects = false;
  // --policy goodput: adaptive pod groups (tessera.io/adaptive-batch) start at the size their
  // goodput round gave them, and only then (docs/kubernetes.md, "Adaptive training").
  bool goodput = false;
  // How long the room of an admitted suspended Job is held for its pods to appear (seconds).
  double admission_hold = 30;
};

// Where one pod sits in the ledger.
struct PodSlot {
  NodeId node = kNoId;
  std::vector<GpuShare> shares;
  int64_t cpu_milli = 0, mem_mib = 0;
};

struct PodRecord {
  PodInfo info;
  bool ours = false;            // names one of our scheduler names
  bool evicting = false;        // eviction asked for, not yet seen deleting
  std::string assumed_node;     // bind in flight (decided, not yet seen bound)
  std::optional<PodSlot> slot;  // held in the ledger
  double first_seen = 0;        // when the scheduler first saw it (create -> bind latency)
  // A GPU power limit written (on the Binding, or by a PATCH) that the watch has not shown on
  // the pod yet; -1: none. Counted meanwhile, as an assumed node is.
  double limit_sent = -1;
  // Its GPUs' power limit as the scheduler counts it (W; 0: their default, the TDP).
  double power_limit_w() const { return limit_sent >= 0 ? limit_sent : info.power_limit_w; }
};

// What the scheduler keeps on a gang, beside what prepare() derives: the model reads it, and it
// is changed only through ClusterModel::keep(), which has prepare() derive the gang again.
struct GangKept {
  // Bind attempts sent and not all answered. While one is out, the gang is not decided again:
  // the watch may show members bound before their answers arrive, and a failed member would
  // otherwise be re-bound alone just before the attempt gives the rest back.
  int32_t attempts_in_flight = 0;
  // Preemption in progress: the victims' pod uids (dropped as each goes); the gang waits until
  // none is left.
  std::set<std::string> waits_for;
  // A goodput-adaptive gang: the members its last goodput round gave it (-1: none since it last
  // waited).
  int32_t round_members = -1;
  // Since when its members are only partly bound (a failed bind, a crash); 0: they are not.
  // prepare() sets and clears it; the scheduler clears it when it rolls the gang back.
  double partial_since = 0;
  // A suspended Job admitted (ClusterModel::reserve): the room held in the ledger for its pods
  // until they exist, the Job's group key and since when (job_admission.cc).
  Allocation reserved;
  std::string reserved_for;
  double reserved_at = 0;
};

// A pod group (or a lone pod) of ours.
struct Gang {
  std::string key;  // ns/group or pod:uid
  std::string ns, group;
  // The key of the suspended Job this gang stands for while it has no pods ("" = none): the
  // engine is offered its template's pods, and starting it admits the Job (job_admission.cc).
  std::string admits;
  // Its number, given when it is first seen and never reused: the engine knows its waiting
  // part as JobId 2 * serial and its running part as 2 * serial + 1, the same every cycle (the
  // scheduler keeps its waiting gangs queued between cycles by these ids).
  uint32_t serial = 0;
  std::set<std::string> pods;  // uids, ordered so members map to pods deterministically
  // Filled by prepare():
  std::vector<std::string> pending_pods, bound_pods, terminating_pods;
  JobId pending_id = kNoId, running_id = kNoId;
  JobSpec pending_spec, running_spec;
  Allocation running_alloc;
  double running_since = 0;
  std::string waiting;  // why it is not offered to the engine ("" = offered), in words
  // The same as a code for tables (JobView::reason_code): PodGroup, GangPods, Invalid, Queue,
  // Preempting, Binding, GoodputRound, Unrunnable.
  std::string waiting_code;
  bool binding = false;        // some member's bind is in flight (not yet seen bound)
  bool complete_once = false;  // held its minimum at some point (members may finish since)
  // Goodput-adaptive (its pods carry tessera.io/adaptive-batch, with ModelOptions::goodput).
  // prepare() fills `adaptive` (the first pod's limits) and `round_spec` (its shape, minMember
  // and every pod it has as the most members; max_members 0 when it cannot be planned now).
  AdaptiveBatch adaptive;
  JobSpec round_spec;
  std::string dataset;       // what its waiting pods read (tessera.io/dataset), filled by prepare()
  std::string queue;         // its queue's name (gang_queue of its first pod), filled by prepare()
  bool clock_bound = false;  // its running part started "now" (a member's bind time unknown)
  double running_limit_w = 0;  // its running members' power limit (ClusterModel::power_limit)
  // Admission's answer (infeasible_reason) for the shape and cluster it was asked about.
  struct Admission {
    uint64_t generation = ~uint64_t{0};
    MemberDemand demand;
    int32_t min_members = 0;
    const NodeSet* nodes = nullptr;  // by identity: node sets are cached per generation
    std::optional<std::string> never;
  } admitted;

  const GangKept& kept() const { return kept_; }
  bool stale() const { return stale_; }

 private:
  friend class ClusterModel;
  GangKept kept_;
  // Whether what prepare() derived of it may be out of date: set by every change to its pods,
  // its group, the cluster, and by keep(); prepare() then derives it again, and offers the
  // others as they were.
  bool stale_ = true;
};

// The engine's input for one cycle; points into the model, valid until the model changes.
struct CycleInput {
  std::vector<PendingJob> pending;
  std::vector<RunningJob> running;
  std::unordered_map<JobId, Gang*> by_job;  // JobId -> gang (Gang::serial)

  // The gang behind a JobId of this cycle, or null.
  Gang* gang_of(JobId id) const {
    const auto it = by_job.find(id);
    return it == by_job.end() ? nullptr : it->second;
  }
};

class ClusterModel {
 public:
  explicit ClusterModel(ModelOptions opt);

  // Watch events.
  void upsert_node(NodeInfo n);
  void remove_node(const std::string& name);
  void upsert_pod(PodInfo p, double now);
  void remove_pod(const std::string& uid);
  void upsert_group(PodGroupInfo g);
  void remove_group(const std::string& key);
  // A re-list: everything not in `keep` is gone.
  void retain_nodes(const std::set<std::string>& keep);
  void retain_pods(const std::set<std::string>& keep_uids);
  void retain_groups(GroupApi api, const std::set<std::string>& keep);  // that API's only

  // A new queue tree (Queue objects changed): queue names are bound to it afresh (a name it has
  // no leaf for makes its gangs wait, saying so), and every gang is derived again. `origin`
  // names it in messages.
  void set_queue_tree(QueueTree tree, std::string origin);
  // Where the tree came from, for messages: the file, "Queue objects", or "" (one per name).
  const std::string& tree_origin() const { return tree_origin_; }

  // Rebuilds the Cluster and ledger if nodes changed since the last call.
  void refresh();
  // Builds the engine's input: gangs that may be scheduled now (pending), gangs of ours that
  // run (running), and why the others wait. Call after refresh().
  CycleInput prepare(double now);

  // A bind decided: the pod is assumed on `node` with these shares (allocated at once).
  void assume(const std::string& uid, NodeId node, std::vector<GpuShare> shares);
  // A suspended Job admitted (gang.admits): `a` is held in the ledger for its pods until they
  // exist, the Job goes, or ModelOptions::admission_hold passes (job_admission.cc).
  void reserve(Gang& g, const Allocation& a, double now);
  // The suspended Job gang `g` stands for (Gang::admits) while it has no pods, or null.
  const PodGroupInfo* admission_of(const Gang& g) const;
  // A bind failed: forget the assumption and release its shares.
  void forget(const std::string& uid);
  // A gang's GPU power limit (W; 0: the default) from its bound pods: alike unless a change
  // is on its way, and then the highest, so that its draw is not under-counted (0, the
  // default, counts as the highest). Call after prepare().
  double power_limit(const Gang& g) const;
  // A power limit was written for the pod (0: the default): counted until the watch shows it.
  void note_power_limit(const std::string& uid, double limit_w);
  // An eviction was asked for: the pod no longer counts as a running member (it is not
  // offered for preemption again), though it holds its node until it is gone.
  void mark_evicting(const std::string& uid);

  const Cluster& cluster() const { return *cluster_; }
  const ClusterState& ledger() const { return *ledger_; }
  ClusterState& ledger() { return *ledger_; }
  const QueueTree& tree() const { return *tree_; }
  const Interner& tenants() const { return tenants_; }
  const std::map<std::string, NodeInfo>& nodes() const { return nodes_; }
  const std::unordered_map<std::string, PodRecord>& pods() const { return pods_; }
  PodRecord* pod(const std::string& uid);
  const std::map<std::string, Gang>& gangs() const { return gangs_; }
  Gang* gang(const std::string& key);
  // How a gang is named to people: its key (namespace/group), or a lone pod's namespace/name
  // (its key holds the uid, which changes when the pod is made again).
  std::string name_of(const Gang& g) const;
  // What the scheduler keeps on the gang, to change: prepare() derives the gang again.
  GangKept& keep(Gang& g) {
    g.stale_ = true;
    return g.kept_;
  }
  const std::map<std::string, PodGroupInfo>& groups() const { return groups_; }
  // Host GPU index (0..n-1 on its node) of a GpuId.
  int32_t gpu_index(GpuId g) const {
    return g - cluster_->node(cluster_->node_of_gpu(g)).first_gpu;
  }
  std::optional<NodeId> node_id(const std::string& name) const;
  // The nodes labelled as holding `dataset` (data.tessera.io/<dataset>, any value but "false");
  // null when none is. Cached until nodes or their labels change.
  std::shared_ptr<const NodeSet> data_nodes(const std::string& dataset);
  // Changes whenever the Cluster is rebuilt or nodes' labels or taints change.
  uint64_t cluster_generation() const { return cluster_generation_; }
  uint64_t overflow_pods() const { return overflow_pods_; }
  // Something changed since the last prepare() that may change a decision.
  bool dirty() const { return dirty_; }
  // Every gang is derived again at the next prepare() (what it does after a node change): the
  // reference the incremental prepare() is tested against.
  void mark_all_stale() { all_stale_ = true; }
  // The waiting parts' JobIds (2 * serial) of the gangs derived again or gone since the last
  // call: what a queue kept between cycles must look at again (the others are as they were).
  std::vector<JobId> take_changed();
  void mark_dirty() { dirty_ = true; }
  bool ours(const PodInfo& p) const;

 private:
  void rebuild();
  void prepare_gang(Gang& g, double now);
  // The gang of pod r (one of ours) must be derived again.
  void stale(const PodRecord& r);
  void place_slot(PodRecord& r);
  void release_slot(PodRecord& r);
  void attach(PodRecord& r);
  void detach(const PodRecord& r);
  // The nodes pods with these constraints may use (`key`: their PodInfo::constraints_key).
  std::shared_ptr<const NodeSet> eligible(const NodeConstraints& c, const std::string& key);
  bool ensure_tenant(const std::string& queue);
  // Why namespace `ns` may not use `queue` (QueueTree::admits_namespace), or "". The queue
  // must be known (ensure_tenant).
  std::string namespace_refused(const std::string& ns, const std::string& queue) const;
  // The PodGroup object pod `p` names (of its convention's API), or null.
  const PodGroupInfo* group_of(const PodInfo& p) const;
  // A pod that names a Job or JobSet as its owner while one of that name with another uid is
  // seen: an earlier workload's, not a member of this one's gang.
  bool of_another_owner(const PodInfo& p) const;
  // Suspended Jobs (job_admission.cc): a gang stands for a suspended Job of ours (not Kueue's)
  // while it has no pods; what the engine is offered of it; whether its reservation still
  // holds (released once its pods exist, its Job is gone, or the hold has passed); and the
  // gangs left with nothing (no pods, no Job to admit, no room held) dropped.
  void track_admission(const PodGroupInfo& job);
  void untrack_admission(const PodGroupInfo& job);
  bool hold_reservation(Gang& g, double now);
  void drop_reservations();  // the ledger was rebuilt: what it held is gone
  bool empty_gang(const Gang& g) const;
  // The least number of members the gang `lead` leads runs with: its PodGroup's minMember,
  // else its pods' count annotation, 1 without a group; none while its PodGroup is unseen.
  std::optional<int32_t> group_minimum(const PodInfo& lead) const;
  // The queue of the gang `lead` leads: the pod's label, else its Volcano PodGroup's
  // spec.queue, else the namespace.
  std::string gang_queue(const PodInfo& lead) const;
  // The engine's spec of `pods` (of gang g); "" or why its class is refused (the spec then
  // holds a class its queue grants).
  std::string fill_spec(const Gang& g, const std::vector<const PodInfo*>& pods, JobSpec& spec);
  // An adaptive gang's `adaptive` and `round_spec` (Gang), from its pods.
  void plan_adaptive(Gang& g, const std::vector<const PodInfo*>& pending,
                     const std::vector<const PodInfo*>& bound);

  ModelOptions opt_;
  std::map<std::string, NodeInfo> nodes_;
  std::unordered_map<std::string, PodRecord> pods_;  // by uid
  std::map<std::string, PodGroupInfo> groups_;       // by PodGroupInfo::key()
  std::map<std::string, Gang> gangs_;                // by gang key
  bool nodes_changed_ = true, dirty_ = true;
  bool all_stale_ = true;  // every gang must be derived again (the cluster or its nodes changed)
  std::vector<JobId> changed_;  // take_changed(), in the order they changed
  uint64_t cluster_generation_ = 0, overflow_pods_ = 0;
  // Nodes left out of the engine's cluster for now (NotReady or cordoned): while there are
  // any, a gang no usable node can host is told "not now", not "never".
  size_t unusable_nodes_ = 0;
  uint32_t next_serial_ = 0;  // the next gang's Gang::serial
  std::unique_ptr<Cluster> cluster_;
  std::unique_ptr<ClusterState> ledger_;
  std::unordered_map<std::string, NodeId> node_ids_;
  std::vector<std::string> node_of_id_;
  std::unordered_map<std::string, std::shared_ptr<const NodeSet>> eligible_;  // by key
  Interner tenants_;
  QueueTree tree_template_;
  bool tree_given_ = false;  // tree_template_ is a file's or the Queue objects' (else: flat)
  std::string tree_origin_;
  std::unique_ptr<QueueTree> tree_;
  std::set<std::string> unknown_queues_;  // queue names a loaded tree has no leaf for
};

}  // namespace tessera::kube
