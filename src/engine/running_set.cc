#include "engine/running_set.h"

#include <stdexcept>
#include <string>

#include "engine/fair_share.h"
#include "engine/queue_order.h"

namespace tessera {

RunningSet::RunningSet(const Cluster& cluster, const FairnessSettings& settings,
                       const QueueOrder* order)
    : cluster_(cluster),
      settings_(settings),
      order_(order),
      ranked_(order != nullptr && !order->time_dependent()) {}

RunningSet::Counted RunningSet::counted(const RunningJob& job) const {
  if (job.spec == nullptr || job.alloc == nullptr) {
    throw std::invalid_argument("RunningSet: job " + std::to_string(job.id) +
                                " without a spec or an allocation");
  }
  return Counted{job.spec->tenant, job.spec->priority,
                 ranked_ ? order_->rank(*job.spec, job.attained_gpu_seconds) : 0,
                 fair_amounts_of(settings_, cluster_, *job.spec, *job.alloc)};
}

void RunningSet::account(const Counted& c, int sign) {
  if (c.tenant >= per_tenant_.size()) per_tenant_.resize(c.tenant + 1);
  TenantSums& t = per_tenant_[c.tenant];
  t.jobs += sign;
  const bool best_effort = c.priority == PriorityClass::kBestEffort;
  for (size_t d = 0; d < kNumDims; ++d) {
    t.usage[d] += sign * c.amounts[d];
    if (!best_effort) t.demand[d] += sign * c.amounts[d];
  }
  by_class_[static_cast<size_t>(c.priority)] += sign;
  if (ranked_) {
    if (sign > 0) {
      ++rank_[c.rank];
    } else if (const auto r = rank_.find(c.rank); --r->second == 0) {
      rank_.erase(r);
    }
  }
}

void RunningSet::add(const RunningJob& job) {
  const Counted c = counted(job);
  const auto pos = static_cast<uint32_t>(jobs_.size());
  if (!index_.try_emplace(job.id, pos).second) {
    throw std::invalid_argument("RunningSet: job " + std::to_string(job.id) + " already running");
  }
  jobs_.push_back(job);
  counted_.push_back(c);
  account(c, +1);
}

void RunningSet::update(const RunningJob& job) {
  const auto it = index_.find(job.id);
  if (it == index_.end()) {
    throw std::invalid_argument("RunningSet: job " + std::to_string(job.id) + " is not running");
  }
  const Counted c = counted(job);
  account(counted_[it->second], -1);
  jobs_[it->second] = job;
  counted_[it->second] = c;
  account(c, +1);
}

void RunningSet::remove(JobId id) {
  const auto it = index_.find(id);
  if (it == index_.end()) {
    throw std::invalid_argument("RunningSet: job " + std::to_string(id) + " is not running");
  }
  const uint32_t pos = it->second;
  account(counted_[pos], -1);
  index_.erase(it);
  if (pos + 1 != jobs_.size()) {
    jobs_[pos] = jobs_.back();
    counted_[pos] = counted_.back();
    index_[jobs_[pos].id] = pos;
  }
  jobs_.pop_back();
  counted_.pop_back();
}

}  // namespace tessera
