// Backfill behind the head of the queue (policy.backfill). The head is the first job the walk
// finds that cannot start. kNone: nothing starts behind it. kEasy (EASY backfilling): it gets a
// reservation, the shadow time when enough of its GPU types (on its eligible nodes) will be
// free for it, and the capacity it will not need then (extra); a job behind it starts only if
// it leaves the reservation whole (it holds none of the reserved GPUs, or ends before the
// shadow time) or fits the extra capacity. kGreedy: no head, anything that fits starts.
#pragma once

#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "engine/cycle_session.h"

namespace tessera {

class Reservation {
 public:
  static constexpr double kNever = std::numeric_limits<double>::infinity();

  explicit Reservation(CycleSession& s) : s_(s) {}

  JobId head() const { return head_; }
  // Whether the EASY reservation is in force (a head was found under kEasy).
  bool active() const { return active_; }
  // The job `pj`, which needs `need` milli-GPU, cannot start: it becomes the head if there is
  // none yet (and under kEasy gets the reservation).
  void blocked(const PendingJob& pj, int64_t need);

  // Before placing `job` (needing `need`): false when it could only start by eating into the
  // reservation (every GPU it may use is reserved, and it neither ends by the shadow time nor
  // fits the extra), so it waits without a try.
  bool may_try(const JobSpec& job, int64_t need) const;
  // After placing `job` on `alloc`: whether it may keep it (taking what it overlaps of the
  // reservation from the extra capacity, returned in from_extra).
  bool may_keep(const JobSpec& job, const Allocation& alloc, int64_t& from_extra);
  // A start that took `milli` of the extra capacity did not happen after all.
  void give_back_extra(int64_t milli) { extra_milli_ += milli; }
  // A start was recorded (its index in out.starts): it may end before the head can start.
  void started(const JobSpec& job, size_t start_index);

  // With the reservation over every GPU (all types, every node): the walk's bound may use it.
  bool holds_all() const;
  double shadow_time() const { return shadow_time_; }
  int64_t extra_milli() const { return extra_milli_; }

 private:
  enum class Backfit { kFree, kFromExtra, kNo };
  Backfit backfit(int64_t overlap, const JobSpec& job) const;
  bool must_use_reserved_types(const JobSpec& job) const;
  int64_t reserved_milli(const Allocation& a) const;
  void reserve(const JobSpec& job, int64_t need);

  CycleSession& s_;
  std::vector<std::pair<double, size_t>> started_;  // (expected end, index into out.starts)
  JobId head_ = kNoId;
  bool active_ = false;
  GpuTypeMask reserved_types_ = kAnyGpuType;
  const NodeSet* reserved_nodes_ = nullptr;  // the head's eligible_nodes (null: every node)
  double shadow_time_ = kNever;
  int64_t extra_milli_ = 0;
};

}  // namespace tessera
