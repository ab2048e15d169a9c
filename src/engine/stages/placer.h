// Where a waiting job is placed on the cycle's scratch ledger: at the largest size its queue's
// quota allows (max, else as many members as could fit, else min); first on the nodes holding
// its dataset (data locality: within its locality wait, only there), then on its preferred GPU
// types (heterogeneity-aware placement), then anywhere it may go. The scorer decides the GPUs.
#pragma once

#include <memory>

#include "engine/cycle_session.h"

namespace tessera {

class Placer {
 public:
  explicit Placer(CycleSession& s) : s_(s) {}

  // Before a job is considered: the nodes holding its dataset, and whether it waits for them.
  void begin(const PendingJob& pj);
  // Whether the nodes holding the considered job's dataset are known.
  bool has_preferred() const { return preferred_ != nullptr; }
  // Whether the last try_place found no room on those nodes while the job waits for them.
  bool data_held() const { return data_held_; }

  // Places `job` for the considered job on the scratch ledger; true: `alloc` holds it.
  bool try_place(const JobSpec& job, Allocation& alloc);
  // The same, at the sizes the queue's quota allows, without locality or type preference.
  bool try_place_sized(const JobSpec& job, Allocation& alloc);

 private:
  template <class F>
  void for_each_usable_type(const JobSpec& job, F&& f) const;
  std::pair<double, double> speed_range(const JobSpec& job) const;
  double type_spread(const JobSpec& job) const;
  GpuTypeMask preferred_types(const JobSpec& job);

  CycleSession& s_;
  // Heterogeneity-aware placement: the median type speed-up of the waiting jobs (computed on
  // first use, -1 before) and a scratch job restricted to preferred types.
  double hetero_median_ = -1;
  JobSpec preferred_job_;
  // Data locality (Snapshot::preferred_nodes): the nodes holding the considered job's dataset
  // (null: none), whether it waits for them, and whether it did; what it is placed as.
  std::shared_ptr<const NodeSet> preferred_;
  bool hold_for_data_ = false, data_held_ = false;
  JobSpec local_job_;
};

}  // namespace tessera
