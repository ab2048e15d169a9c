// Preemption and reclaim (policy.preemption, policy.reclaim): which running jobs may give way to
// a waiting one (victim_kind), in which order (lowest rank, least work lost since the last
// checkpoint, youngest), and how many: victims are taken until the job fits, then every victim
// that was not needed is kept back. Across queues a job takes back only what others borrowed
// (its fair share, its guarantee, a per-GPU-type guarantee); best-effort jobs give way to
// anyone; inference-critical jobs preempt lower classes anywhere.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/cycle_session.h"
#include "engine/pending_queue.h"
#include "engine/stages/elastic_stage.h"
#include "engine/stages/placer.h"
#include "engine/stages/power_stage.h"

namespace tessera {

class PreemptionStage {
 public:
  // elastic, power: the cycle's stages, null where the policy or snapshot has none.
  PreemptionStage(CycleSession& s, Placer& placer, ElasticStage* elastic, PowerStage* power)
      : s_(s), placer_(placer), elastic_(elastic), power_(power) {}

  // Frees running jobs that may give way until `pj` fits (shrinking elastic victims first),
  // records the victims, and returns the placement for the cycle to record the start; nullopt
  // when it does not fit (remembered until usage changes), and then power_refused() may say
  // that victims were found but the start would break a power cap.
  std::optional<Allocation> try_preempt(const PendingJob& pj);
  // Whether the job of the last successful try_preempt started as a starving gang.
  bool starving() const { return starving_; }
  // The power cap that refused the last try_preempt's start, once.
  std::optional<PendingReason> take_power_refusal() {
    auto r = std::move(power_reason_);
    power_reason_.reset();
    return r;
  }
  // Of the last try_preempt that found victims but found the reclaim not worth their price
  // (FairnessSettings::reclaim_cost_ratio), once: {price, deficit} in GPU-seconds.
  using CostRefusal = std::pair<double, double>;
  std::optional<CostRefusal> take_cost_refusal() {
    auto r = cost_refusal_;
    cost_refusal_.reset();
    return r;
  }
  // Usage changed (a start): a queue may now be over its share, so failed attempts may succeed.
  void usage_changed() { failed_.clear(); }
  size_t failures() const { return failed_.size(); }

  // For the walk's bound: the lowest running rank and whether a best-effort job runs (ranks
  // are fixed for the cycle: computed once).
  void rank_bounds();
  int64_t min_running_rank() const { return min_running_rank_; }
  bool any_best_effort_running() const { return any_best_effort_running_; }
  // Whether a job of `shape` could get past try_preempt's early returns by reclaim, at any of
  // the ranks waiting in `queue` (no job outranking a running one or crossing queues by its
  // class, no per-GPU-type quotas): its queue stays within its share with it, or it may be a
  // starving gang; and the attempt did not fail since usage last changed.
  bool may_reclaim(const GangShape& shape, const PendingQueue& queue) const;

 private:
  enum class Kind : uint8_t { kNo, kPriority, kReclaim, kTypeReclaim };
  Kind victim_kind(const JobSpec& job, int64_t rank, bool may_reclaim, const Amounts& need,
                   size_t i) const;
  bool gave_back(Kind kind, size_t i) const;
  void find_type_room(const JobSpec& job, int64_t need_gpu_milli);
  bool over_type_guarantee(QueueId side, const Allocation& a) const;
  void rank_running();
  // The GPU time (GPU-s) a job of `place_as` needing `need` milli-GPUs goes without while it
  // waits for the jobs that could give way to it (`givers`, indices in snap.running) to end and
  // free what `free_now` lacks, by their expected ends; -1 when no expected end makes the room
  // (unknown ends, or room lacking is not the cause).
  double expected_deficit(const JobSpec& place_as, int64_t need, int64_t free_now,
                          const std::vector<size_t>& givers) const;
  // Whether a reclaim of `needed` is worth its price; fills the victims' prices and the deficit.
  bool worth_it(const JobSpec& place_as, const std::vector<size_t>& needed, int64_t free_now,
                const std::vector<size_t>& givers, std::vector<double>& prices, double& deficit);

  CycleSession& s_;
  Placer& placer_;
  ElasticStage* elastic_;
  PowerStage* power_;
  std::vector<int64_t> running_rank_;  // by index in snap.running, filled on first use
  int64_t min_running_rank_ = std::numeric_limits<int64_t>::max();
  bool any_best_effort_running_ = false;
  bool rank_bounds_known_ = false;
  // Attempts that failed since usage last changed: the same shape from the same queue at the
  // same rank fails again.
  struct Key {
    ShapeKey shape;
    QueueId leaf;
    int64_t rank;
    bool may_reclaim;
    bool starving;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const;
  };
  // With, for an attempt refused as not worth its price, that price (the next one's reason).
  std::unordered_map<Key, std::optional<CostRefusal>, KeyHash> failed_;
  // Of the job being considered: whether it is a starving gang, whether it stays within its
  // leaf's guarantee, and, when it reclaims by a per-GPU-type guarantee, the types and the
  // guaranteed queue.
  bool starving_ = false;
  bool within_guarantee_ = false;
  GpuTypeMask type_room_ = 0;
  QueueId guarantor_ = kNoId;
  std::optional<PendingReason> power_reason_;
  std::optional<CostRefusal> cost_refusal_;
};

}  // namespace tessera
