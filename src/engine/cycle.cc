#include "engine/cycle.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "engine/fair_share.h"
#include "engine/gates/admission_gate.h"
#include "engine/pending_queue.h"
#include "engine/power_budget.h"
#include "engine/queue_order.h"
#include "engine/rng.h"
#include "engine/running_set.h"

namespace tessera {

namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();

// What makes two pending jobs equally hard to place; if one failed on the current scratch
// state, the other fails too (the state only fills up until a preemption frees something).
// Placement constraints are part of the shape: the GPU types, the span and the node restriction
// (JobSpec::eligible_nodes, compared by identity, else by content: two jobs of equal demand
// restricted to different nodes are different shapes).
struct ShapeKey {
  MemberDemand demand;
  int32_t min_members, max_members;
  GpuTypeMask types;
  Level span;
  const NodeSet* nodes;  // null: every node
  bool operator==(const ShapeKey& o) const {
    return demand == o.demand && min_members == o.min_members && max_members == o.max_members &&
           types == o.types && span == o.span && same_restriction(nodes, o.nodes);
  }
};
struct ShapeHash {
  size_t operator()(const ShapeKey& k) const {
    size_t h = std::hash<int64_t>()(k.demand.gpus * 1009 + k.demand.gpu_milli);
    h = h * 31 + std::hash<int64_t>()(k.demand.cpu_milli ^ (k.demand.mem_mib << 20));
    h = h * 31 + std::hash<int64_t>()(k.min_members * 65537 + k.max_members);
    h = h * 31 + std::hash<uint64_t>()(k.types);
    h = h * 31 + static_cast<size_t>(k.span);
    return h * 31 + restriction_hash(k.nodes);
  }
};

ShapeKey shape_of(const JobSpec& job) {
  return ShapeKey{job.demand,        job.min_members, job.max_members,
                  job.allowed_types, job.max_span,    job.eligible_nodes.get()};
}

// Milli-GPU of `a` on GPUs of the types in mask, on nodes of `only` (null: every node).
int64_t milli_on_types(const Cluster& c, const Allocation& a, GpuTypeMask mask,
                       const NodeSet* only = nullptr) {
  int64_t m = 0;
  for (const GpuShare& s : a.shares) {
    const NodeId n = c.node_of_gpu(s.gpu);
    if (type_allowed(mask, c.node(n).gpu_type) && node_eligible(only, n)) m += s.milli;
  }
  return m;
}

// Whether every share of `a` fits on `state` right now.
bool fits(const ClusterState& state, const Allocation& a) {
  // Shares of one allocation are on distinct GPUs per member, but two members may share a GPU
  // (fractional gangs), so accumulate per GPU before comparing.
  std::vector<std::pair<GpuId, int32_t>> need;
  for (const GpuShare& s : a.shares) need.emplace_back(s.gpu, s.milli);
  std::sort(need.begin(), need.end());
  for (size_t i = 0; i < need.size();) {
    int32_t sum = 0;
    size_t j = i;
    for (; j < need.size() && need[j].first == need[i].first; ++j) sum += need[j].second;
    if (state.gpu_free(need[i].first) < sum) return false;
    i = j;
  }
  std::vector<std::pair<NodeId, int32_t>> nodes;
  for (NodeId n : a.member_node) nodes.emplace_back(n, 1);
  std::sort(nodes.begin(), nodes.end());
  for (size_t i = 0; i < nodes.size();) {
    int64_t k = 0;
    size_t j = i;
    for (; j < nodes.size() && nodes[j].first == nodes[i].first; ++j) ++k;
    if (state.node_free_cpu(nodes[i].first) < a.cpu_milli_per_member * k ||
        state.node_free_mem(nodes[i].first) < a.mem_mib_per_member * k) {
      return false;
    }
    i = j;
  }
  return true;
}

// Quota admission needs usage, reclaim and the fair order need entitlements; a cycle that
// needs neither skips computing them.
SharesNeeded shares_needed(const Snapshot& snap, const Policy& policy) {
  const bool limits = snap.queues != nullptr && has_limits(*snap.queues);
  return limits || policy.reclaim || policy.order->reads_shares() ? SharesNeeded::kFull
                                                                  : SharesNeeded::kTreeOnly;
}

class Cycle {
 public:
  Cycle(const Snapshot& snap, const Policy& policy)
      : snap_(snap),
        policy_(policy),
        cluster_(snap.state->cluster()),
        own_scratch_(snap.scratch == nullptr ? std::optional<ClusterState>(*snap.state)
                                             : std::nullopt),
        scratch_(snap.scratch != nullptr ? *snap.scratch : *own_scratch_),
        rng_(mix_seed(policy.seed, snap.cycle)),
        shares_(compute_queue_shares(snap, shares_needed(snap, policy))),
        tree_(*shares_.tree),
        live_(shares_.usage),
        gates_(admission_gates(snap, policy, tree_)) {
    init_type_usage();
    // Running jobs are the ledger's first holders: holder i is snap.running[i].
    if (snap.power != nullptr) {
      power_.emplace(*snap.power, cluster_, policy.power_shifting);
      for (size_t i = 0; i < snap.running.size(); ++i) {
        const RunningJob& r = snap.running[i];
        power_->add(r.id, *r.spec, *r.alloc, r.power_limit_w,
                    preferred_limit(*snap.power, cluster_, *r.spec, *r.alloc,
                                    energy_weight(running_leaf(i))));
      }
    }
    // Last: from here on the destructor gives the caller's ledger back.
    if (snap.scratch != nullptr) scratch_.start_journal();
  }

  ~Cycle() {
    if (snap_.scratch != nullptr) scratch_.undo_journal();
  }
  Cycle(const Cycle&) = delete;
  Cycle& operator=(const Cycle&) = delete;

  Decisions run() {
    const auto walk = policy_.order->walk(snap_, shares_);
    // With the caller's pending queue (kept for this order, so its ranks are this order's), the
    // walk stops once no job it has not reached could start: the rest would only be looked at
    // and left waiting, each for the reason it would get now, so only those whose reason the
    // caller wants are considered (explain_rest). Where only a few jobs ending before EASY's
    // shadow time could start, and the walk is one key across tenants, it jumps to them.
    // Without a queue, every job is considered in order.
    queue_ = snap_.pending_queue;
    if (queue_ != nullptr && &queue_->order() != policy_.order.get()) queue_ = nullptr;
    if (queue_ != nullptr) {
      visited_.assign(queue_->size(), false);
      tenant_visited_.assign(queue_->tenants(), 0);
      dropped_.assign(queue_->tenants(), false);
    }
    // The bound is checked after 1, 2, 4, ... jobs since the last decision: its cost stays a
    // small share of the walk's, and a stop is found at most twice as late.
    size_t since_check = 0, gap = 1;
    const bool by_key = policy_.order->interleave() == QueueOrder::Interleave::kByKey;
    for (;;) {
      if (queue_ != nullptr && since_check++ % gap == 0) {
        const Bound b = what_more_can_start();
        // The reasons of the jobs left name the head (the first that cannot start): walk on
        // until it is chosen.
        const bool head_known = head_ != kNoId || policy_.backfill == Backfill::kGreedy;
        if (b == Bound::kNothing && head_known) {
          explain_rest();
          break;
        }
        if (b == Bound::kShortOnly) {
          if (!passing_ && jump_to_short_jobs(*walk)) break;
          if (!by_key) drop_idle_tenants(*walk);
        }
        gap = b == Bound::kNothing ? 1 : gap * 2;
        since_check = 1;
      }
      const int64_t next = walk->next();
      if (next < 0) break;
      const auto idx = static_cast<uint32_t>(next);
      if (queue_ != nullptr) visit(idx);
      const size_t decided = decisions_made();
      consider(idx);
      if (decisions_made() != decided) gap = 1, since_check = 0;
      if (queue_ != nullptr) pass_over(*walk);
    }
    // What is left after every waiting job was considered goes to elastic gangs below their
    // maximum: the waiting jobs could not use it now, and any of them may take it back later
    // (try_take_back_growth).
    if (policy_.elastic) grow_elastic();
    if (power_) settle_power();
    return std::move(out_);
  }

 private:
  // Places the gang at its largest size the queue's quota allows (max, else min members); with
  // heterogeneity-aware placement, on its preferred GPU types first.
  bool try_place(const JobSpec& job, Allocation& alloc) {
    // Data locality first: on the nodes holding its dataset; within its locality wait, only
    // there.
    if (current_preferred_ != nullptr) {
      JobSpec& p = local_job_;
      p.demand = job.demand;
      p.max_span = job.max_span;
      p.min_members = job.min_members;
      p.max_members = job.max_members;
      p.allowed_types = job.allowed_types;
      p.eligible_nodes =
          job.eligible_nodes == nullptr
              ? current_preferred_
              : std::make_shared<const NodeSet>(
                    NodeSet::matching(cluster_.nodes().size(), [&](NodeId n) {
                      return current_preferred_->contains(n) && job.eligible_nodes->contains(n);
                    }));
      if (try_place_sized(p, alloc)) return true;
      if (hold_for_data_) {
        data_held_ = true;
        return false;
      }
    }
    if (policy_.heterogeneity && !job.type_speed.empty()) {
      const GpuTypeMask preferred = preferred_types(job);
      if (preferred != 0) {
        // What the scorers read of a job (demand, types, span), without copying its strings.
        JobSpec& p = preferred_job_;
        p.demand = job.demand;
        p.max_span = job.max_span;
        p.min_members = job.min_members;
        p.max_members = job.max_members;
        p.allowed_types = preferred;
        p.eligible_nodes = job.eligible_nodes;
        if (try_place_sized(p, alloc)) return true;
      }
    }
    return try_place_sized(job, alloc);
  }

  // Calls f(type, speed) for each GPU type present in the cluster that the job may use and has a
  // known speed on.
  template <class F>
  void for_each_usable_type(const JobSpec& job, F&& f) const {
    const GpuTypeMask present = cluster_.present_types();
    for (GpuTypeId t = 0; t < job.type_speed.size() && t < 64; ++t) {
      if (((present >> t) & 1u) == 0 || !type_allowed(job.allowed_types, t)) continue;
      const double v = job.type_speed[t];
      if (v > 0) f(t, v);
    }
  }

  // The job's slowest and fastest speed over its usable types (0, 0 when none is known).
  std::pair<double, double> speed_range(const JobSpec& job) const {
    double lo = 0, hi = 0;
    for_each_usable_type(job, [&](GpuTypeId, double v) {
      lo = lo == 0 ? v : std::min(lo, v);
      hi = std::max(hi, v);
    });
    return {lo, hi};
  }

  // The speed-up a job gets from its fastest allowed GPU type present over its slowest.
  double type_spread(const JobSpec& job) const {
    const auto [lo, hi] = speed_range(job);
    return lo > 0 ? hi / lo : 1.0;
  }

  // The GPU types a job should try first: the fastest (within 10 %) when its speed-up from them
  // is at least the median of the jobs waiting in this cycle, else the slowest; 0 when its
  // types are all alike.
  GpuTypeMask preferred_types(const JobSpec& job) {
    if (hetero_median_ < 0) {
      std::vector<double> spreads;
      spreads.reserve(snap_.pending.size());
      for (const PendingJob& pj : snap_.pending) {
        if (!pj.spec->type_speed.empty()) spreads.push_back(type_spread(*pj.spec));
      }
      if (spreads.empty()) return 0;
      std::nth_element(spreads.begin(), spreads.begin() + spreads.size() / 2, spreads.end());
      hetero_median_ = spreads[spreads.size() / 2];
    }
    // Plain variables, not a structured binding: the lambda below captures them, which
    // clang before 16 does not allow of bindings.
    const auto range = speed_range(job);
    const double lo = range.first, hi = range.second;
    const double spread = lo > 0 ? hi / lo : 1.0;
    if (spread <= 1.0 + 1e-9) return 0;
    const bool fast = spread >= hetero_median_;
    GpuTypeMask mask = 0;
    for_each_usable_type(job, [&](GpuTypeId t, double v) {
      if (fast ? v >= 0.9 * hi : v <= 1.1 * lo) mask |= GpuTypeMask{1} << t;
    });
    return mask;
  }

  bool try_place_sized(const JobSpec& job, Allocation& alloc) {
    const bool max_fits_quota =
        job.max_members == job.min_members ||
        over_limit(current_leaf_, amounts_of(job, job.max_members)) == kNoId;
    if (max_fits_quota && policy_.scorer->place(scratch_, job, job.max_members, rng_, alloc)) {
      return true;
    }
    if (job.min_members >= job.max_members) return false;
    // An elastic gang: as many members as the free GPUs of its types could hold, else its
    // minimum (it grows later, policy.elastic, when GPUs are idle).
    const int64_t per_member = job.gpu_milli_per_gang(1);
    if (policy_.elastic && per_member > 0) {
      // Free capacity it may use (an upper bound on what it can get); the scratch state may be
      // mid-preemption here, so a restricted job's is summed afresh, not cached.
      const int64_t free = job.eligible_nodes == nullptr
                               ? scratch_.free_milli_matching(job.allowed_types)
                               : sum_free_on(job.allowed_types, *job.eligible_nodes);
      const auto fit =
          static_cast<int32_t>(std::min<int64_t>(job.max_members - 1, free / per_member));
      if (fit > job.min_members && over_limit(current_leaf_, amounts_of(job, fit)) == kNoId &&
          policy_.scorer->place(scratch_, job, fit, rng_, alloc)) {
        return true;
      }
    }
    return policy_.scorer->place(scratch_, job, job.min_members, rng_, alloc);
  }

  // ---- queue usage: live_ is what every queue holds on the scratch state ----

  void add_usage(QueueId leaf, const JobSpec& job, const Allocation& a, int sign) {
    const Amounts amt = fair_amounts_of(tree_.settings(), cluster_, job, a);
    for (QueueId q = leaf; q != kNoId; q = tree_.queue(q).parent) {
      for (size_t d = 0; d < kNumDims; ++d) live_[q][d] += sign * amt[d];
      const auto& types = tree_.queue(q).by_type;
      for (size_t k = 0; k < types.size(); ++k) {
        type_live_[q][k] += sign * milli_on_types(cluster_, a, GpuTypeMask{1} << types[k].type);
      }
    }
  }

  void init_type_usage() {
    type_live_.resize(tree_.size());
    for (QueueId q = 0; q < tree_.size(); ++q) {
      type_live_[q].assign(tree_.queue(q).by_type.size(), 0);
      has_type_quotas_ = has_type_quotas_ || !tree_.queue(q).by_type.empty();
    }
    if (!has_type_quotas_) return;
    for (size_t i = 0; i < snap_.running.size(); ++i) {
      for (QueueId q = running_leaf(i); q != kNoId; q = tree_.queue(q).parent) {
        const auto& types = tree_.queue(q).by_type;
        for (size_t k = 0; k < types.size(); ++k) {
          type_live_[q][k] +=
              milli_on_types(cluster_, *snap_.running[i].alloc, GpuTypeMask{1} << types[k].type);
        }
      }
    }
  }

  QueueId over_limit(QueueId leaf, const Amounts& need) const {
    return first_over_limit(tree_, live_, leaf, need);
  }

  // Per-GPU-type limits, known only once the placement is: the first queue `a` would take past
  // its limit on a GPU type, or kNoId.
  QueueId over_type_limit(QueueId leaf, const Allocation& a) const {
    for (QueueId q = leaf; q != kNoId; q = tree_.queue(q).parent) {
      const auto& types = tree_.queue(q).by_type;
      for (size_t k = 0; k < types.size(); ++k) {
        if (type_live_[q][k] + milli_on_types(cluster_, a, GpuTypeMask{1} << types[k].type) >
            types[k].limit_milli) {
          return q;
        }
      }
    }
    return kNoId;
  }

  // The first queue on the leaf's path, below `top`, that `need` more would take past its fair
  // share, or kNoId (first_over_share).
  QueueId over_share_below(QueueId leaf, QueueId top, const Amounts& need) const {
    return first_over_share(tree_, shares_, live_, leaf, top, need);
  }

  // The queue on the victim's side just below the lowest common ancestor of the two leaves:
  // the one whose borrowing the reclaim takes back.
  QueueId victim_side(QueueId reclaimer_leaf, QueueId victim_leaf) const {
    QueueId v = victim_leaf;
    while (v != kNoId) {
      const QueueId parent = tree_.queue(v).parent;
      bool common = false;
      for (QueueId a = reclaimer_leaf; a != kNoId; a = tree_.queue(a).parent) {
        common = common || a == parent;
      }
      if (common) return v;
      v = parent;
    }
    return kRootQueue;
  }

  // A FairShare reason: queue q (on the job's path) holds what it holds against its share.
  void fair_share_reason(PendingReason& reason, QueueId q) const {
    set_fair_share_reason(shares_, live_, q, reason);
  }

  void quota_reason(PendingReason& reason, QueueId q) {
    set_quota_reason(tree_, live_, q, reason);
    report(reason);
  }

  void report(const PendingReason& reason) {
    if (wants_reason_) out_.pending.push_back(reason);
  }

  void consider(uint32_t idx) {
    const PendingJob& pj = snap_.pending[idx];
    const JobSpec& job = *pj.spec;
    wants_reason_ = pj.wants_reason;
    PendingReason reason;
    reason.job = pj.id;
    reason.need_gpu_milli = job.gpu_milli_per_gang(job.min_members);
    reason.free_gpu_milli = scratch_.free_milli_matching(job.allowed_types);
    if (policy_.backfill == Backfill::kNone && head_ != kNoId) {
      reason.code = PendingCode::kBlockedByHead;
      reason.blocker = head_;
      report(reason);
      return;
    }
    current_leaf_ = shares_.leaf_of(job.tenant);
    current_preferred_ = nullptr;
    hold_for_data_ = data_held_ = false;
    if (snap_.preferred_nodes != nullptr) {
      const auto it = snap_.preferred_nodes->find(pj.id);
      if (it != snap_.preferred_nodes->end() && it->second != nullptr && !it->second->empty()) {
        current_preferred_ = it->second;
        hold_for_data_ = snap_.now - pj.queued_since < snap_.locality_wait_seconds;
      }
    }
    // Admission gates (engine/gates/): quota, bounded lending, carbon deferral, inference
    // reserve. A job one of them holds waits without a reservation.
    const GateInput gate_input{snap_, tree_, shares_, live_, scratch_};
    for (const auto& gate : gates_) {
      if (!gate->admit(gate_input, job, current_leaf_, reason)) {
        report(reason);
        return;
      }
    }
    // A job that could only start by eating into the reservation waits without trying to
    // place it: with a long queue behind a reserved head this is most of the queue.
    if (reservation_active_ &&
        backfit(must_use_reserved_types(job) ? reason.need_gpu_milli : 0, job) == Backfit::kNo) {
      wait_for_reservation(reason);
      return;
    }
    Allocation alloc;
    bool placed = false;
    bool too_hot = false;
    if (reason.free_gpu_milli >= reason.need_gpu_milli) {
      const ShapeKey shape = shape_of(job);
      if (auto cool = thermal_restriction(job)) {
        // Nodes without the thermal headroom for its members are out of bounds for it.
        JobSpec& restricted = thermal_job_;
        restricted = job;
        restricted.eligible_nodes = std::move(cool);
        placed = try_place(restricted, alloc);
        too_hot = !placed;
      } else if (current_preferred_ != nullptr || failed_.empty() || !failed_.contains(shape)) {
        placed = try_place(job, alloc);
        // (A job held for its data's nodes tried those only: no verdict on the shape.)
        if (!placed && !data_held_) failed_.insert(shape);
      }
    }
    if (data_held_) {
      reason.code = PendingCode::kDataLocality;
      report(reason);
      return;
    }
    if (too_hot) {
      reason.code = PendingCode::kPowerCapped;
      reason.node = hot_node_;
      reason.power_cap_w = snap_.power->node_headroom_w[hot_node_];
      reason.power_need_w = power_->node_draw_w(hot_node_) + hot_need_w_;
      report(reason);
      return;
    }
    if (placed) {
      if (const QueueId q = over_type_limit(current_leaf_, alloc); q != kNoId) {
        scratch_.release(alloc);
        quota_reason(reason, q);
        return;
      }
    }
    bool backfilled = false;
    int64_t from_extra = 0;
    if (placed && reservation_active_) {
      const int64_t overlap = reserved_milli(alloc);
      switch (backfit(overlap, job)) {
        case Backfit::kFree:
          break;
        case Backfit::kFromExtra:
          extra_milli_ -= overlap;
          from_extra = overlap;
          break;
        case Backfit::kNo:
          scratch_.release(alloc);
          wait_for_reservation(reason);
          return;
      }
      backfilled = true;
    }
    // Under a power cap a job that fits the GPUs may still wait for power (without a
    // reservation: it is not short of GPUs).
    if (placed && !admit_power(pj, alloc, reason)) {
      scratch_.release(alloc);
      extra_milli_ += from_extra;
      // A rack or node cap that the placement ran into may leave room elsewhere: place again
      // away from it (a few times), unless a reservation's bookkeeping depends on the
      // placement.
      if (reservation_active_ || !place_away_from_caps(pj, job, alloc, reason)) {
        report(reason);
        return;
      }
    }
    if (placed) {
      record_start(pj, idx, std::move(alloc), backfilled);
      return;
    }
    if (policy_.elastic && job.priority != PriorityClass::kBestEffort &&
        try_take_back_growth(pj, idx)) {
      return;
    }
    if (policy_.preemption && try_preempt(pj, idx)) return;
    if (power_reason_) {  // victims were found, but the start would break a power cap
      report(*power_reason_);
      power_reason_.reset();
      return;
    }
    reason.code = reason.free_gpu_milli < reason.need_gpu_milli ? PendingCode::kInsufficientGpus
                                                                : PendingCode::kGangCannotFit;
    // Restricted to a node set: how much of what is free it may use (a gang that fits the free
    // GPUs in total but not on its eligible nodes reads kGangCannotFit, and describe() says so).
    if (job.eligible_nodes != nullptr) {
      reason.eligible_free_gpu_milli = free_on_nodes(job.allowed_types, *job.eligible_nodes);
    }
    if (policy_.reclaim && job.priority != PriorityClass::kBestEffort) {
      const QueueId q =
          over_share_below(current_leaf_, kRootQueue, amounts_of(job, job.min_members));
      if (q != kNoId) fair_share_reason(reason, q);
    }
    report(reason);
    if (head_ == kNoId && policy_.backfill != Backfill::kGreedy) {
      head_ = pj.id;
      if (policy_.backfill == Backfill::kEasy) reserve(job, reason.need_gpu_milli);
    }
  }

  // Behind EASY's reservation over every GPU, consider() leaves a job waiting before it tries
  // anything for it (the tests before only choose its reason) when it needs more than the
  // reservation spares and is not known to end by its shadow time; and after that, without
  // trying to place it, when it needs more than is free and may not preempt (try_preempt
  // returns before it tries anything: no job left outranks a running one or crosses queues by
  // its class, and its shape may not reclaim, or failed to since usage last changed:
  // preemption_possible, may_reclaim). A job it would leave waiting whose reason is not wanted
  // changes nothing: the walk may pass over it. The rules hold until something changes (a
  // decision, a failed preemption noted) and are given again then: jobs passed over that a new
  // rule keeps are walked again (PendingWalk::pass_over). Elastic gangs are left out (placement
  // at their maximum, shrinking and growth are not bounded here). Where the walk passes over
  // jobs, no job may be considered out of its order (jump_to_short_jobs): some not reached lie
  // behind it.
  void pass_over(PendingWalk& walk) {
    if (policy_.elastic || pass_refused_ || !reservation_holds_all()) return;
    const std::pair<size_t, size_t> state{decisions_made(), preempt_failed_.size()};
    if (passing_ && state == passed_state_) return;
    passed_state_ = state;
    const bool preempt = preemption_possible();
    PassOver rule;
    rule.now = snap_.now;
    rule.shadow_time = shadow_time_;
    rule.extra_milli = extra_milli_;
    rule.room_milli = preempt && preempt_all_ ? std::numeric_limits<int64_t>::max()
                                              : scratch_.free_milli_matching(kAnyGpuType);
    rules_.assign(queue_->tenants(), rule);
    if (preempt && !preempt_all_) {
      for (const auto& shape_jobs : queue_->by_shape()) {
        const GangShape& shape = shape_jobs.first;
        if (may_reclaim(shape)) rules_[shape.tenant].add_preempt_need(shape.need);
      }
    }
    passing_ = walk.pass_over(rules_);
    pass_refused_ = !passing_;  // the walk never will: ask no more
  }

  size_t decisions_made() const {
    return out_.starts.size() + out_.preemptions.size() + out_.resizes.size() +
           (reservation_active_ ? 1 : 0);
  }

  // What what_more_can_start() subtracts from the queue's aggregates: the jobs the walk
  // reached, by rank, tenant and class (gang shapes skip visited jobs by their cursors).
  void visit(uint32_t idx) {
    visited_[idx] = true;
    const PendingJob& pj = snap_.pending[idx];
    const JobSpec& s = *pj.spec;
    if (policy_.preemption) bump(rank_visited_, policy_.order->rank(s, pj.attained_gpu_seconds));
    ++tenant_visited_[s.tenant];
    ++class_visited_[static_cast<size_t>(s.priority)];
  }
  static void bump(std::vector<std::pair<int64_t, uint32_t>>& counts, int64_t key) {
    for (auto& [k, n] : counts) {
      if (k == key) {
        ++n;
        return;
      }
    }
    counts.emplace_back(key, 1);
  }
  static uint32_t visited(const std::vector<std::pair<int64_t, uint32_t>>& counts, int64_t key) {
    for (const auto& [k, n] : counts) {
      if (k == key) return n;
    }
    return 0;
  }

  // What may still start of the jobs the walk has not reached: nothing, only jobs short
  // enough to end before EASY's shadow time, or anything (the walk goes on). A bound from the
  // queue's aggregates less what the walk reached: kNothing only when nothing can.
  enum class Bound { kNothing, kShortOnly, kAnything };
  Bound what_more_can_start() {
    if (policy_.backfill == Backfill::kNone && head_ != kNoId) return Bound::kNothing;
    if (policy_.elastic) return Bound::kAnything;  // take-back and shrinking: not bounded here
    if (reservation_holds_all()) return through_reservation();
    return placement_possible() || preemption_possible() ? Bound::kAnything : Bound::kNothing;
  }

  // The first job not yet reached of a shape, by estimate (visited jobs are skipped by a cursor
  // that only moves forward: once per cycle in all); null when every one was reached.
  const PendingQueue::ByEstimate::value_type* first_unvisited(
      const GangShape& shape, const PendingQueue::ByEstimate& jobs) {
    auto [it, fresh] = estimate_cursor_.try_emplace(shape, jobs.begin());
    while (it->second != jobs.end() && visited_[it->second->index]) ++it->second;
    return it->second == jobs.end() ? nullptr : &*it->second;
  }

  // Whether a job not yet reached may fit the free GPUs: a shape no larger that has not failed
  // to find room in this cycle (consider() would skip it too).
  bool placement_possible() {
    const int64_t free = scratch_.free_milli_matching(kAnyGpuType);
    for (const auto& [shape, jobs] : queue_->by_shape()) {
      if (shape.need > free) continue;
      if (!failed(shape) && first_unvisited(shape, jobs) != nullptr) return true;
    }
    return false;
  }

  // With EASY's reservation over every GPU (all types, every node), consider() lets a job go on
  // to place or preempt only if it fits the extra capacity or ends before the shadow time; of
  // those, it can start now only if it fits the free GPUs (in a shape that has not failed) or
  // may preempt. gate_tenants_ notes the tenants with a job that passes the gate at all: a
  // later decision (a preemption freeing GPUs, a queue going over its share) may let it start.
  Bound through_reservation() {
    const bool preempt = preemption_possible();
    const int64_t free = scratch_.free_milli_matching(kAnyGpuType);
    Bound bound = Bound::kNothing;
    gate_tenants_.assign(queue_->tenants(), false);
    for (const auto& [shape, jobs] : queue_->by_shape()) {
      const auto* first = first_unvisited(shape, jobs);
      if (first == nullptr) continue;
      const bool any_passes = shape.need <= 0 || shape.need <= extra_milli_;
      if (!any_passes && snap_.now + first->key.first > shadow_time_) continue;
      gate_tenants_[shape.tenant] = true;
      if (!startable_now(shape, preempt, free)) continue;
      if (any_passes) return Bound::kAnything;
      bound = Bound::kShortOnly;
    }
    return bound;
  }

  bool startable_now(const GangShape& shape, bool preempt, int64_t free) const {
    return (preempt && may_preempt(shape)) || (shape.need <= free && !failed(shape));
  }

  // Bound::kShortOnly in an order that interleaves tenants: a tenant with no job left that
  // could start or wants its reason is dropped from the walk, where that keeps the order of
  // the rest (its jobs would only be looked at and left waiting).
  void drop_idle_tenants(PendingWalk& walk) {
    for (uint32_t idx : unvisited_wanting()) gate_tenants_[snap_.pending[idx].spec->tenant] = true;
    for (TenantId t = 0; t < queue_->tenants(); ++t) {
      if (!gate_tenants_[t] && queue_->count(t) > tenant_visited_[t] && !dropped_[t]) {
        dropped_[t] = walk.drop_tenant(t);
      }
    }
  }

  // Bound::kShortOnly: only jobs that end before the shadow time (and fit the free GPUs, unless
  // one may preempt) could start; every other job the walk would reach would be left waiting
  // with nothing changed. When those jobs are few and their walk order is known without
  // walking (a key order: their keys; the fair walk: order_subset), it considers them and the
  // ones whose reason is wanted in that order, and nothing else. Else it returns false and the
  // walk goes on (when they are many, the next is near).
  bool jump_to_short_jobs(const PendingWalk& walk) {
    constexpr size_t kMaxJump = 64;
    std::vector<uint32_t> jobs;
    if (!short_jobs_now(jobs, kMaxJump) || !in_walk_order(walk, jobs)) return false;
    bool more = true;  // whether anything more can start
    for (size_t k = 0; k < jobs.size(); ++k) {
      const uint32_t idx = jobs[k];
      if (!more && !snap_.pending[idx].wants_reason) continue;
      visit(idx);
      const size_t decided = decisions_made();
      consider(idx);
      if (decisions_made() == decided) continue;
      more = what_more_can_start() != Bound::kNothing;
      if (!more) continue;
      // The decision may let jobs start that could not before (a preemption freed GPUs, a queue
      // went over its share): gather them again, and go on with those after this job in walk
      // order (those before it could not start when the walk would have reached them).
      std::vector<uint32_t> again;
      short_jobs_now(again, std::numeric_limits<size_t>::max());
      again.push_back(idx);
      in_walk_order(walk, again);
      const auto at = std::find(again.begin(), again.end(), idx);
      jobs.assign(at + 1, again.end());
      k = std::numeric_limits<size_t>::max();  // ++k: from the start of the new list
    }
    return true;
  }

  // The jobs not yet reached that could start now behind the reservation (through_reservation:
  // short ones, or any of a shape within the extra capacity), and those whose reason is wanted;
  // false if more than `limit` of the first.
  bool short_jobs_now(std::vector<uint32_t>& jobs, size_t limit) {
    jobs.clear();
    const bool preempt = preemption_possible();
    const int64_t free = scratch_.free_milli_matching(kAnyGpuType);
    for (const auto& [shape, by_estimate] : queue_->by_shape()) {
      if (!startable_now(shape, preempt, free)) continue;
      // After a decision, a shape within the extra capacity may be startable: all its jobs.
      const bool any_passes = shape.need <= 0 || shape.need <= extra_milli_;
      const auto it = estimate_cursor_.find(shape);
      for (auto e = it == estimate_cursor_.end() ? by_estimate.begin() : it->second;
           e != by_estimate.end() && (any_passes || snap_.now + e->key.first <= shadow_time_);
           ++e) {
        if (visited_[e->index] || snap_.pending[e->index].wants_reason) continue;
        if (jobs.size() == limit) return false;
        jobs.push_back(e->index);
      }
    }
    const std::vector<uint32_t> wanting = unvisited_wanting();
    jobs.insert(jobs.end(), wanting.begin(), wanting.end());
    return true;
  }

  // The jobs whose reason the caller wants that the walk has not reached (by index).
  std::vector<uint32_t> unvisited_wanting() const {
    std::vector<uint32_t> out;
    for (JobId id : queue_->wanting_reasons()) {
      const uint32_t idx = queue_->index_of(id);
      if (!visited_[idx]) out.push_back(idx);
    }
    return out;
  }

  // Sorts jobs into walk order without walking (a key order: their keys; the fair walk:
  // order_subset); false where that is not known.
  bool in_walk_order(const PendingWalk& walk, std::vector<uint32_t>& jobs) const {
    if (policy_.order->interleave() != QueueOrder::Interleave::kByKey) {
      return walk.order_subset(jobs);
    }
    sort_by_key(jobs);
    return true;
  }

  // Sorts jobs (indices into snap_.pending) by their pending_key, each key computed once.
  void sort_by_key(std::vector<uint32_t>& jobs) const {
    std::vector<std::pair<PendingKey, uint32_t>> keyed;
    keyed.reserve(jobs.size());
    for (uint32_t idx : jobs)
      keyed.emplace_back(policy_.order->pending_key(snap_.pending[idx]), idx);
    std::sort(keyed.begin(), keyed.end());
    for (size_t k = 0; k < jobs.size(); ++k) jobs[k] = keyed[k].second;
  }

  // Nothing more can start and the head is chosen: every job the walk has not reached would be
  // left waiting for the reason it gets now, in any order (by key, to be deterministic); those
  // whose reason is wanted get it.
  void explain_rest() {
    std::vector<uint32_t> rest = unvisited_wanting();
    sort_by_key(rest);
    for (uint32_t idx : rest) consider(idx);
  }

  bool failed(const GangShape& g) const {
    return !failed_.empty() && failed_.contains(shape_key(g));
  }
  // The ShapeKey of the jobs of a gang shape (shape_of).
  static ShapeKey shape_key(const GangShape& g) {
    const MemberDemand demand{g.gpus, g.gpu_milli, g.cpu_milli, g.mem_mib};
    return ShapeKey{demand,
                    g.min_members,
                    g.max_members,
                    g.types,
                    static_cast<Level>(g.span),
                    reinterpret_cast<const NodeSet*>(g.nodes)};
  }

  bool reservation_holds_all() const {
    if (!reservation_active_ || reserved_nodes_ != nullptr) return false;
    const GpuTypeMask present = cluster_.present_types();
    const GpuTypeMask reserved = reserved_types_ == kAnyGpuType ? present : reserved_types_;
    return (present & ~reserved) == 0;
  }

  // Whether a job not yet reached might preempt someone (victim_kind): it outranks a running
  // job, or, with reclaim, it is of a class that crosses queues, or there are per-GPU-type
  // guarantees, or it has a gang shape that may reclaim (may_reclaim: its queue stays within
  // its share with it, or it may be starving, and no attempt of the shape failed since usage
  // last changed). Also notes for whom (may_preempt): everyone, or the tenants with such a
  // shape.
  bool preemption_possible() {
    preempt_all_ = false;
    preempt_tenants_.assign(queue_->tenants(), false);
    if (!policy_.preemption || snap_.running.empty()) return false;
    const PendingQueue& q = *queue_;
    rank_bounds();
    for (auto it = q.ranks().rbegin(); it != q.ranks().rend() && it->first > min_running_rank_;
         ++it) {
      if (it->second > visited(rank_visited_, it->first)) return preempt_all_ = true;
    }
    if (!policy_.reclaim) return false;
    auto unvisited = [&](PriorityClass c) {
      return q.count(c) - class_visited_[static_cast<size_t>(c)];
    };
    if (unvisited(PriorityClass::kInferenceCritical) > 0) return preempt_all_ = true;
    if (any_best_effort_running_ &&
        unvisited(PriorityClass::kResearch) + unvisited(PriorityClass::kProduction) > 0) {
      return preempt_all_ = true;
    }
    if (has_type_quotas_) return preempt_all_ = true;
    // Reclaim takes only from queues over their share (gave_back; a starving gang, from those
    // over it when the cycle began).
    const bool starving = tree_.settings().starving_after_seconds > 0;
    bool any_over = false;
    for (QueueId k = 0; k < tree_.size() && !any_over; ++k) {
      any_over = k != kRootQueue && (!all_le(live_[k], shares_.entitled[k]) ||
                                     (starving && !all_le(shares_.usage[k], shares_.entitled[k])));
    }
    if (!any_over) return false;
    // Past the checks above, a job reaches past its own queue only by reclaim (try_preempt's
    // cross_queue is may_reclaim): the tenants with a shape not yet reached that may reclaim.
    bool any = false;
    for (const auto& [shape, jobs] : q.by_shape()) {
      if (preempt_tenants_[shape.tenant] || !may_reclaim(shape)) continue;
      if (first_unvisited(shape, jobs) == nullptr) continue;
      preempt_tenants_[shape.tenant] = true;
      any = true;
    }
    return any;
  }

  // Whether a job of `shape` may preempt, as preemption_possible() found: anyone may, or its
  // tenant has a shape that may reclaim and this is one.
  bool may_preempt(const GangShape& shape) const {
    return preempt_all_ || (preempt_tenants_[shape.tenant] && may_reclaim(shape));
  }

  // For preemption_possible's per-tenant case (no job not yet reached outranks a running one
  // or crosses queues by its class, no per-GPU-type quotas): whether a job of `shape` could
  // get past try_preempt's early returns. It may reclaim while its queue stays within its share
  // with it, or as a starving gang (larger than the share while the queue holds less, if it
  // waited long enough: unknown here, so both are allowed); and not when the attempt of the
  // same shape, queue, rank and finding failed since usage last changed (preempt_failed_),
  // for every rank waiting. (Best-effort jobs never reclaim: counting them in is only loose.)
  bool may_reclaim(const GangShape& shape) const {
    const QueueId leaf = shares_.leaf_of(shape.tenant);
    const Amounts need{shape.need, shape.cpu_milli * shape.min_members,
                       shape.mem_mib * shape.min_members};
    const int64_t holds = live_[leaf][kGpuDim], share = shares_.entitled[leaf][kGpuDim];
    const bool within = all_le(live_[leaf] + need, shares_.entitled[leaf]);
    const bool may_starve =
        tree_.settings().starving_after_seconds > 0 && need[kGpuDim] > share && holds < share;
    if (!within && !may_starve) return false;
    if (preempt_failed_.empty()) return true;
    const ShapeKey key = shape_key(shape);
    for (const auto& rank_count : queue_->ranks()) {
      const int64_t rank = rank_count.first;
      // A job that is not starving may reclaim only `within`; one that is may anyway.
      if (within && !preempt_failed_.contains(PreemptKey{key, leaf, rank, true, false})) {
        return true;
      }
      if (may_starve && !preempt_failed_.contains(PreemptKey{key, leaf, rank, true, true})) {
        return true;
      }
    }
    return false;
  }

  // Ranks are fixed for the cycle (attained service is as of the snapshot): computed once.
  // The lowest and whether any running job is best-effort: from the caller's running set when
  // it keeps them for this order (rank_bounds), else with every running job's rank.
  void rank_bounds() {
    if (rank_bounds_known_) return;
    rank_bounds_known_ = true;
    const RunningSet* rs = snap_.running_set;
    if (rs != nullptr && rs->ranks_for(*policy_.order)) {
      min_running_rank_ = rs->min_rank();
      any_best_effort_running_ = rs->count(PriorityClass::kBestEffort) > 0;
      return;
    }
    rank_running();
  }
  void rank_running() {
    if (!running_rank_.empty() || snap_.running.empty()) return;
    running_rank_.reserve(snap_.running.size());
    int64_t lowest = std::numeric_limits<int64_t>::max();
    bool best_effort = false;
    for (const RunningJob& r : snap_.running) {
      running_rank_.push_back(policy_.order->rank(*r.spec, r.attained_at(snap_.now)));
      lowest = std::min(lowest, running_rank_.back());
      best_effort |= r.spec->priority == PriorityClass::kBestEffort;
    }
    min_running_rank_ = lowest;
    any_best_effort_running_ = best_effort;
    rank_bounds_known_ = true;
  }

  // By index in snap_.running, filled on first use (most cycles preempt, shrink and grow
  // nobody, and need none of them): its leaf queue, whether it was evicted this cycle, and
  // the members it was resized to.
  QueueId running_leaf(size_t i) const {
    if (running_leaf_.empty()) {
      running_leaf_.reserve(snap_.running.size());
      for (const RunningJob& r : snap_.running) {
        running_leaf_.push_back(shares_.leaf_of(r.spec->tenant));
      }
    }
    return running_leaf_[i];
  }
  bool evicted(size_t i) const { return i < evicted_.size() && evicted_[i]; }
  void set_evicted(size_t i) {
    if (evicted_.empty()) evicted_.assign(snap_.running.size(), false);
    evicted_[i] = true;
  }
  int32_t resized(size_t i) const { return i < resized_.size() ? resized_[i] : 0; }
  void set_resized(size_t i, int32_t members) {
    if (resized_.empty()) resized_.assign(snap_.running.size(), 0);
    resized_[i] = members;
  }

  // EASY's test for a job that would hold `overlap` milli-GPUs of the reserved types: it may
  // start freely (no overlap, or it ends before the shadow time), out of the capacity the head
  // job will not need, or not at all.
  enum class Backfit { kFree, kFromExtra, kNo };
  Backfit backfit(int64_t overlap, const JobSpec& job) const {
    const double est = job.duration_estimate;
    if (overlap == 0 || (est >= 0 && snap_.now + est <= shadow_time_)) return Backfit::kFree;
    return overlap <= extra_milli_ ? Backfit::kFromExtra : Backfit::kNo;
  }

  // Whether every GPU `job` could be placed on is of a type the reservation holds (and, when
  // the head is restricted to a node set, on one of its nodes), so that its overlap is known
  // (its whole demand) before placing it.
  bool must_use_reserved_types(const JobSpec& job) const {
    if (job.demand.gpus == 0) return false;
    if (reserved_nodes_ != nullptr &&
        (job.eligible_nodes == nullptr || !job.eligible_nodes->is_subset_of(*reserved_nodes_))) {
      return false;
    }
    const GpuTypeMask present = cluster_.present_types();
    const GpuTypeMask mine = job.allowed_types == kAnyGpuType ? present : job.allowed_types;
    const GpuTypeMask reserved = reserved_types_ == kAnyGpuType ? present : reserved_types_;
    return (mine & ~reserved & present) == 0;
  }

  void wait_for_reservation(PendingReason& reason) {
    reason.code = PendingCode::kWaitingForReservation;
    reason.blocker = head_;
    report(reason);
  }

  void record_start(const PendingJob& pj, uint32_t idx, Allocation alloc, bool backfilled) {
    start_holder_.push_back(admitted_holder_);
    admitted_holder_ = kNoHolder;
    add_usage(current_leaf_, *pj.spec, alloc, +1);
    if (!free_on_nodes_.empty()) free_on_nodes_.clear();  // the committed scratch state changed
    preempt_failed_.clear();  // usage changed: a queue may now be over its share
    const double est = pj.spec->duration_estimate;
    started_.emplace_back(est >= 0 ? snap_.now + est : kNever, out_.starts.size());
    out_.starts.push_back(Start{pj.id, idx, std::move(alloc), backfilled});
  }

  // EASY: when will the head job fit, counting only GPUs of its types (on its eligible nodes,
  // when it is restricted to a node set), and how much more than it needs will be free then.
  void reserve(const JobSpec& job, int64_t need) {
    reservation_active_ = true;
    reserved_types_ = job.allowed_types;
    reserved_nodes_ = job.eligible_nodes.get();
    std::vector<std::pair<double, int64_t>> ends;
    for (size_t i = 0; i < snap_.running.size(); ++i) {
      const RunningJob& r = snap_.running[i];
      if (evicted(i) || r.expected_end < 0) continue;
      ends.emplace_back(std::max(r.expected_end, snap_.now), reserved_milli(*r.alloc));
    }
    for (const auto& [end, s] : started_) {
      if (end != kNever) ends.emplace_back(end, reserved_milli(out_.starts[s].alloc));
    }
    std::sort(ends.begin(), ends.end());
    int64_t free = reserved_nodes_ == nullptr ? scratch_.free_milli_matching(reserved_types_)
                                              : free_on_nodes(reserved_types_, *reserved_nodes_);
    shadow_time_ = kNever;
    extra_milli_ = 0;
    for (const auto& [end, milli] : ends) {
      free += milli;
      if (free >= need) {
        shadow_time_ = end;
        extra_milli_ = free - need;
        break;
      }
    }
  }

  // Who may give way to a pending job. Without queue-aware preemption: any running job of
  // strictly lower rank. With it (policy.reclaim): within the job's own queue by rank; across
  // queues, best-effort jobs give way to anyone, inference-critical jobs preempt lower classes
  // anywhere, and otherwise only by reclaim: the job's queue stays within its fair share, the
  // victim's class is not above the job's (never inference-critical), and the victim's side
  // of the tree is over its fair share (checked again as victims are taken, so a queue gives
  // back only what it borrowed, give or take one gang).
  enum class Kind : uint8_t { kNo, kPriority, kReclaim, kTypeReclaim };
  Kind victim_kind(const JobSpec& job, int64_t rank, bool may_reclaim, const Amounts& need,
                   size_t i) const {
    const int64_t rr = running_rank_[i];
    if (!policy_.reclaim || running_leaf(i) == current_leaf_) {
      return rr < rank ? Kind::kPriority : Kind::kNo;
    }
    const PriorityClass mine = job.priority;
    const PriorityClass theirs = snap_.running[i].spec->priority;
    if (theirs == PriorityClass::kBestEffort && mine != PriorityClass::kBestEffort) {
      return Kind::kPriority;
    }
    if (mine == PriorityClass::kInferenceCritical && theirs < mine) return Kind::kPriority;
    const RunningJob& r = snap_.running[i];
    if (may_reclaim && theirs <= mine && theirs != PriorityClass::kInferenceCritical &&
        snap_.now >= r.reclaim_protected_until &&
        (within_guarantee_ || tree_.settings().reclaim_min_runtime_seconds <= 0 ||
         snap_.now - r.start_time >= tree_.settings().reclaim_min_runtime_seconds)) {
      const QueueId side = victim_side(current_leaf_, running_leaf(i));
      // A starving gang takes from queues that were borrowing when the cycle began, as much as
      // it needs (it is larger than its share, so they may end below theirs for its turn).
      if (starving_ ? !all_le(shares_.usage[side], shares_.entitled[side])
                    : over_share_below(current_leaf_, tree_.queue(side).parent, need) == kNoId) {
        return Kind::kReclaim;
      }
    }
    if (type_room_ != 0 && theirs <= mine && theirs != PriorityClass::kInferenceCritical &&
        snap_.now >= r.reclaim_protected_until && !in_subtree(running_leaf(i), guarantor_) &&
        over_type_guarantee(victim_side(guarantor_, running_leaf(i)), *r.alloc)) {
      return Kind::kTypeReclaim;
    }
    return Kind::kNo;
  }

  // Whether a reclaim victim's side of the tree is no longer over what it may hold (checked as
  // victims are taken, so a queue gives back only what it borrowed, give or take one gang).
  bool gave_back(Kind kind, size_t i) const {
    if (kind == Kind::kReclaim) {
      if (starving_) return false;
      const QueueId side = victim_side(current_leaf_, running_leaf(i));
      if (all_le(live_[side], shares_.entitled[side])) return true;
      // Within the tolerance band (above guarantees only: a guarantee is taken back exactly).
      const double tol = tree_.settings().reclaim_tolerance;
      return tol > 0 && !within_guarantee_ &&
             static_cast<double>(live_[side][kGpuDim]) <=
                 (1 + tol) * static_cast<double>(shares_.entitled[side][kGpuDim]);
    }
    if (kind == Kind::kTypeReclaim) {
      return !over_type_guarantee(victim_side(guarantor_, running_leaf(i)),
                                  *snap_.running[i].alloc);
    }
    return false;
  }

  // After a rack or node power cap refused `job`'s placement: places it again without the
  // nodes of the racks and nodes that refused it, up to 4 times, and admits it. On success
  // `alloc` holds the committed placement; on failure `reason` says why it waits.
  bool place_away_from_caps(const PendingJob& pj, const JobSpec& job, Allocation& alloc,
                            PendingReason& reason) {
    std::vector<bool> banned(cluster_.nodes().size(), false);
    for (int attempt = 0; attempt < 4; ++attempt) {
      if (reason.rack != kNoId && reason.rack < cluster_.racks().size()) {
        const Rack& r = cluster_.racks()[reason.rack];
        for (NodeId n = r.first_node; n < r.first_node + r.num_nodes; ++n) banned[n] = true;
      } else if (reason.node != kNoId && reason.node < banned.size()) {
        banned[reason.node] = true;
      } else {
        return false;  // the cluster's own cap: no placement helps
      }
      JobSpec& away = thermal_job_;
      away = job;
      away.eligible_nodes = eligible_where(job, [&](NodeId n) { return !banned[n]; });
      Allocation again;
      if (!try_place(away, again)) return false;
      if (over_type_limit(current_leaf_, again) != kNoId) {
        scratch_.release(again);
        return false;
      }
      PendingReason why = reason;
      why.rack = kNoId;
      why.node = kNoId;
      if (admit_power(pj, again, why)) {
        alloc = std::move(again);
        return true;
      }
      scratch_.release(again);
      reason = why;
    }
    return false;
  }

  // ---- thermal headroom ----

  // What one member of `job` would draw above idle on node n (at its preferred limit there).
  double member_draw_w(const JobSpec& job, NodeId n) const {
    const PowerView& v = *snap_.power;
    const GpuTypeId t = cluster_.node(n).gpu_type;
    const double limit =
        preferred_limit_on(v, t, job.model, energy_weight(shares_.leaf_of(job.tenant)));
    return gpu_increment(v, t, job.model, limit) * job.demand.gpus *
           static_cast<double>(job.demand.gpu_milli) / kMilliPerGpu;
  }

  // The nodes `job` may use given thermal headroom, when some node it could otherwise use lacks
  // the headroom for one of its members; null when none is excluded (or no headroom is set).
  // Sets hot_node_ / hot_need_w_ to one excluded node, for the pending reason.
  std::shared_ptr<const NodeSet> thermal_restriction(const JobSpec& job) {
    if (!power_ || snap_.power->node_headroom_w.empty()) return nullptr;
    const std::vector<double>& room = snap_.power->node_headroom_w;
    if (hot_nodes_.empty()) {
      for (NodeId n = 0; n < room.size(); ++n) {
        if (room[n] >= 0) hot_nodes_.push_back(n);
      }
    }
    auto lacks = [&](NodeId n) {
      return room[n] >= 0 && room[n] - power_->node_draw_w(n) < member_draw_w(job, n) - 1e-9;
    };
    bool any = false;
    for (NodeId n : hot_nodes_) {
      if (job.eligible_nodes != nullptr && !job.eligible_nodes->contains(n)) continue;
      if (lacks(n)) {
        any = true;
        hot_node_ = n;
        hot_need_w_ = member_draw_w(job, n);
        break;
      }
    }
    if (!any) return nullptr;
    return eligible_where(job, [&](NodeId n) { return !lacks(n); });
  }

  // The nodes `job` may use (its own restriction, if any) for which `keep` holds.
  template <class Keep>
  std::shared_ptr<const NodeSet> eligible_where(const JobSpec& job, Keep&& keep) const {
    return std::make_shared<const NodeSet>(
        NodeSet::matching(cluster_.nodes().size(), [&](NodeId n) {
          return (job.eligible_nodes == nullptr || job.eligible_nodes->contains(n)) && keep(n);
        }));
  }

  // ---- carbon-aware deferral ----

  // Whether best-effort `job` should wait: a start at least kCarbonMinSaving cleaner (the mean
  // intensity over its expected run, or at its start without an estimate) comes before the
  // end of the wait its queue allows (carbon_defer after submission). Candidate starts are the
  // series' change points.
  // ---- power (engine/power_budget.h) ----

  double energy_weight(QueueId leaf) const {
    const double own = leaf < tree_.size() ? tree_.queue(leaf).energy_weight : kUnknown;
    return own >= 0 ? own : snap_.power->default_energy_weight;
  }

  // Whether `job` may start on `alloc` under the power caps (lowering limits when the policy
  // shifts them); on success the next record_start takes the ledger's holder, on failure
  // `reason` says which cap. Always true without a power view.
  bool admit_power(const PendingJob& pj, const Allocation& alloc, PendingReason& reason) {
    if (!power_) return true;
    const double want = preferred_limit(*snap_.power, cluster_, *pj.spec, alloc,
                                        energy_weight(shares_.leaf_of(pj.spec->tenant)));
    const size_t h = power_->add(pj.id, *pj.spec, alloc, want, want);
    if (!power_->admit(h, reason)) return false;
    admitted_holder_ = h;
    return true;
  }

  // After every start: raise lowered limits within the caps, and report each start's limit and
  // each running job's changed one.
  void settle_power() {
    power_->restore();
    for (size_t k = 0; k < out_.starts.size(); ++k) {
      if (k < start_holder_.size() && start_holder_[k] != kNoHolder) {
        out_.starts[k].power_limit_w = power_->limit(start_holder_[k]);
      }
    }
    for (size_t i = 0; i < snap_.running.size(); ++i) {
      if (evicted(i)) continue;
      const RunningJob& r = snap_.running[i];
      const double was = r.power_limit_w > 0 ? r.power_limit_w : default_limit(i);
      if (std::abs(power_->limit(i) - was) > 1e-6) {
        out_.power_limits.push_back(PowerLimit{r.id, power_->limit(i)});
      }
    }
  }

  double default_limit(size_t running) const {
    const Allocation& a = *snap_.running[running].alloc;
    const GpuTypeId t = a.member_node.empty() ? 0 : cluster_.node(a.member_node.front()).gpu_type;
    return snap_.power->model->spec(t).tdp_w;
  }

  // ---- elastic gangs ----

  // Members [begin, end) of an allocation, as an allocation of their own.
  static Allocation members_of(const Allocation& a, int32_t begin, int32_t end) {
    Allocation out;
    out.gpus_per_member = a.gpus_per_member;
    out.cpu_milli_per_member = a.cpu_milli_per_member;
    out.mem_mib_per_member = a.mem_mib_per_member;
    const auto g = static_cast<size_t>(a.gpus_per_member);
    for (int32_t m = begin; m < end; ++m) {
      out.member_node.push_back(a.member_node[static_cast<size_t>(m)]);
      out.shares.insert(out.shares.end(), a.shares.begin() + static_cast<std::ptrdiff_t>(m * g),
                        a.shares.begin() + static_cast<std::ptrdiff_t>((m + 1) * g));
    }
    return out;
  }

  // Releases (sign -1) or restores (+1) member m of running job i on the scratch state and in
  // its queues' usage.
  void toggle_member(size_t i, int32_t m, int sign) {
    const Allocation one = members_of(*snap_.running[i].alloc, m, m + 1);
    if (sign < 0) {
      scratch_.release(one);
    } else {
      scratch_.allocate(one);
    }
    add_usage(running_leaf(i), *snap_.running[i].spec, one, sign);
  }

  // Shrinks the elastic gangs among `cands` (victim order), one member at a time and never
  // below their minimum, until `place_as` fits; then records the shrinks and the start. When it
  // does not fit, everything is restored and the caller may preempt whole gangs.
  template <class Candidate>
  bool try_shrink(const PendingJob& pj, uint32_t idx, const std::vector<Candidate>& cands,
                  const JobSpec& place_as) {
    std::vector<std::pair<size_t, int32_t>> shrunk;  // (running index, members kept)
    Allocation alloc;
    bool placed = false;
    for (const Candidate& c : cands) {
      const RunningJob& r = snap_.running[c.index];
      int32_t members = r.alloc->members();
      if (r.spec->min_members >= members || r.start_time > snap_.now) continue;
      if (gave_back(c.kind, c.index)) continue;
      while (!placed && members > r.spec->min_members) {
        toggle_member(c.index, --members, -1);
        if (try_place(place_as, alloc)) {
          if (over_type_limit(current_leaf_, alloc) == kNoId) {
            placed = true;
          } else {
            scratch_.release(alloc);
          }
        }
      }
      shrunk.emplace_back(c.index, members);
      if (placed) break;
    }
    if (!placed) {
      for (auto it = shrunk.rbegin(); it != shrunk.rend(); ++it) {
        const int32_t had = snap_.running[it->first].alloc->members();
        for (int32_t m = it->second; m < had; ++m) toggle_member(it->first, m, +1);
      }
      return false;
    }
    for (const auto& [i, keep] : shrunk) {
      set_resized(i, keep);
      out_.resizes.push_back(
          Resize{snap_.running[i].id, members_of(*snap_.running[i].alloc, 0, keep), false, pj.id});
    }
    failed_.clear();
    shrink_failed_.clear();
    record_start(pj, idx, std::move(alloc), false);
    out_.starts.back().starving = starving_;
    return true;
  }

  // What an elastic gang holds above its minimum it only borrowed from idle capacity: any
  // waiting job (not best-effort) may take it back, the largest surplus first (then the
  // youngest run), before anything is preempted by priority or reclaim.
  bool try_take_back_growth(const PendingJob& pj, uint32_t idx) {
    const JobSpec& job = *pj.spec;
    const ShapeKey shape = shape_of(job);
    if (shrink_failed_.contains(shape)) return false;
    struct Surplus {
      size_t index;
      Kind kind;
    };
    std::vector<Surplus> cands;
    for (size_t i = 0; i < snap_.running.size(); ++i) {
      const RunningJob& r = snap_.running[i];
      if (evicted(i) || resized(i) != 0 || r.alloc->members() <= r.spec->min_members) continue;
      // Only gangs holding GPUs it could use: its types, on its eligible nodes.
      if (milli_on_types(cluster_, *r.alloc, job.allowed_types, job.eligible_nodes.get()) == 0) {
        continue;
      }
      cands.push_back({i, Kind::kPriority});
    }
    std::sort(cands.begin(), cands.end(), [&](const Surplus& a, const Surplus& b) {
      const RunningJob &x = snap_.running[a.index], &y = snap_.running[b.index];
      const int32_t sx = x.alloc->members() - x.spec->min_members;
      const int32_t sy = y.alloc->members() - y.spec->min_members;
      return std::make_tuple(-sx, -x.start_time, x.id) < std::make_tuple(-sy, -y.start_time, y.id);
    });
    starving_ = false;
    if (!cands.empty() && try_shrink(pj, idx, cands, job)) return true;
    shrink_failed_.insert(shape);
    return false;
  }

  // Grows running elastic gangs into what is left, oldest run first, each by as many members
  // as fit (up to its maximum and its queues' limits). A gang that started or was resized
  // less than resize_interval ago, or is expected to end within it, stays as it is: each
  // resize costs a restart.
  void grow_elastic() {
    std::vector<size_t> order;
    for (size_t i = 0; i < snap_.running.size(); ++i) {
      const RunningJob& r = snap_.running[i];
      if (evicted(i) || resized(i) != 0 || r.alloc->members() >= r.spec->max_members) continue;
      if (snap_.now - r.start_time < policy_.resize_interval) continue;
      if (r.expected_end >= 0 && r.expected_end - snap_.now < policy_.resize_interval) continue;
      order.push_back(i);
    }
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      const RunningJob &x = snap_.running[a], &y = snap_.running[b];
      return std::tie(x.start_time, x.id) < std::tie(y.start_time, y.id);
    });
    for (size_t i : order) {
      const RunningJob& r = snap_.running[i];
      current_leaf_ = running_leaf(i);
      const int32_t members = r.alloc->members();
      for (int32_t k = r.spec->max_members - members; k > 0; --k) {
        if (over_limit(current_leaf_, amounts_of(*r.spec, k)) != kNoId) continue;
        Allocation add;
        if (!policy_.scorer->place(scratch_, *r.spec, k, rng_, add)) continue;
        if (over_type_limit(current_leaf_, add) != kNoId) {
          scratch_.release(add);
          continue;
        }
        add_usage(current_leaf_, *r.spec, add, +1);
        Allocation grown = *r.alloc;
        grown.member_node.insert(grown.member_node.end(), add.member_node.begin(),
                                 add.member_node.end());
        grown.shares.insert(grown.shares.end(), add.shares.begin(), add.shares.end());
        set_resized(i, members + k);
        out_.resizes.push_back(Resize{r.id, std::move(grown), true, kNoId});
        break;
      }
    }
  }

  bool in_subtree(QueueId leaf, QueueId q) const {
    for (QueueId a = leaf; a != kNoId; a = tree_.queue(a).parent) {
      if (a == q) return true;
    }
    return false;
  }

  // Per-GPU-type guarantees: the lowest queue on the job's path still short of what it is
  // promised on a GPU type the job may use (by at least the gang), and those types. Such a
  // queue takes GPUs of those types back from queues holding more of them than they are
  // promised, even when it holds its whole share on other types: the guarantee is for that
  // hardware.
  void find_type_room(const JobSpec& job, int64_t need_gpu_milli) {
    for (QueueId q = current_leaf_; q != kNoId; q = tree_.queue(q).parent) {
      const auto& types = tree_.queue(q).by_type;
      GpuTypeMask room = 0;
      for (size_t k = 0; k < types.size(); ++k) {
        if (type_allowed(job.allowed_types, types[k].type) &&
            type_live_[q][k] + need_gpu_milli <= types[k].guarantee_milli) {
          room |= GpuTypeMask{1} << types[k].type;
        }
      }
      if (room != 0) {
        type_room_ = room;
        guarantor_ = q;
        return;
      }
    }
  }

  // Whether `side` holds more than it is promised of a type in type_room_ that `a` holds.
  bool over_type_guarantee(QueueId side, const Allocation& a) const {
    const auto& types = tree_.queue(side).by_type;
    for (GpuTypeMask rest = type_room_; rest != 0; rest &= rest - 1) {
      const auto t = static_cast<GpuTypeId>(std::countr_zero(rest));
      if (milli_on_types(cluster_, a, GpuTypeMask{1} << t) == 0) continue;
      const auto it = std::find_if(types.begin(), types.end(),
                                   [&](const TypeQuota& tq) { return tq.type == t; });
      if (it == types.end()) return true;  // promised none of it: all it holds is borrowed
      if (type_live_[side][static_cast<size_t>(it - types.begin())] > it->guarantee_milli) {
        return true;
      }
    }
    return false;
  }

  // Frees running jobs that may give way (victim_kind) until `pj` fits, then keeps back every
  // victim that was not needed. Victims: lowest rank first, then least work lost since the
  // last checkpoint, then the youngest.
  bool try_preempt(const PendingJob& pj, uint32_t idx) {
    const JobSpec& job = *pj.spec;
    const int64_t rank = policy_.order->rank(job, pj.attained_gpu_seconds);
    rank_bounds();
    const Amounts need = amounts_of(job, job.min_members);
    // Whether the job's queues stay within their share is checked per victim (only the queues
    // below the common ancestor change usage), in victim_kind. A starving gang (larger than
    // its queue's whole share, waiting long) may reclaim while its queue holds less than that.
    const FairnessSettings& fs = tree_.settings();
    const int64_t share = shares_.entitled[current_leaf_][kGpuDim];
    starving_ = fs.starving_after_seconds > 0 && need[kGpuDim] > share &&
                snap_.now - pj.queued_since >= fs.starving_after_seconds &&
                live_[current_leaf_][kGpuDim] < share;
    // Taking back a guarantee is never delayed by reclaim_min_runtime or reclaim_after.
    within_guarantee_ = live_[current_leaf_][kGpuDim] + need[kGpuDim] <=
                        tree_.queue(current_leaf_).guarantee[kGpuDim];
    const bool persistent = within_guarantee_ || fs.reclaim_after_seconds <= 0 ||
                            snap_.now - pj.queued_since >= fs.reclaim_after_seconds;
    const bool may_reclaim = policy_.reclaim && job.priority != PriorityClass::kBestEffort &&
                             (starving_ || (persistent && all_le(live_[current_leaf_] + need,
                                                                 shares_.entitled[current_leaf_])));
    type_room_ = 0;
    guarantor_ = kNoId;
    if (policy_.reclaim && job.priority != PriorityClass::kBestEffort && !may_reclaim) {
      find_type_room(job, need[kGpuDim]);
    }
    // Reclaiming by a type guarantee places the job on those types only.
    JobSpec restricted;
    const JobSpec* place_as = &job;
    if (type_room_ != 0) {
      restricted = job;
      restricted.allowed_types = type_room_;
      place_as = &restricted;
    }
    const bool cross_queue = may_reclaim || type_room_ != 0 ||
                             (policy_.reclaim && job.priority != PriorityClass::kBestEffort &&
                              any_best_effort_running_) ||
                             job.priority == PriorityClass::kInferenceCritical;
    if (rank <= min_running_rank_ && !cross_queue) return false;  // outranks nobody
    const PreemptKey key{shape_of(job), current_leaf_, rank, may_reclaim, starving_};
    if (preempt_failed_.contains(key)) return false;  // nothing changed since it last failed
    rank_running();
    struct Candidate {
      int64_t rank;
      double lost;
      double start;
      JobId id;
      size_t index;
      Kind kind;
    };
    std::vector<Candidate> cands;
    // Only capacity the job may use counts, and only gangs holding some of it are victims: GPUs
    // of its types, on its eligible nodes when it is restricted to a node set.
    const NodeSet* only = job.eligible_nodes.get();
    int64_t available = only == nullptr ? scratch_.free_milli_matching(place_as->allowed_types)
                                        : free_on_nodes(place_as->allowed_types, *only);
    for (size_t i = 0; i < snap_.running.size(); ++i) {
      if (evicted(i) || resized(i) != 0) continue;
      const Kind kind = victim_kind(job, rank, may_reclaim, need, i);
      if (kind == Kind::kNo) continue;
      const RunningJob& r = snap_.running[i];
      const int64_t m = milli_on_types(cluster_, *r.alloc, place_as->allowed_types, only);
      if (m == 0) continue;
      available += m;
      const double lost = r.spec->checkpoint_interval > 0
                              ? static_cast<double>(r.alloc->gpu_milli()) *
                                    std::max(0.0, snap_.now - r.last_checkpoint)
                              : 0.0;
      cands.push_back({running_rank_[i], lost, r.start_time, r.id, i, kind});
    }
    if (cands.empty() || available < job.gpu_milli_per_gang(job.min_members)) {
      preempt_failed_.insert(key);
      return false;
    }
    std::sort(cands.begin(), cands.end(), [](const Candidate& a, const Candidate& b) {
      return std::make_tuple(a.rank, a.lost, -a.start, a.id) <
             std::make_tuple(b.rank, b.lost, -b.start, b.id);
    });
    // Elastic victims shrink towards their minimum before anyone is preempted whole.
    if (policy_.elastic && try_shrink(pj, idx, cands, *place_as)) return true;
    std::vector<size_t> victims;
    std::vector<Kind> kinds;  // by running index, for the victims
    Allocation alloc;
    bool placed = false;
    auto evict = [&](size_t v, int sign) {
      const Allocation& va = *snap_.running[v].alloc;
      if (sign < 0) {
        scratch_.release(va);
      } else {
        scratch_.allocate(va);
      }
      add_usage(running_leaf(v), *snap_.running[v].spec, va, sign);
    };
    for (const Candidate& c : cands) {
      if (gave_back(c.kind, c.index)) continue;
      evict(c.index, -1);
      victims.push_back(c.index);
      if (kinds.size() <= c.index) kinds.resize(c.index + 1, Kind::kNo);
      kinds[c.index] = c.kind;
      if (try_place(*place_as, alloc)) {
        if (over_type_limit(current_leaf_, alloc) == kNoId) {
          placed = true;
          break;
        }
        scratch_.release(alloc);
      }
    }
    if (!placed) {
      for (size_t v : victims) evict(v, +1);
      preempt_failed_.insert(key);
      return false;
    }
    // Keep back victims that were not needed, last chosen first.
    scratch_.release(alloc);
    std::vector<size_t> needed;
    for (size_t k = victims.size(); k-- > 0;) {
      const Allocation& va = *snap_.running[victims[k]].alloc;
      if (!fits(scratch_, va)) {
        needed.push_back(victims[k]);
        continue;
      }
      evict(victims[k], +1);
      Allocation probe;
      if (try_place(*place_as, probe)) {
        scratch_.release(probe);  // still fits without this victim: keep it running
      } else {
        evict(victims[k], -1);
        needed.push_back(victims[k]);
      }
    }
    if (!try_place(*place_as, alloc)) {
      // A randomised scorer may miss a placement that exists; undo everything.
      for (size_t v : needed) evict(v, +1);
      preempt_failed_.insert(key);
      return false;
    }
    if (power_) {
      // The victims' power frees with their GPUs; the start must still fit under the caps.
      for (size_t v : needed) power_->set_active(v, false);
      PendingReason why;
      why.job = pj.id;
      why.need_gpu_milli = job.gpu_milli_per_gang(job.min_members);
      why.free_gpu_milli = scratch_.free_milli_matching(job.allowed_types);
      if (!admit_power(pj, alloc, why)) {
        for (size_t v : needed) power_->set_active(v, true);
        scratch_.release(alloc);
        for (size_t v : needed) evict(v, +1);
        preempt_failed_.insert(key);
        power_reason_ = why;
        return false;
      }
    }
    for (size_t v : needed) {
      set_evicted(v);
      const PreemptionCause cause = kinds[v] == Kind::kReclaim       ? PreemptionCause::kReclaim
                                    : kinds[v] == Kind::kTypeReclaim ? PreemptionCause::kTypeReclaim
                                                                     : PreemptionCause::kPriority;
      out_.preemptions.push_back(Preemption{snap_.running[v].id, pj.id, cause});
    }
    failed_.clear();  // capacity was freed: earlier failures may now fit
    shrink_failed_.clear();
    record_start(pj, idx, std::move(alloc), false);
    out_.starts.back().starving = starving_;
    return true;
  }

  // Free milli-GPU of `types` on the nodes of `only`, on the scratch state now.
  int64_t sum_free_on(GpuTypeMask types, const NodeSet& only) const {
    int64_t free = 0;
    const auto num_nodes = static_cast<NodeId>(cluster_.nodes().size());
    only.for_each([&](NodeId n) {
      if (n >= num_nodes) return;
      const Node& node = cluster_.node(n);
      if (!type_allowed(types, node.gpu_type)) return;
      for (GpuId g = node.first_gpu; g < node.first_gpu + node.num_gpus; ++g) {
        free += scratch_.gpu_free(g);
      }
    });
    return free;
  }

  // sum_free_on for the scratch state as committed between decisions (not mid-preemption):
  // cached per node set and type mask until the next start (record_start) changes it, so a
  // long queue of pods sharing one node restriction sums it once.
  int64_t free_on_nodes(GpuTypeMask types, const NodeSet& only) {
    const auto [it, fresh] = free_on_nodes_.try_emplace({&only, types}, 0);
    if (fresh) it->second = sum_free_on(types, only);
    return it->second;
  }

  // What `a` holds of the reservation's GPUs: of its types, on its nodes.
  int64_t reserved_milli(const Allocation& a) const {
    return milli_on_types(cluster_, a, reserved_types_, reserved_nodes_);
  }

  const Snapshot& snap_;
  const Policy& policy_;
  const Cluster& cluster_;
  // Where the cycle tries placements: the caller's ledger (Snapshot::scratch), journaled and
  // given back unchanged when the cycle ends, or else a copy of the snapshot's.
  std::optional<ClusterState> own_scratch_;
  ClusterState& scratch_;
  Rng rng_;
  Decisions out_;
  // Power (snap_.power set): the ledger, the holder of each start (kNoHolder for starts that
  // did not pass admit_power, e.g. elastic ones), and the holder admit_power just added.
  static constexpr size_t kNoHolder = static_cast<size_t>(-1);
  std::optional<PowerLedger> power_;
  std::vector<size_t> start_holder_;
  size_t admitted_holder_ = kNoHolder;
  std::optional<PendingReason> power_reason_;
  std::vector<NodeId> hot_nodes_;  // nodes with thermal headroom (computed on first use)
  NodeId hot_node_ = 0;
  double hot_need_w_ = 0;
  JobSpec thermal_job_;  // the job being placed, restricted to nodes with headroom
  std::vector<bool> evicted_;
  // By index in snap_.running: the members an elastic gang was resized to this cycle (0: not
  // resized). A resized gang is neither shrunk again nor preempted in the same cycle.
  std::vector<int32_t> resized_;
  std::vector<int64_t> running_rank_;  // by index in snap_.running, filled on first use
  int64_t min_running_rank_ = std::numeric_limits<int64_t>::max();
  std::unordered_set<ShapeKey, ShapeHash> failed_;
  // Preemption attempts that failed since usage last changed: the same shape from the same
  // queue at the same rank fails again.
  struct PreemptKey {
    ShapeKey shape;
    QueueId leaf;
    int64_t rank;
    bool may_reclaim;
    bool starving;
    bool operator==(const PreemptKey&) const = default;
  };
  struct PreemptHash {
    size_t operator()(const PreemptKey& k) const {
      return ShapeHash()(k.shape) * 131 +
             std::hash<int64_t>()(k.rank * 65599 + k.leaf * 2 + (k.may_reclaim ? 1 : 0) +
                                  (k.starving ? 7 : 0));
    }
  };
  std::unordered_set<PreemptKey, PreemptHash> preempt_failed_;
  // Shapes no shrinking of elastic surplus could place since capacity last changed.
  std::unordered_set<ShapeKey, ShapeHash> shrink_failed_;
  bool any_best_effort_running_ = false;
  bool rank_bounds_known_ = false;
  QueueShares shares_;
  const QueueTree& tree_;
  std::vector<Amounts> live_;                          // by QueueId: usage on the scratch state
  std::vector<std::unique_ptr<AdmissionGate>> gates_;  // asked in order before placement
  std::vector<std::vector<int64_t>> type_live_;        // by QueueId, then its by_type entries
  mutable std::vector<QueueId> running_leaf_;          // by index in snap_.running (running_leaf)
  QueueId current_leaf_ = kRootQueue;                  // the leaf of the job being considered
  bool starving_ = false;  // ... and whether it is a starving gang (try_preempt)
  // ... and, when it reclaims by a per-GPU-type guarantee, the types and the guaranteed queue.
  // Heterogeneity-aware placement: the median type speed-up of the waiting jobs (computed on
  // first use, -1 before) and a scratch job restricted to preferred types.
  double hetero_median_ = -1;
  JobSpec preferred_job_;
  // Data locality (Snapshot::preferred_nodes): the nodes holding the job being considered's
  // dataset (null: none), whether it waits for them, and whether it did; what it is placed as.
  std::shared_ptr<const NodeSet> current_preferred_;
  bool hold_for_data_ = false, data_held_ = false;
  JobSpec local_job_;
  GpuTypeMask type_room_ = 0;
  QueueId guarantor_ = kNoId;
  bool within_guarantee_ = false;  // ... and whether it stays within its leaf's guarantee
  std::vector<std::pair<double, size_t>> started_;  // (expected end, index into out_.starts)
  JobId head_ = kNoId;
  bool reservation_active_ = false;
  GpuTypeMask reserved_types_ = kAnyGpuType;
  const NodeSet* reserved_nodes_ = nullptr;  // the head's eligible_nodes (null: every node)
  struct FreeOnNodesHash {
    size_t operator()(const std::pair<const NodeSet*, GpuTypeMask>& k) const {
      return std::hash<const void*>()(k.first) * 31 + std::hash<uint64_t>()(k.second);
    }
  };
  // free_on_nodes' cache, by (node set, GPU types); cleared by record_start.
  std::unordered_map<std::pair<const NodeSet*, GpuTypeMask>, int64_t, FreeOnNodesHash>
      free_on_nodes_;
  double shadow_time_ = kNever;
  int64_t extra_milli_ = 0;
  // pass_over: whether the walk passes over jobs or refused to, the state its rules were made
  // for (decisions_made, preempt_failed_'s size), and the rules.
  bool passing_ = false;
  bool pass_refused_ = false;
  std::pair<size_t, size_t> passed_state_{0, 0};
  std::vector<PassOver> rules_;  // by TenantId
  bool wants_reason_ = true;     // of the job being considered
  // Stopping the walk early (what_more_can_start): the caller's queue, and what the walk has
  // reached of it (by index in snap_.pending; ranks as (rank, jobs)).
  const PendingQueue* queue_ = nullptr;
  std::vector<bool> visited_;
  std::vector<std::pair<int64_t, uint32_t>> rank_visited_;
  std::vector<uint32_t> tenant_visited_;  // by TenantId
  std::vector<bool> gate_tenants_;        // by TenantId: through_reservation's finding
  std::vector<bool> dropped_;             // by TenantId: left out of the walk
  // preemption_possible's finding: anyone may preempt, or the tenants marked here.
  bool preempt_all_ = false;
  std::vector<bool> preempt_tenants_;
  bool has_type_quotas_ = false;           // some queue has per-GPU-type quotas (type reclaim)
  std::array<size_t, 4> class_visited_{};  // by PriorityClass
  // Per gang shape: the first job by estimate not known to be visited (placement_possible).
  std::map<GangShape, PendingQueue::ByEstimate::const_iterator> estimate_cursor_;
};

}  // namespace

Decisions schedule_cycle(const Snapshot& snap, const Policy& policy) {
  return Cycle(snap, policy).run();
}

}  // namespace tessera
