#include "engine/cycle.h"

#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <utility>

#include "engine/cycle_session.h"
#include "engine/gates/admission_gate.h"
#include "engine/pending_queue.h"
#include "engine/queue_order.h"
#include "engine/stages/elastic_stage.h"
#include "engine/stages/placer.h"
#include "engine/stages/power_stage.h"
#include "engine/stages/preemption_stage.h"
#include "engine/stages/reservation.h"

namespace tessera {

namespace {

// One cycle: the walk over the waiting jobs in the policy's order, each considered by the
// stages in turn (admission gates, the reservation, placement with power and thermal admission,
// taking back elastic growth, preemption and reclaim), then growth of elastic gangs and the
// settling of power limits. The walk stops early once no job it has not reached could start.
class Cycle {
 public:
  Cycle(const Snapshot& snap, const Policy& policy)
      : s_(snap, policy),
        placer_(s_),
        gates_(admission_gates(snap, policy, s_.tree)),
        reservation_(s_),
        power_(snap.power != nullptr ? std::optional<PowerStage>(std::in_place, s_, placer_)
                                     : std::nullopt),
        elastic_(policy.elastic ? std::optional<ElasticStage>(std::in_place, s_, placer_)
                                : std::nullopt),
        preemption_(s_, placer_, elastic_ ? &*elastic_ : nullptr, power_ ? &*power_ : nullptr) {}
  Cycle(const Cycle&) = delete;
  Cycle& operator=(const Cycle&) = delete;

  Decisions run() {
    const auto walk = s_.policy.order->walk(s_.snap, s_.shares);
    // With the caller's pending queue (kept for this order, so its ranks are this order's), the
    // walk stops once no job it has not reached could start: the rest would only be looked at
    // and left waiting, each for the reason it would get now, so only those whose reason the
    // caller wants are considered (explain_rest). Where only a few jobs ending before EASY's
    // shadow time could start, and the walk is one key across tenants, it jumps to them.
    // Without a queue, every job is considered in order.
    queue_ = s_.snap.pending_queue;
    if (queue_ != nullptr && &queue_->order() != s_.policy.order.get()) queue_ = nullptr;
    // With reserved GPUs, what a job may use depends on more than its shape, which the
    // bounds read: every job is considered.
    if (s_.reserved.any()) queue_ = nullptr;
    if (queue_ != nullptr) {
      visited_.assign(queue_->size(), false);
      tenant_visited_.assign(queue_->tenants(), 0);
      dropped_.assign(queue_->tenants(), false);
    }
    // The bound is checked after 1, 2, 4, ... jobs since the last decision: its cost stays a
    // small share of the walk's, and a stop is found at most twice as late.
    size_t since_check = 0, gap = 1;
    const bool by_key = s_.policy.order->interleave() == QueueOrder::Interleave::kByKey;
    for (;;) {
      if (queue_ != nullptr && since_check++ % gap == 0) {
        const Bound b = what_more_can_start();
        // The reasons of the jobs left name the head (the first that cannot start): walk on
        // until it is chosen.
        const bool head_known =
            reservation_.head() != kNoId || s_.policy.backfill == Backfill::kGreedy;
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
    // (ElasticStage::take_back_growth).
    if (elastic_) elastic_->grow();
    if (power_) power_->settle();
    return std::move(s_.out);
  }

 private:
  // A FairShare reason: queue q (on the job's path) holds what it holds against its share.
  void fair_share_reason(PendingReason& reason, QueueId q) const {
    set_fair_share_reason(s_.shares, s_.live(), q, reason);
  }

  void quota_reason(PendingReason& reason, QueueId q) {
    set_quota_reason(s_.tree, s_.live(), q, reason);
    report(reason);
  }

  void report(const PendingReason& reason) {
    if (wants_reason_) s_.out.pending.push_back(reason);
  }

  void consider(uint32_t idx) {
    const PendingJob& pj = s_.snap.pending[idx];
    const JobSpec& job = *pj.spec;
    wants_reason_ = pj.wants_reason;
    PendingReason reason;
    reason.job = pj.id;
    reason.need_gpu_milli = job.gpu_milli_per_gang(job.min_members);
    reason.free_gpu_milli = s_.scratch.free_milli_matching(job.allowed_types);
    if (s_.policy.backfill == Backfill::kNone && reservation_.head() != kNoId) {
      reason.code = PendingCode::kBlockedByHead;
      reason.blocker = reservation_.head();
      report(reason);
      return;
    }
    s_.current_leaf = s_.shares.leaf_of(job.tenant);
    // Reserved GPUs open to the job are free while it is considered; held again after.
    const OpenReserved open(s_, job);
    if (s_.current_access != 0)
      reason.free_gpu_milli = s_.scratch.free_milli_matching(job.allowed_types);
    placer_.begin(pj);
    // Admission gates (engine/gates/): quota, bounded lending, carbon deferral, inference
    // reserve. A job one of them holds waits without a reservation.
    const GateInput gate_input{s_.snap, s_.tree, s_.shares, s_.live(), s_.scratch};
    for (const auto& gate : gates_) {
      if (!gate->admit(gate_input, job, s_.current_leaf, reason)) {
        report(reason);
        return;
      }
    }
    // A job that could only start by eating into the reservation waits without trying to
    // place it: with a long queue behind a reserved head this is most of the queue.
    if (!reservation_.may_try(job, reason.need_gpu_milli)) {
      wait_for_reservation(reason);
      return;
    }
    Allocation alloc;
    bool placed = false;
    bool too_hot = false;
    if (reason.free_gpu_milli >= reason.need_gpu_milli) {
      const ShapeKey shape = s_.shape(job);
      const std::optional<bool> cool = power_ ? power_->try_place_cool(job, alloc) : std::nullopt;
      if (cool) {
        placed = *cool;
        too_hot = !placed;
      } else if (placer_.has_preferred() || s_.failed.empty() || !s_.failed.contains(shape)) {
        placed = placer_.try_place(job, alloc);
        // (A job held for its data's nodes tried those only: no verdict on the shape.)
        if (!placed && !placer_.data_held()) s_.failed.insert(shape);
      }
    }
    if (placer_.data_held()) {
      reason.code = PendingCode::kDataLocality;
      report(reason);
      return;
    }
    if (too_hot) {
      power_->too_hot(reason);
      report(reason);
      return;
    }
    if (placed) {
      if (const QueueId q = s_.over_type_limit(s_.current_leaf, alloc); q != kNoId) {
        s_.scratch.release(alloc);
        quota_reason(reason, q);
        return;
      }
    }
    int64_t from_extra = 0;
    if (placed && !reservation_.may_keep(job, alloc, from_extra)) {
      s_.scratch.release(alloc);
      wait_for_reservation(reason);
      return;
    }
    const bool backfilled = placed && reservation_.active();
    // Under a power cap a job that fits the GPUs may still wait for power (without a
    // reservation: it is not short of GPUs).
    if (placed && power_ && !power_->admit(pj, alloc, reason)) {
      s_.scratch.release(alloc);
      reservation_.give_back_extra(from_extra);
      // A rack or node cap that the placement ran into may leave room elsewhere: place again
      // away from it (a few times), unless a reservation's bookkeeping depends on the
      // placement.
      if (reservation_.active() || !power_->place_away_from_caps(pj, job, alloc, reason)) {
        report(reason);
        return;
      }
    }
    if (placed) {
      record_start(pj, idx, std::move(alloc), backfilled);
      return;
    }
    if (elastic_ && job.priority != PriorityClass::kBestEffort) {
      if (auto taken = elastic_->take_back_growth(pj)) {
        record_start(pj, idx, std::move(*taken), false);
        return;
      }
    }
    if (s_.policy.preemption) {
      if (auto freed = preemption_.try_preempt(pj)) {
        record_start(pj, idx, std::move(*freed), false);
        s_.out.starts.back().starving = preemption_.starving();
        return;
      }
      // Victims were found, but the start would break a power cap.
      if (auto refused = preemption_.take_power_refusal()) {
        report(*refused);
        return;
      }
      if (auto priced = preemption_.take_cost_refusal()) {
        reason.reclaim_price_gpu_seconds = priced->first;
        reason.reclaim_deficit_gpu_seconds = priced->second;
      }
    }
    reason.code = reason.free_gpu_milli < reason.need_gpu_milli ? PendingCode::kInsufficientGpus
                                                                : PendingCode::kGangCannotFit;
    // Restricted to a node set: how much of what is free it may use (a gang that fits the free
    // GPUs in total but not on its eligible nodes reads kGangCannotFit, and describe() says so).
    if (job.eligible_nodes != nullptr) {
      reason.eligible_free_gpu_milli = s_.free_on_nodes(job.allowed_types, *job.eligible_nodes);
    }
    // Reserved GPUs are the nearer cause: without them it would fit now, reclaim or not.
    reserved_reason(job, reason);
    if (s_.policy.reclaim && job.priority != PriorityClass::kBestEffort &&
        reason.code != PendingCode::kReservedGpus) {
      const QueueId q =
          s_.over_share_below(s_.current_leaf, kRootQueue, amounts_of(job, job.min_members));
      if (q != kNoId) fair_share_reason(reason, q);
    }
    report(reason);
    // A job kept from reserved GPUs waits for their window to pass, not for running jobs to
    // end: it does not hold the GPUs that will free for it (as Slurm plans it after the window).
    if (reason.code != PendingCode::kReservedGpus) reservation_.blocked(pj, reason.need_gpu_milli);
  }

  // A job short of GPUs that the reserved GPUs closed to it would make room for waits for them
  // (taken or not: taken, they would not be its when their jobs end either).
  void reserved_reason(const JobSpec& job, PendingReason& reason) const {
    if (!s_.reserved.any() || (reason.code != PendingCode::kInsufficientGpus &&
                               reason.code != PendingCode::kGangCannotFit)) {
      return;
    }
    const int64_t closed = s_.reserved.closed_milli(job.allowed_types);
    if (closed == 0 || reason.free_gpu_milli + closed < reason.need_gpu_milli) return;
    reason.code = PendingCode::kReservedGpus;
    reason.reservation = s_.reserved.first_closed(job.allowed_types);
    reason.reserved_gpu_milli = closed;
  }

  // The reserved GPUs open to a job, opened while it is considered (CycleSession::reserved).
  class OpenReserved {
   public:
    OpenReserved(CycleSession& s, const JobSpec& job) : s_(s) {
      s_.current_access = s_.reserved.any() ? s_.reserved.access(job) : 0;
      s_.reserved.open(s_.current_access);
    }
    ~OpenReserved() {
      if (s_.reserved.any()) s_.reserved.close();
      s_.current_access = 0;
    }
    OpenReserved(const OpenReserved&) = delete;
    OpenReserved& operator=(const OpenReserved&) = delete;

   private:
    CycleSession& s_;
  };

  void record_start(const PendingJob& pj, uint32_t idx, Allocation alloc, bool backfilled) {
    if (power_) power_->started();
    s_.add_usage(s_.current_leaf, *pj.spec, alloc, +1);
    s_.committed();               // the committed scratch state changed
    preemption_.usage_changed();  // a queue may now be over its share
    reservation_.started(*pj.spec, s_.out.starts.size());
    s_.out.starts.push_back(Start{pj.id, idx, std::move(alloc), backfilled});
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
    if (s_.policy.elastic || pass_refused_ || !reservation_.holds_all()) return;
    const std::pair<size_t, size_t> state{decisions_made(), preemption_.failures()};
    if (passing_ && state == passed_state_) return;
    passed_state_ = state;
    const bool preempt = preemption_possible();
    PassOver rule;
    rule.now = s_.snap.now;
    rule.shadow_time = reservation_.shadow_time();
    rule.extra_milli = reservation_.extra_milli();
    rule.room_milli = preempt && preempt_all_ ? std::numeric_limits<int64_t>::max()
                                              : s_.scratch.free_milli_matching(kAnyGpuType);
    rules_.assign(queue_->tenants(), rule);
    if (preempt && !preempt_all_) {
      for (const auto& shape_jobs : queue_->by_shape()) {
        const GangShape& shape = shape_jobs.first;
        if (preemption_.may_reclaim(shape, *queue_))
          rules_[shape.tenant].add_preempt_need(shape.need);
      }
    }
    passing_ = walk.pass_over(rules_);
    pass_refused_ = !passing_;  // the walk never will: ask no more
  }

  size_t decisions_made() const {
    return s_.out.starts.size() + s_.out.preemptions.size() + s_.out.resizes.size() +
           (reservation_.active() ? 1 : 0);
  }

  // What what_more_can_start() subtracts from the queue's aggregates: the jobs the walk
  // reached, by rank, tenant and class (gang shapes skip visited jobs by their cursors).
  void visit(uint32_t idx) {
    visited_[idx] = true;
    const PendingJob& pj = s_.snap.pending[idx];
    const JobSpec& s = *pj.spec;
    if (s_.policy.preemption)
      bump(rank_visited_, s_.policy.order->rank(s, pj.attained_gpu_seconds));
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
    if (s_.policy.backfill == Backfill::kNone && reservation_.head() != kNoId)
      return Bound::kNothing;
    if (s_.policy.elastic) return Bound::kAnything;  // take-back and shrinking: not bounded here
    if (reservation_.holds_all()) return through_reservation();
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
    const int64_t free = s_.scratch.free_milli_matching(kAnyGpuType);
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
    const int64_t free = s_.scratch.free_milli_matching(kAnyGpuType);
    Bound bound = Bound::kNothing;
    gate_tenants_.assign(queue_->tenants(), false);
    for (const auto& [shape, jobs] : queue_->by_shape()) {
      const auto* first = first_unvisited(shape, jobs);
      if (first == nullptr) continue;
      const bool any_passes = shape.need <= 0 || shape.need <= reservation_.extra_milli();
      if (!any_passes && s_.snap.now + first->key.first > reservation_.shadow_time()) continue;
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
    for (uint32_t idx : unvisited_wanting())
      gate_tenants_[s_.snap.pending[idx].spec->tenant] = true;
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
      if (!more && !s_.snap.pending[idx].wants_reason) continue;
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
    const int64_t free = s_.scratch.free_milli_matching(kAnyGpuType);
    for (const auto& [shape, by_estimate] : queue_->by_shape()) {
      if (!startable_now(shape, preempt, free)) continue;
      // After a decision, a shape within the extra capacity may be startable: all its jobs.
      const bool any_passes = shape.need <= 0 || shape.need <= reservation_.extra_milli();
      const auto it = estimate_cursor_.find(shape);
      for (auto e = it == estimate_cursor_.end() ? by_estimate.begin() : it->second;
           e != by_estimate.end() &&
           (any_passes || s_.snap.now + e->key.first <= reservation_.shadow_time());
           ++e) {
        if (visited_[e->index] || s_.snap.pending[e->index].wants_reason) continue;
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
    if (s_.policy.order->interleave() != QueueOrder::Interleave::kByKey) {
      return walk.order_subset(jobs);
    }
    sort_by_key(jobs);
    return true;
  }

  // Sorts jobs (indices into s_.snap.pending) by their pending_key, each key computed once.
  void sort_by_key(std::vector<uint32_t>& jobs) const {
    std::vector<std::pair<PendingKey, uint32_t>> keyed;
    keyed.reserve(jobs.size());
    for (uint32_t idx : jobs)
      keyed.emplace_back(s_.policy.order->pending_key(s_.snap.pending[idx]), idx);
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
    return !s_.failed.empty() && s_.failed.contains(shape_of(g));
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
    if (!s_.policy.preemption || s_.snap.running.empty()) return false;
    const PendingQueue& q = *queue_;
    preemption_.rank_bounds();
    for (auto it = q.ranks().rbegin();
         it != q.ranks().rend() && it->first > preemption_.min_running_rank(); ++it) {
      if (it->second > visited(rank_visited_, it->first)) return preempt_all_ = true;
    }
    if (!s_.policy.reclaim) return false;
    auto unvisited = [&](PriorityClass c) {
      return q.count(c) - class_visited_[static_cast<size_t>(c)];
    };
    if (unvisited(PriorityClass::kInferenceCritical) > 0) return preempt_all_ = true;
    if (preemption_.any_best_effort_running() &&
        unvisited(PriorityClass::kResearch) + unvisited(PriorityClass::kProduction) > 0) {
      return preempt_all_ = true;
    }
    if (s_.has_type_quotas()) return preempt_all_ = true;
    // Reclaim takes only from queues over their share (gave_back; a starving gang, from those
    // over it when the cycle began).
    const bool starving = s_.tree.settings().starving_after_seconds > 0;
    bool any_over = false;
    for (QueueId k = 0; k < s_.tree.size() && !any_over; ++k) {
      any_over =
          k != kRootQueue && (!all_le(s_.live()[k], s_.shares.entitled[k]) ||
                              (starving && !all_le(s_.shares.usage[k], s_.shares.entitled[k])));
    }
    if (!any_over) return false;
    // Past the checks above, a job reaches past its own queue only by reclaim (try_preempt's
    // cross_queue is may_reclaim): the tenants with a shape not yet reached that may reclaim.
    bool any = false;
    for (const auto& [shape, jobs] : q.by_shape()) {
      if (preempt_tenants_[shape.tenant] || !preemption_.may_reclaim(shape, *queue_)) continue;
      if (first_unvisited(shape, jobs) == nullptr) continue;
      preempt_tenants_[shape.tenant] = true;
      any = true;
    }
    return any;
  }

  // Whether a job of `shape` may preempt, as preemption_possible() found: anyone may, or its
  // tenant has a shape that may reclaim and this is one.
  bool may_preempt(const GangShape& shape) const {
    return preempt_all_ ||
           (preempt_tenants_[shape.tenant] && preemption_.may_reclaim(shape, *queue_));
  }

  void wait_for_reservation(PendingReason& reason) {
    reason.code = PendingCode::kWaitingForReservation;
    reason.blocker = reservation_.head();
    report(reason);
  }

 private:
  CycleSession s_;
  Placer placer_;
  std::vector<std::unique_ptr<AdmissionGate>> gates_;  // asked in order before placement
  Reservation reservation_;
  std::optional<PowerStage> power_;      // a snapshot with a power view
  std::optional<ElasticStage> elastic_;  // policy.elastic
  PreemptionStage preemption_;           // asked when policy.preemption
  // pass_over: whether the walk passes over jobs or refused to, the state its rules were made
  // for (decisions_made, failed preemptions), and the rules.
  bool passing_ = false;
  bool pass_refused_ = false;
  std::pair<size_t, size_t> passed_state_{0, 0};
  std::vector<PassOver> rules_;  // by TenantId
  bool wants_reason_ = true;     // of the job being considered
  // Stopping the walk early (what_more_can_start): the caller's queue, and what the walk has
  // reached of it (by index in snap.pending; ranks as (rank, jobs)).
  const PendingQueue* queue_ = nullptr;
  std::vector<bool> visited_;
  std::vector<std::pair<int64_t, uint32_t>> rank_visited_;
  std::vector<uint32_t> tenant_visited_;  // by TenantId
  std::vector<bool> gate_tenants_;        // by TenantId: through_reservation's finding
  std::vector<bool> dropped_;             // by TenantId: left out of the walk
  // preemption_possible's finding: anyone may preempt, or the tenants marked here.
  bool preempt_all_ = false;
  std::vector<bool> preempt_tenants_;
  std::array<size_t, 4> class_visited_{};  // by PriorityClass
  // Per gang shape: the first job by estimate not known to be visited (placement_possible).
  std::map<GangShape, PendingQueue::ByEstimate::const_iterator> estimate_cursor_;
};

}  // namespace

Decisions schedule_cycle(const Snapshot& snap, const Policy& policy) {
  return Cycle(snap, policy).run();
}

}  // namespace tessera
