#include "engine/pending_queue.h"

#include <stdexcept>
#include <string>

#include "engine/queue_order.h"

namespace tessera {

namespace {

double estimate_key(const JobSpec& s) {
  return s.duration_estimate >= 0 ? s.duration_estimate : std::numeric_limits<double>::infinity();
}

}  // namespace

GangShape GangShape::of(const JobSpec& s) {
  return GangShape{s.tenant,
                   s.gpu_milli_per_gang(s.min_members),
                   s.demand.gpus,
                   s.demand.gpu_milli,
                   s.demand.cpu_milli,
                   s.demand.mem_mib,
                   s.min_members,
                   s.max_members,
                   s.allowed_types,
                   static_cast<uint8_t>(s.max_span),
                   reinterpret_cast<uintptr_t>(s.eligible_nodes.get())};
}

PendingQueue::PendingQueue(const QueueOrder& order)
    : order_(order), per_tenant_(order.interleave() != QueueOrder::Interleave::kByKey) {
  if (!per_tenant_) streams_.resize(1);
}

void PendingQueue::add(const PendingJob& job) {
  if (job.spec == nullptr) throw std::invalid_argument("PendingQueue: a job without a spec");
  const auto pos = static_cast<uint32_t>(jobs_.size());
  if (!index_.try_emplace(job.id, pos).second) {
    throw std::invalid_argument("PendingQueue: job " + std::to_string(job.id) + " already queued");
  }
  jobs_.push_back(job);
  account(job, pos, +1);
}

void PendingQueue::remove(JobId id) {
  const auto it = index_.find(id);
  if (it == index_.end()) {
    throw std::invalid_argument("PendingQueue: job " + std::to_string(id) + " is not queued");
  }
  const uint32_t pos = it->second;
  account(jobs_[pos], pos, -1);
  index_.erase(it);
  if (pos + 1 != jobs_.size()) {
    jobs_[pos] = jobs_.back();
    index_[jobs_[pos].id] = pos;
    reindex(pos);
  }
  jobs_.pop_back();
}

void PendingQueue::reindex(uint32_t pos) {
  const PendingJob& job = jobs_[pos];
  const JobSpec& s = *job.spec;
  const Stream& stream = streams_[per_tenant_ ? s.tenant : 0];
  stream.find(StreamEntry{order_.pending_key(job)})->index = pos;
  const ByEstimate& by_est = by_shape_.at(GangShape::of(s));
  by_est.find({{estimate_key(s), job.id}, 0})->index = pos;
}

void PendingQueue::set_wants_reason(JobId id, bool wants) {
  const uint32_t pos = index_.at(id);
  PendingJob& job = jobs_[pos];
  if (job.wants_reason == wants) return;
  // The stream's entry carries the flag into its tree's sums (first_kept): put it back anew.
  Stream& stream = streams_[per_tenant_ ? job.spec->tenant : 0];
  stream.erase(StreamEntry{order_.pending_key(job)});
  job.wants_reason = wants;
  stream.insert(stream_entry(job, pos));
  set_wanting(id, wants);
}

StreamEntry PendingQueue::stream_entry(const PendingJob& job, uint32_t index) const {
  const JobSpec& s = *job.spec;
  return StreamEntry{order_.pending_key(job), index, amounts_of(s, s.min_members),
                     s.duration_estimate, job.wants_reason};
}

void PendingQueue::set_wanting(JobId id, bool wants) {
  if (wants) {
    wanting_.insert(id);
  } else {
    wanting_.erase(id);
  }
}

void PendingQueue::account(const PendingJob& job, uint32_t index, int sign) {
  const JobSpec& s = *job.spec;
  const TenantId t = s.tenant;
  if (t >= count_.size()) {
    count_.resize(t + 1, 0);
    demand_.resize(t + 1, kZeroAmounts);
    if (per_tenant_) streams_.resize(t + 1);
  }
  Stream& stream = streams_[per_tenant_ ? t : 0];
  const Amounts amounts = amounts_of(s, s.min_members);
  const EstimateEntry by_est{{estimate_key(s), job.id}, index};
  if (sign > 0) {
    stream.insert(stream_entry(job, index));
    by_shape_[GangShape::of(s)].insert(by_est);
    ++rank_[order_.rank(s, job.attained_gpu_seconds)];
  } else {
    stream.erase(StreamEntry{order_.pending_key(job)});
    const auto n = by_shape_.find(GangShape::of(s));
    n->second.erase(by_est);
    if (n->second.empty()) by_shape_.erase(n);
    const auto r = rank_.find(order_.rank(s, job.attained_gpu_seconds));
    if (--r->second == 0) rank_.erase(r);
  }
  count_[t] += sign;
  if (s.priority != PriorityClass::kBestEffort) {
    for (size_t d = 0; d < kNumDims; ++d) demand_[t][d] += sign * amounts[d];
  }
  by_class_[static_cast<size_t>(s.priority)] += sign;
  if (job.wants_reason) set_wanting(job.id, sign > 0);
}

void offer_pending(const PendingQueue& q, bool refresh, std::vector<PendingJob>& everyone,
                   Snapshot& snap) {
  if (refresh) {
    everyone.assign(q.jobs().begin(), q.jobs().end());
    for (PendingJob& p : everyone) p.wants_reason = true;
    snap.pending = everyone;
    snap.pending_queue = nullptr;
  } else {
    snap.pending = q.jobs();
    snap.pending_queue = &q;
  }
}

void reasons_given(PendingQueue& q, std::span<const PendingReason> given) {
  for (const PendingReason& r : given) {
    if (const PendingJob* p = q.find(r.job); p != nullptr && p->wants_reason) {
      q.set_wants_reason(r.job, false);
    }
  }
}

}  // namespace tessera
