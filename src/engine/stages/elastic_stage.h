// Elastic gangs (policy.elastic): a gang runs with between its minimum and maximum members.
// What it holds above its minimum it only borrowed from idle capacity: a waiting job takes it
// back (shrinking, one member at a time) before anything is preempted; victims of preemption
// shrink towards their minimum before anyone is preempted whole; and what is left when the
// walk ends grows running gangs, oldest first.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "engine/cycle_session.h"
#include "engine/stages/placer.h"

namespace tessera {

class ElasticStage {
 public:
  ElasticStage(CycleSession& s, Placer& placer) : s_(s), placer_(placer) {}

  // Shrinks the elastic gangs of `victims` (running indexes, in victim order; one is skipped
  // when skip(its position) says so), never below their minimum, until `place_as` fits for
  // `pj`; records the shrinks and returns the placement, for the cycle to record the start.
  // When it does not fit, everything is restored (nullopt) and the caller may preempt.
  std::optional<Allocation> shrink_until_fits(const PendingJob& pj,
                                              const std::vector<size_t>& victims,
                                              const std::function<bool(size_t)>& skip,
                                              const JobSpec& place_as);
  // Takes back growth for `pj` (not best-effort): the largest surplus first, then the
  // youngest run. The placement, or nullopt (remembered for its shape until capacity frees).
  std::optional<Allocation> take_back_growth(const PendingJob& pj);
  // Grows running gangs below their maximum into what is left, oldest run first, each by as
  // many members as fit (up to its maximum and its queues' limits). A gang that started or was
  // resized less than resize_interval ago, or is expected to end within it, stays as it is:
  // each resize costs a restart.
  void grow();

 private:
  void toggle_member(size_t i, int32_t m, int sign);

  CycleSession& s_;
  Placer& placer_;
};

}  // namespace tessera
