// Reserved GPUs (Snapshot::reservations, model/gpu_reservation.h) as one cycle sees them: held on
// its scratch ledger, so that placement, the room a preemption frees and elastic growth all find
// them taken, and opened for each job that may use them (GpuReservation::open_to) while that job
// is considered.
//
// State machine, per reserved GPU: held (its free part is allocated to the hold) or open (its
// hold released for the job being considered). Invariants: outside open_for() every reserved GPU
// is held, and a held GPU's hold is all of its free capacity as of the last hold(); a GPU of
// several reservations is open only when every one of them is open to the job. A reservation that
// holds nothing changes nothing, so a snapshot without reservations pays for none of this.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/allocation.h"
#include "model/cluster_state.h"
#include "model/gpu_reservation.h"
#include "model/job.h"

namespace tessera {

class ReservedGpus {
 public:
  // At most 64 reservations are considered (the first 64 of `reservations`; a caller keeps
  // fewer: serve refuses more), each a bit of access().
  static constexpr size_t kMax = 64;

  // Holds nothing until the first close() (the cycle's ledger journals its changes first).
  ReservedGpus(std::span<const GpuReservation> reservations, double now, ClusterState& scratch);

  // Whether any reservation is in force (its window not over): placement is then not the same
  // for every job, and what only depends on a job's shape may depend on its access too.
  bool any() const { return !gpus_.empty(); }
  // The reservations open to `job` now, as bits (bit i: reservations[i]); 0 when none holds
  // anything for it.
  uint64_t access(const JobSpec& job) const;

  // Lets go of the holds of every GPU all of whose reservations are open to the job (`access`),
  // until close().
  void open(uint64_t access);
  // Every reserved GPU held again, with all of its free capacity.
  void close();
  // A running job's allocation was released (a victim, a shrink): the reserved GPUs not open
  // take what it freed of them.
  void hold_freed();
  // Before `a` (a running job's) is allocated again: the holds on its GPUs let go, so that it
  // fits as it did (hold_freed() after takes the rest back).
  void release_on(const Allocation& a);
  // What is held on GPU g now (0 for a GPU no reservation holds).
  int32_t held_on(GpuId g) const;
  // Milli-GPU of the reserved GPUs of the types in `mask` not open now (to the job being
  // considered): their whole capacity, free or taken (they would not be free to it when their
  // jobs end either).
  int64_t closed_milli(GpuTypeMask mask) const;
  // The first reservation (index) with GPUs of `mask` not open now, or kNoId.
  uint32_t first_closed(GpuTypeMask mask) const;

 private:
  void hold(size_t k);
  void unhold(size_t k);
  size_t index_of(GpuId g) const;  // into gpus_, or gpus_.size()

  std::span<const GpuReservation> reservations_;
  double now_;
  ClusterState& scratch_;
  std::vector<GpuId> gpus_;        // every GPU of a reservation in force, sorted
  std::vector<uint64_t> covered_;  // by gpus_ index: the reservations that hold it
  std::vector<int32_t> held_;      // by gpus_ index: milli-GPU held
  uint64_t in_force_ = 0;          // reservations whose window is not over
  uint64_t open_ = 0;              // open() for the job being considered
};

}  // namespace tessera
