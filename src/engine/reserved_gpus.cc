#include "engine/reserved_gpus.h"

#include <algorithm>
#include <bit>
#include <utility>

namespace tessera {

ReservedGpus::ReservedGpus(std::span<const GpuReservation> reservations, double now,
                           ClusterState& scratch)
    : reservations_(reservations.first(std::min(reservations.size(), kMax))),
      now_(now),
      scratch_(scratch) {
  const GpuId num_gpus = scratch.cluster().num_gpus();
  std::vector<std::pair<GpuId, uint64_t>> cover;
  for (size_t i = 0; i < reservations_.size(); ++i) {
    const GpuReservation& r = reservations_[i];
    if (now >= r.end) continue;
    in_force_ |= uint64_t{1} << i;
    for (GpuId g : r.gpus) {
      if (g < num_gpus) cover.emplace_back(g, uint64_t{1} << i);
    }
  }
  std::sort(cover.begin(), cover.end());
  for (const auto& [g, bit] : cover) {
    if (gpus_.empty() || gpus_.back() != g) {
      gpus_.push_back(g);
      covered_.push_back(0);
    }
    covered_.back() |= bit;
  }
  held_.assign(gpus_.size(), 0);
}

uint64_t ReservedGpus::access(const JobSpec& job) const {
  uint64_t out = 0;
  for (uint64_t rest = in_force_; rest != 0; rest &= rest - 1) {
    const auto i = static_cast<size_t>(std::countr_zero(rest));
    if (reservations_[i].open_to(job, now_)) out |= uint64_t{1} << i;
  }
  return out;
}

void ReservedGpus::hold(size_t k) {
  const int32_t free = scratch_.gpu_free(gpus_[k]);
  if (free <= 0) return;
  const GpuShare share{gpus_[k], free};
  scratch_.allocate_member(scratch_.cluster().node_of_gpu(gpus_[k]), std::span(&share, 1), 0, 0);
  held_[k] += free;
}

void ReservedGpus::unhold(size_t k) {
  if (held_[k] == 0) return;
  const GpuShare share{gpus_[k], held_[k]};
  scratch_.release_member(scratch_.cluster().node_of_gpu(gpus_[k]), std::span(&share, 1), 0, 0);
  held_[k] = 0;
}

void ReservedGpus::open(uint64_t access) {
  open_ = access;
  if (access == 0) return;
  for (size_t k = 0; k < gpus_.size(); ++k) {
    if ((covered_[k] & ~access) == 0) unhold(k);
  }
}

void ReservedGpus::close() {
  open_ = 0;
  hold_freed();
}

void ReservedGpus::hold_freed() {
  for (size_t k = 0; k < gpus_.size(); ++k) {
    if (open_ == 0 || (covered_[k] & ~open_) != 0) hold(k);
  }
}

size_t ReservedGpus::index_of(GpuId g) const {
  const auto it = std::lower_bound(gpus_.begin(), gpus_.end(), g);
  return it != gpus_.end() && *it == g ? static_cast<size_t>(it - gpus_.begin()) : gpus_.size();
}

void ReservedGpus::release_on(const Allocation& a) {
  if (gpus_.empty()) return;
  for (const GpuShare& s : a.shares) {
    if (const size_t k = index_of(s.gpu); k < gpus_.size()) unhold(k);
  }
}

int32_t ReservedGpus::held_on(GpuId g) const {
  const size_t k = index_of(g);
  return k < gpus_.size() ? held_[k] : 0;
}

int64_t ReservedGpus::closed_milli(GpuTypeMask mask) const {
  int64_t sum = 0;
  const Cluster& c = scratch_.cluster();
  for (size_t k = 0; k < gpus_.size(); ++k) {
    if ((covered_[k] & ~open_) != 0 &&
        type_allowed(mask, c.node(c.node_of_gpu(gpus_[k])).gpu_type)) {
      sum += kMilliPerGpu;
    }
  }
  return sum;
}

uint32_t ReservedGpus::first_closed(GpuTypeMask mask) const {
  const Cluster& c = scratch_.cluster();
  for (size_t k = 0; k < gpus_.size(); ++k) {
    const uint64_t closed = covered_[k] & ~open_;
    if (closed != 0 && type_allowed(mask, c.node(c.node_of_gpu(gpus_[k])).gpu_type)) {
      return static_cast<uint32_t>(std::countr_zero(closed));
    }
  }
  return kNoId;
}

}  // namespace tessera
