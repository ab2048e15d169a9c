#include "engine/stages/reservation.h"

#include <algorithm>

namespace tessera {

void Reservation::blocked(const PendingJob& pj, int64_t need) {
  if (head_ != kNoId || s_.policy.backfill == Backfill::kGreedy) return;
  head_ = pj.id;
  if (s_.policy.backfill == Backfill::kEasy) reserve(*pj.spec, need);
}

bool Reservation::may_try(const JobSpec& job, int64_t need) const {
  return !active_ || backfit(must_use_reserved_types(job) ? need : 0, job) != Backfit::kNo;
}

bool Reservation::may_keep(const JobSpec& job, const Allocation& alloc, int64_t& from_extra) {
  from_extra = 0;
  if (!active_) return true;
  const int64_t overlap = reserved_milli(alloc);
  switch (backfit(overlap, job)) {
    case Backfit::kFree:
      return true;
    case Backfit::kFromExtra:
      extra_milli_ -= overlap;
      from_extra = overlap;
      return true;
    case Backfit::kNo:
      break;
  }
  return false;
}

void Reservation::started(const JobSpec& job, size_t start_index) {
  const double est = job.duration_estimate;
  started_.emplace_back(est >= 0 ? s_.snap.now + est : kNever, start_index);
}

// EASY's test for a job that would hold `overlap` milli-GPUs of the reserved types: it may
// start freely (no overlap, or it ends before the shadow time), out of the capacity the head
// job will not need, or not at all.
Reservation::Backfit Reservation::backfit(int64_t overlap, const JobSpec& job) const {
  const double est = job.duration_estimate;
  if (overlap == 0 || (est >= 0 && s_.snap.now + est <= shadow_time_)) return Backfit::kFree;
  return overlap <= extra_milli_ ? Backfit::kFromExtra : Backfit::kNo;
}

// Whether every GPU `job` could be placed on is of a type the reservation holds (and, when
// the head is restricted to a node set, on one of its nodes), so that its overlap is known
// (its whole demand) before placing it.
bool Reservation::must_use_reserved_types(const JobSpec& job) const {
  if (job.demand.gpus == 0) return false;
  if (reserved_nodes_ != nullptr &&
      (job.eligible_nodes == nullptr || !job.eligible_nodes->is_subset_of(*reserved_nodes_))) {
    return false;
  }
  const GpuTypeMask present = s_.cluster.present_types();
  const GpuTypeMask mine = job.allowed_types == kAnyGpuType ? present : job.allowed_types;
  const GpuTypeMask reserved = reserved_types_ == kAnyGpuType ? present : reserved_types_;
  return (mine & ~reserved & present) == 0;
}

// EASY: when will the head job fit, counting only GPUs of its types (on its eligible nodes,
// when it is restricted to a node set), and how much more than it needs will be free then.
void Reservation::reserve(const JobSpec& job, int64_t need) {
  active_ = true;
  reserved_types_ = job.allowed_types;
  reserved_nodes_ = job.eligible_nodes.get();
  std::vector<std::pair<double, int64_t>> ends;
  for (size_t i = 0; i < s_.snap.running.size(); ++i) {
    const RunningJob& r = s_.snap.running[i];
    if (s_.evicted(i) || r.expected_end < 0) continue;
    ends.emplace_back(std::max(r.expected_end, s_.snap.now), reserved_milli(*r.alloc));
  }
  for (const auto& [end, s] : started_) {
    if (end != kNever) ends.emplace_back(end, reserved_milli(s_.out.starts[s].alloc));
  }
  std::sort(ends.begin(), ends.end());
  int64_t free = reserved_nodes_ == nullptr ? s_.scratch.free_milli_matching(reserved_types_)
                                            : s_.free_on_nodes(reserved_types_, *reserved_nodes_);
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

bool Reservation::holds_all() const {
  if (!active_ || reserved_nodes_ != nullptr) return false;
  const GpuTypeMask present = s_.cluster.present_types();
  const GpuTypeMask reserved = reserved_types_ == kAnyGpuType ? present : reserved_types_;
  return (present & ~reserved) == 0;
}

// What `a` holds of the reservation's GPUs: of its types, on its nodes.
int64_t Reservation::reserved_milli(const Allocation& a) const {
  return milli_on_types(s_.cluster, a, reserved_types_, reserved_nodes_);
}

}  // namespace tessera
