#include "engine/stages/preemption_stage.h"

#include <algorithm>
#include <tuple>

#include "engine/queue_order.h"
#include "engine/running_set.h"

namespace tessera {

namespace {

// Work a victim loses since its last checkpoint (milli-GPU-seconds); none when it checkpoints
// on request (no periodic checkpoints).
double work_lost(const RunningJob& r, double now) {
  return r.spec->checkpoint_interval > 0
             ? static_cast<double>(r.alloc->gpu_milli()) * std::max(0.0, now - r.last_checkpoint)
             : 0.0;
}

}  // namespace

size_t PreemptionStage::KeyHash::operator()(const Key& k) const {
  return ShapeHash()(k.shape) * 131 +
         std::hash<int64_t>()(k.rank * 65599 + k.leaf * 2 + (k.may_reclaim ? 1 : 0) +
                              (k.starving ? 7 : 0));
}

// Who may give way to a pending job. Without queue-aware preemption: any running job of
// strictly lower rank. With it (policy.reclaim): within the job's own queue by rank; across
// queues, best-effort jobs give way to anyone, inference-critical jobs preempt lower classes
// anywhere, and otherwise only by reclaim: the job's queue stays within its fair share, the
// victim's class is not above the job's (never inference-critical), and the victim's side
// of the tree is over its fair share (checked again as victims are taken, so a queue gives
// back only what it borrowed, give or take one gang).
PreemptionStage::Kind PreemptionStage::victim_kind(const JobSpec& job, int64_t rank,
                                                   bool may_reclaim, const Amounts& need,
                                                   size_t i) const {
  const int64_t rr = running_rank_[i];
  if (!s_.policy.reclaim || s_.running_leaf(i) == s_.current_leaf) {
    return rr < rank ? Kind::kPriority : Kind::kNo;
  }
  const PriorityClass mine = job.priority;
  const PriorityClass theirs = s_.snap.running[i].spec->priority;
  if (theirs == PriorityClass::kBestEffort && mine != PriorityClass::kBestEffort) {
    return Kind::kPriority;
  }
  if (mine == PriorityClass::kInferenceCritical && theirs < mine) return Kind::kPriority;
  const RunningJob& r = s_.snap.running[i];
  if (may_reclaim && theirs <= mine && theirs != PriorityClass::kInferenceCritical &&
      s_.snap.now >= r.reclaim_protected_until &&
      (within_guarantee_ || s_.tree.settings().reclaim_min_runtime_seconds <= 0 ||
       s_.snap.now - r.start_time >= s_.tree.settings().reclaim_min_runtime_seconds)) {
    const QueueId side = s_.victim_side(s_.current_leaf, s_.running_leaf(i));
    // A starving gang takes from queues that were borrowing when the cycle began, as much as
    // it needs (it is larger than its share, so they may end below theirs for its turn).
    if (starving_
            ? !all_le(s_.shares.usage[side], s_.shares.entitled[side])
            : s_.over_share_below(s_.current_leaf, s_.tree.queue(side).parent, need) == kNoId) {
      return Kind::kReclaim;
    }
  }
  if (type_room_ != 0 && theirs <= mine && theirs != PriorityClass::kInferenceCritical &&
      s_.snap.now >= r.reclaim_protected_until && !s_.in_subtree(s_.running_leaf(i), guarantor_) &&
      over_type_guarantee(s_.victim_side(guarantor_, s_.running_leaf(i)), *r.alloc)) {
    return Kind::kTypeReclaim;
  }
  return Kind::kNo;
}

// Whether a reclaim victim's side of the tree is no longer over what it may hold (checked as
// victims are taken, so a queue gives back only what it borrowed, give or take one gang).
bool PreemptionStage::gave_back(Kind kind, size_t i) const {
  if (kind == Kind::kReclaim) {
    if (starving_) return false;
    const QueueId side = s_.victim_side(s_.current_leaf, s_.running_leaf(i));
    if (all_le(s_.live()[side], s_.shares.entitled[side])) return true;
    // Within the tolerance band (above guarantees only: a guarantee is taken back exactly).
    const double tol = s_.tree.settings().reclaim_tolerance;
    return tol > 0 && !within_guarantee_ &&
           static_cast<double>(s_.live()[side][kGpuDim]) <=
               (1 + tol) * static_cast<double>(s_.shares.entitled[side][kGpuDim]);
  }
  if (kind == Kind::kTypeReclaim) {
    return !over_type_guarantee(s_.victim_side(guarantor_, s_.running_leaf(i)),
                                *s_.snap.running[i].alloc);
  }
  return false;
}

// Per-GPU-type guarantees: the lowest queue on the job's path still short of what it is
// promised on a GPU type the job may use (by at least the gang), and those types. Such a
// queue takes GPUs of those types back from queues holding more of them than they are
// promised, even when it holds its whole share on other types: the guarantee is for that
// hardware.
void PreemptionStage::find_type_room(const JobSpec& job, int64_t need_gpu_milli) {
  for (QueueId q = s_.current_leaf; q != kNoId; q = s_.tree.queue(q).parent) {
    const auto& types = s_.tree.queue(q).by_type;
    GpuTypeMask room = 0;
    for (size_t k = 0; k < types.size(); ++k) {
      if (type_allowed(job.allowed_types, types[k].type) &&
          s_.type_live()[q][k] + need_gpu_milli <= types[k].guarantee_milli) {
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
bool PreemptionStage::over_type_guarantee(QueueId side, const Allocation& a) const {
  const auto& types = s_.tree.queue(side).by_type;
  for (GpuTypeMask rest = type_room_; rest != 0; rest &= rest - 1) {
    const auto t = static_cast<GpuTypeId>(std::countr_zero(rest));
    if (milli_on_types(s_.cluster, a, GpuTypeMask{1} << t) == 0) continue;
    const auto it =
        std::find_if(types.begin(), types.end(), [&](const TypeQuota& tq) { return tq.type == t; });
    if (it == types.end()) return true;  // promised none of it: all it holds is borrowed
    if (s_.type_live()[side][static_cast<size_t>(it - types.begin())] > it->guarantee_milli) {
      return true;
    }
  }
  return false;
}

// Frees running jobs that may give way (victim_kind) until `pj` fits, then keeps back every
// victim that was not needed. Victims: lowest rank first, then least work lost since the
// last checkpoint, then the youngest.
std::optional<Allocation> PreemptionStage::try_preempt(const PendingJob& pj) {
  const JobSpec& job = *pj.spec;
  const int64_t rank = s_.policy.order->rank(job, pj.attained_gpu_seconds);
  rank_bounds();
  const Amounts need = amounts_of(job, job.min_members);
  // Whether the job's queues stay within their share is checked per victim (only the queues
  // below the common ancestor change usage), in victim_kind. A starving gang (larger than
  // its queue's whole share, waiting long) may reclaim while its queue holds less than that.
  const FairnessSettings& fs = s_.tree.settings();
  const int64_t share = s_.shares.entitled[s_.current_leaf][kGpuDim];
  starving_ = fs.starving_after_seconds > 0 && need[kGpuDim] > share &&
              s_.snap.now - pj.queued_since >= fs.starving_after_seconds &&
              s_.live()[s_.current_leaf][kGpuDim] < share;
  // Taking back a guarantee is never delayed by reclaim_min_runtime or reclaim_after.
  within_guarantee_ = s_.live()[s_.current_leaf][kGpuDim] + need[kGpuDim] <=
                      s_.tree.queue(s_.current_leaf).guarantee[kGpuDim];
  const bool persistent = within_guarantee_ || fs.reclaim_after_seconds <= 0 ||
                          s_.snap.now - pj.queued_since >= fs.reclaim_after_seconds;
  const bool may_reclaim =
      s_.policy.reclaim && job.priority != PriorityClass::kBestEffort &&
      (starving_ || (persistent && all_le(s_.live()[s_.current_leaf] + need,
                                          s_.shares.entitled[s_.current_leaf])));
  type_room_ = 0;
  guarantor_ = kNoId;
  if (s_.policy.reclaim && job.priority != PriorityClass::kBestEffort && !may_reclaim) {
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
                           (s_.policy.reclaim && job.priority != PriorityClass::kBestEffort &&
                            any_best_effort_running_) ||
                           job.priority == PriorityClass::kInferenceCritical;
  if (rank <= min_running_rank_ && !cross_queue) return std::nullopt;  // outranks nobody
  const Key key{s_.shape(job), s_.current_leaf, rank, may_reclaim, starving_};
  if (auto it = failed_.find(key); it != failed_.end()) {  // nothing changed since it failed
    cost_refusal_ = it->second;
    return std::nullopt;
  }
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
  int64_t available = only == nullptr ? s_.scratch.free_milli_matching(place_as->allowed_types)
                                      : s_.free_on_nodes(place_as->allowed_types, *only);
  const int64_t free_now = available;
  for (size_t i = 0; i < s_.snap.running.size(); ++i) {
    if (s_.evicted(i) || s_.resized(i) != 0) continue;
    const Kind kind = victim_kind(job, rank, may_reclaim, need, i);
    if (kind == Kind::kNo) continue;
    const RunningJob& r = s_.snap.running[i];
    const int64_t m = milli_on_types(s_.cluster, *r.alloc, place_as->allowed_types, only);
    if (m == 0) continue;
    available += m;
    cands.push_back({running_rank_[i], work_lost(r, s_.snap.now), r.start_time, r.id, i, kind});
  }
  if (cands.empty() || available < job.gpu_milli_per_gang(job.min_members)) {
    failed_.emplace(key, std::nullopt);
    return std::nullopt;
  }
  std::sort(cands.begin(), cands.end(), [](const Candidate& a, const Candidate& b) {
    return std::make_tuple(a.rank, a.lost, -a.start, a.id) <
           std::make_tuple(b.rank, b.lost, -b.start, b.id);
  });
  // Elastic victims shrink towards their minimum before anyone is preempted whole.
  if (elastic_ != nullptr) {
    std::vector<size_t> order;
    order.reserve(cands.size());
    for (const Candidate& c : cands) order.push_back(c.index);
    auto skip = [&](size_t pos) { return gave_back(cands[pos].kind, cands[pos].index); };
    if (auto shrunk = elastic_->shrink_until_fits(pj, order, skip, *place_as)) return shrunk;
  }
  std::vector<size_t> victims;
  std::vector<Kind> kinds;  // by running index, for the victims
  Allocation alloc;
  bool placed = false;
  auto evict = [&](size_t v, int sign) { s_.toggle_running(v, *s_.snap.running[v].alloc, sign); };
  for (const Candidate& c : cands) {
    if (gave_back(c.kind, c.index)) continue;
    evict(c.index, -1);
    victims.push_back(c.index);
    if (kinds.size() <= c.index) kinds.resize(c.index + 1, Kind::kNo);
    kinds[c.index] = c.kind;
    if (placer_.try_place(*place_as, alloc)) {
      if (s_.over_type_limit(s_.current_leaf, alloc) == kNoId) {
        placed = true;
        break;
      }
      s_.scratch.release(alloc);
    }
  }
  if (!placed) {
    for (size_t v : victims) evict(v, +1);
    failed_.emplace(key, std::nullopt);
    return std::nullopt;
  }
  // Keep back victims that were not needed, last chosen first.
  s_.scratch.release(alloc);
  std::vector<size_t> needed;
  for (size_t k = victims.size(); k-- > 0;) {
    const Allocation& va = *s_.snap.running[victims[k]].alloc;
    if (!s_.fits_back(va)) {
      needed.push_back(victims[k]);
      continue;
    }
    evict(victims[k], +1);
    Allocation probe;
    if (placer_.try_place(*place_as, probe)) {
      s_.scratch.release(probe);  // still fits without this victim: keep it running
    } else {
      evict(victims[k], -1);
      needed.push_back(victims[k]);
    }
  }
  if (!placer_.try_place(*place_as, alloc)) {
    // A randomised scorer may miss a placement that exists; undo everything.
    for (size_t v : needed) evict(v, +1);
    failed_.emplace(key, std::nullopt);
    return std::nullopt;
  }
  std::vector<uint8_t> reclaimed(needed.size());
  for (size_t k = 0; k < needed.size(); ++k) reclaimed[k] = kinds[needed[k]] == Kind::kReclaim;
  std::vector<double> prices;
  double deficit = -1;
  std::vector<size_t> givers;  // who could give way: only a reclaim is priced
  if (std::find(reclaimed.begin(), reclaimed.end(), 1) != reclaimed.end()) {
    givers.reserve(cands.size());
    for (const Candidate& c : cands) givers.push_back(c.index);
  }
  if (!givers.empty() && !worth_it(*place_as, needed, free_now, givers, prices, deficit)) {
    s_.scratch.release(alloc);
    for (size_t v : needed) evict(v, +1);
    failed_.emplace(key, cost_refusal_);
    return std::nullopt;
  }
  if (power_ != nullptr) {
    // The victims' power frees with their GPUs; the start must still fit under the caps.
    for (size_t v : needed) power_->set_active(v, false);
    PendingReason why;
    why.job = pj.id;
    why.need_gpu_milli = job.gpu_milli_per_gang(job.min_members);
    why.free_gpu_milli = s_.scratch.free_milli_matching(job.allowed_types);
    if (!power_->admit(pj, alloc, why)) {
      for (size_t v : needed) power_->set_active(v, true);
      s_.scratch.release(alloc);
      for (size_t v : needed) evict(v, +1);
      failed_.emplace(key, std::nullopt);
      power_reason_ = why;
      return std::nullopt;
    }
  }
  for (size_t k = 0; k < needed.size(); ++k) {
    const size_t v = needed[k];
    s_.set_evicted(v);
    const PreemptionCause cause = kinds[v] == Kind::kReclaim       ? PreemptionCause::kReclaim
                                  : kinds[v] == Kind::kTypeReclaim ? PreemptionCause::kTypeReclaim
                                                                   : PreemptionCause::kPriority;
    s_.out.preemptions.push_back(Preemption{s_.snap.running[v].id, pj.id, cause,
                                            reclaimed[k] ? prices[k] : 0.0,
                                            reclaimed[k] ? deficit : 0.0});
  }
  s_.capacity_freed();
  return alloc;
}

// A reclaim above guarantees is worth it when the GPU time the job's queue would go without
// while it waits (what the queue lacks of its share x expected_deficit's wait) is at least
// reclaim_cost_ratio x what stopping the victims wastes. A guarantee, a starving gang's turn
// and a job whose wait is unknown reclaim anyway.
bool PreemptionStage::worth_it(const JobSpec& place_as, const std::vector<size_t>& needed,
                               int64_t free_now, const std::vector<size_t>& givers,
                               std::vector<double>& prices, double& deficit) {
  double price = 0;
  prices.assign(needed.size(), 0.0);
  for (size_t k = 0; k < needed.size(); ++k) {
    const RunningJob& r = s_.snap.running[needed[k]];
    prices[k] = (static_cast<double>(r.alloc->gpu_milli()) * r.preemption_seconds +
                 work_lost(r, s_.snap.now)) /
                kMilliPerGpu;
    price += prices[k];
  }
  const int64_t need = place_as.gpu_milli_per_gang(place_as.min_members);
  deficit = expected_deficit(place_as, need, free_now, givers);
  // The whole queue goes without while it waits: its jobs behind this one wait too.
  if (deficit > 0) {
    const int64_t short_of =
        s_.shares.entitled[s_.current_leaf][kGpuDim] - s_.live()[s_.current_leaf][kGpuDim];
    deficit *= static_cast<double>(std::max(need, short_of)) / static_cast<double>(need);
  }
  const double ratio = s_.tree.settings().reclaim_cost_ratio;
  if (ratio <= 0 || within_guarantee_ || starving_ || deficit < 0 || deficit >= ratio * price) {
    return true;
  }
  cost_refusal_ = std::make_pair(price, deficit);
  return false;
}

// Waiting instead of reclaiming means waiting for the jobs that could give way (the borrowers'
// and lower classes') to end: GPUs others free go to their own queues' waiting work as often.
double PreemptionStage::expected_deficit(const JobSpec& place_as, int64_t need, int64_t free_now,
                                         const std::vector<size_t>& givers) const {
  if (free_now >= need) return -1;  // room is there but the gang does not fit: waiting may not help
  std::vector<std::pair<double, int64_t>> ends;
  ends.reserve(givers.size());
  for (size_t i : givers) {
    const RunningJob& r = s_.snap.running[i];
    // Past its expected end it has run slower than estimated: when it ends is not known.
    if (r.expected_end == kUnknown || r.expected_end <= s_.snap.now) continue;
    ends.emplace_back(r.expected_end, milli_on_types(s_.cluster, *r.alloc, place_as.allowed_types,
                                                     place_as.eligible_nodes.get()));
  }
  std::sort(ends.begin(), ends.end());
  int64_t room = free_now;
  for (const auto& [end, milli] : ends) {
    room += milli;
    if (room >= need) {
      return static_cast<double>(need) / kMilliPerGpu * std::max(0.0, end - s_.snap.now);
    }
  }
  return -1;
}

// Ranks are fixed for the cycle (attained service is as of the snapshot): computed once.
// The lowest and whether any running job is best-effort: from the caller's running set when
// it keeps them for this order (rank_bounds), else with every running job's rank.
void PreemptionStage::rank_bounds() {
  if (rank_bounds_known_) return;
  rank_bounds_known_ = true;
  const RunningSet* rs = s_.snap.running_set;
  if (rs != nullptr && rs->ranks_for(*s_.policy.order)) {
    min_running_rank_ = rs->min_rank();
    any_best_effort_running_ = rs->count(PriorityClass::kBestEffort) > 0;
    return;
  }
  rank_running();
}
void PreemptionStage::rank_running() {
  if (!running_rank_.empty() || s_.snap.running.empty()) return;
  running_rank_.reserve(s_.snap.running.size());
  int64_t lowest = std::numeric_limits<int64_t>::max();
  bool best_effort = false;
  for (const RunningJob& r : s_.snap.running) {
    running_rank_.push_back(s_.policy.order->rank(*r.spec, r.attained_at(s_.snap.now)));
    lowest = std::min(lowest, running_rank_.back());
    best_effort |= r.spec->priority == PriorityClass::kBestEffort;
  }
  min_running_rank_ = lowest;
  any_best_effort_running_ = best_effort;
  rank_bounds_known_ = true;
}

// For preemption_possible's per-tenant case (no job not yet reached outranks a running one
// or crosses queues by its class, no per-GPU-type quotas): whether a job of `shape` could
// get past try_preempt's early returns. It may reclaim while its queue stays within its share
// with it, or as a starving gang (larger than the share while the queue holds less, if it
// waited long enough: unknown here, so both are allowed); and not when the attempt of the
// same shape, queue, rank and finding failed since usage last changed (failed_),
// for every rank waiting. (Best-effort jobs never reclaim: counting them in is only loose.)
bool PreemptionStage::may_reclaim(const GangShape& shape, const PendingQueue& queue) const {
  const QueueId leaf = s_.shares.leaf_of(shape.tenant);
  const Amounts need{shape.need, shape.cpu_milli * shape.min_members,
                     shape.mem_mib * shape.min_members};
  const int64_t holds = s_.live()[leaf][kGpuDim], share = s_.shares.entitled[leaf][kGpuDim];
  const bool within = all_le(s_.live()[leaf] + need, s_.shares.entitled[leaf]);
  const bool may_starve =
      s_.tree.settings().starving_after_seconds > 0 && need[kGpuDim] > share && holds < share;
  if (!within && !may_starve) return false;
  if (failed_.empty()) return true;
  const ShapeKey key = shape_of(shape);
  for (const auto& rank_count : queue.ranks()) {
    const int64_t rank = rank_count.first;
    // A job that is not starving may reclaim only `within`; one that is may anyway.
    if (within && !failed_.contains(Key{key, leaf, rank, true, false})) {
      return true;
    }
    if (may_starve && !failed_.contains(Key{key, leaf, rank, true, true})) {
      return true;
    }
  }
  return false;
}

}  // namespace tessera
