// The gang builder: what a cycle is offered of the pods ClusterModel keeps. Each changed gang's
// spec is derived again from its pods, its PodGroup and the cluster (eligible nodes, its queue,
// its dataset's nodes, an adaptive group's round size), or why it cannot be offered is said.
#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>

#include "control/kube/cluster_model.h"
#include "engine/admission.h"
#include "model/input_error.h"

namespace tessera::kube {

std::shared_ptr<const NodeSet> ClusterModel::eligible(const NodeConstraints& c,
                                                      const std::string& given_key) {
  // No constraints and no taint anywhere: every node (null, the engine's fast path).
  const std::string key = given_key.empty() ? c.key() : given_key;
  auto it = eligible_.find(key);
  if (it != eligible_.end()) return it->second;
  std::vector<NodeId> ok;
  const size_t n = cluster_->nodes().size();
  for (NodeId id = 0; id < n; ++id) {
    if (node_matches(c, nodes_.at(cluster_->node(id).name))) ok.push_back(id);
  }
  std::shared_ptr<const NodeSet> set;
  if (ok.size() != n) set = std::make_shared<const NodeSet>(std::span<const NodeId>(ok));
  eligible_.emplace(key, set);
  return set;
}

std::shared_ptr<const NodeSet> ClusterModel::data_nodes(const std::string& dataset) {
  // In the node-set cache under a key no constraint text can have.
  const std::string key = std::string(1, '\x01') + "data:" + dataset;
  auto it = eligible_.find(key);
  if (it != eligible_.end()) return it->second;
  std::vector<NodeId> with;
  for (NodeId id = 0; id < cluster_->nodes().size(); ++id) {
    if (holds_dataset(nodes_.at(cluster_->node(id).name), dataset)) with.push_back(id);
  }
  std::shared_ptr<const NodeSet> set;
  if (!with.empty()) set = std::make_shared<const NodeSet>(std::span<const NodeId>(with));
  eligible_.emplace(key, set);
  return set;
}

bool ClusterModel::ensure_tenant(const std::string& queue) {
  if (tenants_.find(queue)) return true;
  if (unknown_queues_.count(queue) != 0) return false;
  Interner next = tenants_;
  next.intern(queue);
  auto tree = std::make_unique<QueueTree>(tree_given_ ? tree_template_ : QueueTree::flat(next));
  try {
    tree->bind(next, tree_given_ ? tree_origin_ : "queues");
  } catch (const InputError&) {
    unknown_queues_.insert(queue);
    return false;
  }
  tenants_ = std::move(next);
  tree_ = std::move(tree);
  return true;
}

std::string ClusterModel::namespace_refused(const std::string& ns, const std::string& queue) const {
  const QueueId leaf = tree_->leaf_of(*tenants_.find(queue));
  if (leaf == kNoId || tree_->admits_namespace(leaf, ns)) return "";
  return "namespace " + ns + " may not use queue " + queue +
         " (a queue admits its own namespace, and those it or a queue above it lists in "
         "namespaces:)";
}

const PodGroupInfo* ClusterModel::group_of(const PodInfo& p) const {
  // Kueue's and LeaderWorkerSet's groups have no object: their pods say their size.
  if (p.group.empty() || p.group_api == GroupApi::kKueue ||
      p.group_api == GroupApi::kLeaderWorkerSet) {
    return nullptr;
  }
  const auto it = groups_.find(group_key(p.group_api, p.ns, p.group));
  if (it == groups_.end()) return nullptr;
  // A pod naming a Job (or JobSet) as its owner counts only if it is that one's (a pod of the
  // same name's earlier Job, or one that merely claims it, is not).
  if ((p.group_api == GroupApi::kJob || p.group_api == GroupApi::kJobSet) &&
      it->second.uid != p.owner_uid) {
    return nullptr;
  }
  return &it->second;
}

namespace {

const char* group_convention(GroupApi api) {
  switch (api) {
    case GroupApi::kSchedulerPlugins:
      return "label scheduling.x-k8s.io/pod-group";
    case GroupApi::kVolcano:
      return "Volcano's group-name annotation";
    case GroupApi::kKueue:
      return "label kueue.x-k8s.io/pod-group-name";
    case GroupApi::kJob:
      return "its Indexed Job";
    case GroupApi::kJobSet:
      return "its JobSet";
    case GroupApi::kLeaderWorkerSet:
      return "its LeaderWorkerSet";
    case GroupApi::kRayCluster:
      return "its RayCluster";
    case GroupApi::kNone:
      break;
  }
  return "no group";
}

}  // namespace

bool ClusterModel::of_another_owner(const PodInfo& p) const {
  if (p.group_api != GroupApi::kJob && p.group_api != GroupApi::kJobSet) return false;
  const auto it = groups_.find(group_key(p.group_api, p.ns, p.group));
  return it != groups_.end() && it->second.uid != p.owner_uid;
}

std::optional<int32_t> ClusterModel::group_minimum(const PodInfo& lead) const {
  if (lead.group.empty()) return 1;
  if (const PodGroupInfo* group = group_of(lead)) return group->min_member;
  if (lead.min_member > 0) return lead.min_member;
  return std::nullopt;
}

std::string ClusterModel::gang_queue(const PodInfo& lead) const {
  if (lead.queue_given) return lead.queue;
  const PodGroupInfo* group = group_of(lead);
  return group != nullptr && !group->queue.empty() ? group->queue : lead.queue;
}

std::string ClusterModel::fill_spec(const Gang& g, const std::vector<const PodInfo*>& pods,
                                    JobSpec& spec) {
  spec = JobSpec{};
  spec.name = g.key;
  const PodInfo& first = *pods.front();
  spec.tenant = *tenants_.find(g.queue);
  spec.submit_time = first.created;
  MemberDemand d{0, kMilliPerGpu, 0, 0};
  bool fractional = false;
  for (const PodInfo* p : pods) {
    spec.submit_time = std::min(spec.submit_time, p->created);
    if (p->priority && !spec.priority_given) {
      spec.priority = *p->priority;
      spec.priority_given = true;
    }
    // Members of a gang are alike to the engine: each is given the largest request.
    d.gpus = std::max(d.gpus, p->demand.gpus);
    d.cpu_milli = std::max(d.cpu_milli, p->demand.cpu_milli);
    d.mem_mib = std::max(d.mem_mib, p->demand.mem_mib);
    if (p->demand.gpus > 0 && !p->demand.whole_gpus()) fractional = true;
  }
  if (fractional) {
    int32_t milli = 0;
    for (const PodInfo* p : pods) milli = std::max(milli, p->demand.gpu_milli);
    d.gpu_milli = d.gpus == 1 ? milli : kMilliPerGpu;
  }
  spec.demand = d;
  if (!spec.priority_given) {
    const QueueId leaf = tree_->leaf_of(spec.tenant);
    if (leaf != kNoId) apply_queue_defaults(tree_->queue(leaf), spec);
  }
  spec.eligible_nodes = eligible(first.constraints, first.constraints_key);
  spec.source = "pod " + first.key();
  // A class its queue does not grant would let one tenant preempt another at will: said (a
  // waiting gang is Invalid), and never used (the spec keeps the highest class granted below
  // it, else the lowest granted: a gang already bound, or planned by a goodput round).
  const QueueId leaf = tree_->leaf_of(spec.tenant);
  const QueueSpec& q = tree_->queue(leaf == kNoId ? kRootQueue : leaf);
  std::string refused = class_refusal(q, spec.priority);
  if (!refused.empty()) {
    // Granted classes below the one asked for: the highest set bit; none: the lowest granted.
    const unsigned granted = shared_classes(q);
    const unsigned below = granted & ((class_bit(spec.priority) << 1) - 1u);
    if (below != 0) {
      spec.priority = static_cast<PriorityClass>(std::bit_width(below) - 1);
    } else if (granted != 0) {
      spec.priority = static_cast<PriorityClass>(std::countr_zero(granted));
    }
  }
  return refused;
}

void ClusterModel::plan_adaptive(Gang& g, const std::vector<const PodInfo*>& pending,
                                 const std::vector<const PodInfo*>& bound) {
  const PodInfo* first = !pending.empty() ? pending.front()
                         : !bound.empty() ? bound.front()
                                          : nullptr;
  if (first == nullptr || first->adaptive.batch <= 0) return;
  g.adaptive = first->adaptive;
  // Planned only whole and settled: valid pods, a known minimum, no preemption, bind or
  // eviction under way, and its running part exact in the ledger.
  for (const auto* set : {&pending, &bound}) {
    for (const PodInfo* p : *set) {
      if (!p->invalid.empty()) return;
    }
  }
  if (!ensure_tenant(g.queue) || !g.kept_.waits_for.empty() || g.binding ||
      g.kept_.attempts_in_flight > 0 || !g.terminating_pods.empty() ||
      (!bound.empty() && g.running_id == kNoId)) {
    return;
  }
  const std::optional<int32_t> min_member = group_minimum(*first);
  if (!min_member) return;
  std::vector<const PodInfo*> all = bound;
  all.insert(all.end(), pending.begin(), pending.end());
  fill_spec(g, all, g.round_spec);
  g.round_spec.min_members = std::max(1, *min_member);
  g.round_spec.max_members = static_cast<int32_t>(all.size());
  if (g.round_spec.max_members < g.round_spec.min_members) g.round_spec.max_members = 0;
}

CycleInput ClusterModel::prepare(double now) {
  dirty_ = false;
  CycleInput in;
  for (auto it = gangs_.begin(); it != gangs_.end();) {
    Gang& g = it->second;
    // A gang nothing touched since it was last prepared is offered as it was (its derived
    // state depends only on its pods, its group, the cluster and what the scheduler keeps on
    // it, each of which marks it stale when it changes), unless it waits for victims (whose
    // pods may have gone), its running part's start is the clock's (a member bound at an
    // unknown time), or it holds an admitted Job's room (for a while only).
    if (all_stale_ || g.stale_ || !g.kept_.waits_for.empty() || g.clock_bound ||
        !g.kept_.reserved.member_node.empty()) {
      prepare_gang(g, now);
    }
    if (empty_gang(g)) {  // a suspended Job's gang that is no longer one
      changed_.push_back(2 * g.serial);
      it = gangs_.erase(it);
      continue;
    }
    ++it;
    if (g.running_id != kNoId) {
      in.by_job.emplace(g.running_id, &g);
      RunningJob rj;
      rj.id = g.running_id;
      rj.spec = &g.running_spec;
      rj.alloc = &g.running_alloc;
      rj.start_time = g.running_since;
      rj.attaining_gpus = static_cast<double>(g.running_alloc.gpu_milli()) / 1000.0;
      rj.last_checkpoint = g.running_since;
      rj.power_limit_w = g.running_limit_w;
      in.running.push_back(rj);
    }
    if (g.pending_id != kNoId) {
      in.by_job.emplace(g.pending_id, &g);
      PendingJob pj;
      pj.id = g.pending_id;
      pj.spec = &g.pending_spec;
      pj.queued_since = g.pending_spec.submit_time;
      in.pending.push_back(pj);
    }
  }
  all_stale_ = false;
  // The engine orders equal-ranked jobs by arrival: give it a stable order (oldest first).
  std::stable_sort(
      in.pending.begin(), in.pending.end(),
      [](const PendingJob& a, const PendingJob& b) { return a.queued_since < b.queued_since; });
  return in;
}

std::vector<JobId> ClusterModel::take_changed() {
  std::vector<JobId> out;
  out.swap(changed_);
  return out;
}

// Derives what prepare() offers of one gang from its pods, group and the cluster.
void ClusterModel::prepare_gang(Gang& g, double now) {
  g.stale_ = false;
  changed_.push_back(2 * g.serial);
  g.clock_bound = false;
  {
    g.pending_pods.clear();
    g.bound_pods.clear();
    g.terminating_pods.clear();
    g.pending_id = g.running_id = kNoId;
    g.waiting.clear();
    g.waiting_code.clear();
    g.binding = false;
    g.adaptive = AdaptiveBatch{};
    g.round_spec.max_members = 0;
    g.dataset.clear();
    std::vector<const PodInfo*> pending, bound;
    std::string invalid;
    int32_t foreign = 0;  // waiting pods of an earlier Job (JobSet) of the same name
    for (const std::string& uid : g.pods) {
      const PodRecord& r = pods_.at(uid);
      const PodInfo& p = r.info;
      if (p.deleting || r.evicting) {
        if (p.holds_node()) g.terminating_pods.push_back(uid);
      } else if (!p.node_name.empty() || !r.assumed_node.empty()) {
        g.bound_pods.push_back(uid);
        bound.push_back(&p);
        if (p.node_name.empty()) g.binding = true;
      } else if (!p.gated && of_another_owner(p)) {
        ++foreign;
      } else if (!p.gated) {
        g.pending_pods.push_back(uid);
        pending.push_back(&p);
        if (!p.invalid.empty() && invalid.empty()) invalid = p.key() + ": " + p.invalid;
      }
    }
    for (auto it = g.kept_.waits_for.begin(); it != g.kept_.waits_for.end();) {
      it = pods_.count(*it) == 0 ? g.kept_.waits_for.erase(it) : std::next(it);
    }
    if (hold_reservation(g, now)) {
      g.waiting_code = "GangPods";
      g.waiting = "admitted (its Job unsuspended): its room is held until its pods exist";
      return;
    }
    // A suspended Job to admit: the pods its template will make, all at once.
    const PodGroupInfo* admitting = admission_of(g);
    if (admitting != nullptr) {
      pending.assign(static_cast<size_t>(admitting->min_member), admitting->pod_template.get());
      if (!admitting->pod_template->invalid.empty()) {
        invalid = "Job " + g.key + "'s pod template: " + admitting->pod_template->invalid;
      }
    }

    // The running part: offered to the engine (fair share, preemption) when its members are
    // alike and all in the ledger, so that its allocation is exact.
    const PodInfo* lead = !pending.empty() ? pending.front()
                          : !bound.empty() ? bound.front()
                                           : nullptr;
    g.queue = lead != nullptr ? gang_queue(*lead) : "";
    if (!bound.empty() && ensure_tenant(g.queue)) {
      // Members alike in GPUs; their CPU and memory may differ (a PyTorchJob's workers carry the
      // operator's init container, its master not): counted at the least of them, so that
      // preempting the gang never frees more than its pods hold.
      bool exact = true;
      Allocation a;
      const MemberDemand& lead_demand = bound.front()->demand;
      a.gpus_per_member = lead_demand.gpus;
      a.cpu_milli_per_member = lead_demand.cpu_milli;
      a.mem_mib_per_member = lead_demand.mem_mib;
      double since = now;
      for (const std::string& uid : g.bound_pods) {
        const PodRecord& r = pods_.at(uid);
        if (!r.slot || r.info.demand.gpus != lead_demand.gpus ||
            r.info.demand.gpu_milli != lead_demand.gpu_milli ||
            static_cast<int32_t>(r.slot->shares.size()) != a.gpus_per_member) {
          exact = false;
          break;
        }
        a.cpu_milli_per_member = std::min(a.cpu_milli_per_member, r.slot->cpu_milli);
        a.mem_mib_per_member = std::min(a.mem_mib_per_member, r.slot->mem_mib);
        a.member_node.push_back(r.slot->node);
        a.shares.insert(a.shares.end(), r.slot->shares.begin(), r.slot->shares.end());
        since = std::min(since, r.info.bound_at > 0 ? r.info.bound_at : now);
        g.clock_bound = g.clock_bound || r.info.bound_at <= 0;
      }
      if (exact) {
        fill_spec(g, bound, g.running_spec);
        g.running_spec.min_members = g.running_spec.max_members = a.members();
        g.running_spec.demand.cpu_milli = a.cpu_milli_per_member;
        g.running_spec.demand.mem_mib = a.mem_mib_per_member;
        g.running_alloc = std::move(a);
        g.running_since = since;
        g.running_id = 2 * g.serial + 1;
        g.running_limit_w = power_limit(g);
      }
    }

    if (opt_.goodput && admitting == nullptr) plan_adaptive(g, pending, bound);
    if (pending.empty() && foreign > 0) {
      g.waiting_code = "PodGroup";
      g.waiting = std::to_string(foreign) + " waiting pod(s) of " + g.key +
                  " belong to an earlier workload of that name (its owner's uid differs from "
                  "the one seen now)";
    }
    if (pending.empty()) return;
    const PodInfo& first = *pending.front();
    g.dataset = first.dataset;
    for (const PodInfo* p : pending) {
      if (p->group_api != first.group_api && invalid.empty()) {
        // One name, two conventions (a Volcano annotation and a Kueue label, say): which
        // minimum and queue hold is not for the scheduler to guess.
        invalid = p->key() + ": its group " + g.key + " is named by " +
                  group_convention(p->group_api) + ", and pod " + first.key() + "'s by " +
                  group_convention(first.group_api) + "; a gang follows one convention";
      }
    }
    const std::optional<int32_t> group_min =
        admitting != nullptr ? std::optional<int32_t>(admitting->min_member) : group_minimum(first);
    if (!invalid.empty()) {
      g.waiting_code = "Invalid";  // said first: it is what the user must change
      g.waiting = invalid;
      return;
    }
    if (!group_min) {
      g.waiting_code = "PodGroup";
      g.waiting = "waiting for PodGroup " + g.key + " (" + group_api_name(first.group_api) + ")";
      return;
    }
    int32_t min_member = *group_min;
    const auto have_bound = static_cast<int32_t>(g.bound_pods.size());
    const auto have_pending = static_cast<int32_t>(pending.size());
    if (!ensure_tenant(g.queue)) {
      g.waiting_code = "Queue";
      g.waiting = "queue " + g.queue + " is not in the queue tree (" + tree_origin_ + ")";
    } else if (const std::string why = namespace_refused(first.ns, g.queue); !why.empty()) {
      g.waiting_code = "Queue";
      g.waiting = why;
    } else if (!g.kept_.waits_for.empty()) {
      g.waiting_code = "Preempting";
      g.waiting = "waiting for " + std::to_string(g.kept_.waits_for.size()) +
                  " preempted pod(s) to terminate";
    } else if (g.binding || g.kept_.attempts_in_flight > 0) {
      // A bind attempt of this gang is still out: deciding its other pods now would count
      // members that the attempt may yet give back (a failed bind evicts the bound ones), and
      // could leave a member bound alone.
      g.waiting_code = "Binding";
      g.waiting = "waiting for the gang's binds in flight to land";
    } else if (have_bound + have_pending < min_member) {
      g.waiting_code = "GangPods";
      g.waiting = "waiting for the gang's pods: " + std::to_string(have_bound + have_pending) +
                  " of minMember " + std::to_string(min_member) + " exist";
    }
    if (g.waiting.empty() && g.adaptive.batch > 0) {
      // An adaptive group starts whole at the size its goodput round gave it, and grows only by
      // a round restarting it: its other pods wait.
      if (have_bound > 0) {
        g.waiting_code = "GoodputRound";
        g.waiting = "adaptive: runs with the " + std::to_string(have_bound) +
                    " members its goodput round gave it; the group's other pods wait for a "
                    "round to give it more";
      } else if (g.kept_.round_members < 0) {
        g.waiting_code = "GoodputRound";
        g.waiting =
            "adaptive: waits for its first goodput round (once its pods have stopped arriving)";
      } else if (g.kept_.round_members == 0) {
        g.waiting_code = "GoodputRound";
        g.waiting =
            "adaptive: waits for a goodput round to give it GPUs (the last gave them to "
            "groups that gain more from them, or had none it fits)";
      } else if (have_pending < g.kept_.round_members) {
        g.waiting_code = "GoodputRound";
        g.waiting = "adaptive: waiting for the group's pods: " + std::to_string(have_pending) +
                    " of the " + std::to_string(g.kept_.round_members) +
                    " members its goodput round gave it exist";
      } else {
        min_member = g.kept_.round_members;
      }
    }
    if (!g.waiting.empty()) return;
    if (std::string why = fill_spec(g, pending, g.pending_spec); !why.empty()) {
      g.waiting_code = "Invalid";
      g.waiting = first.key() + ": " + why;
      return;
    }
    g.pending_spec.min_members = std::max(1, min_member - have_bound);
    g.pending_spec.max_members = g.adaptive.batch > 0 ? min_member : have_pending;
    // Not now and not ever on these nodes (until nodes change): said apart from "not now".
    // Asked again only when the gang's shape or the cluster changed (it walks the nodes).
    const JobSpec& ps = g.pending_spec;
    if (g.admitted.generation != cluster_generation_ || g.admitted.demand != ps.demand ||
        g.admitted.min_members != ps.min_members || g.admitted.nodes != ps.eligible_nodes.get()) {
      g.admitted = {cluster_generation_, ps.demand, ps.min_members, ps.eligible_nodes.get(),
                    infeasible_reason(*cluster_, ps)};
    }
    if (g.admitted.never) {
      g.waiting_code = "Unrunnable";
      g.waiting = unusable_nodes_ == 0
                      ? "no node set of this cluster can ever host it: " + *g.admitted.never
                      : "no Ready, uncordoned node set can host it now (" +
                            std::to_string(unusable_nodes_) +
                            " node(s) NotReady or cordoned): " + *g.admitted.never;
      return;
    }
    if (have_bound >= min_member) g.complete_once = true;
    // Members that finished leave a whole gang short: that is not a partly bound gang.
    if (have_bound > 0 && have_bound < min_member && !g.complete_once) {
      if (g.kept_.partial_since == 0) g.kept_.partial_since = now;
    } else {
      g.kept_.partial_since = 0;
    }
    g.pending_id = 2 * g.serial;
  }
}

}  // namespace tessera::kube
