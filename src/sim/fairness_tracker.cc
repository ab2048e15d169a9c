#include "sim/fairness_tracker.h"

#include <algorithm>
#include <cmath>

#include "engine/fair_share.h"

namespace tessera {

FairnessTracker::FairnessTracker(const QueueTree& tree, const Cluster& c, const Workload& w,
                                 double series_interval, double start)
    : tree_(tree),
      cluster_(c),
      capacity_(fair_capacity(tree.settings(), c)),
      active_(tree.size(), 0),
      usage_(tree.size(), kZeroAmounts),
      demand_(tree.size(), kZeroAmounts),
      entitled_(tree.size(), kZeroAmounts),
      decayed_(tree.size(), tree.settings().half_life_seconds),
      series_start_(start),
      series_interval_(series_interval),
      series_end_(start) {
  std::vector<bool> used(tree.size(), false);
  for (const JobSpec& j : w.jobs) used[tree.leaf_of(j.tenant)] = true;
  for (QueueId q = 0; q < tree.size(); ++q) {
    if (used[q]) leaves_.push_back(q);
  }
  gpu_seconds_.resize(leaves_.size());
  entitled_seconds_.resize(leaves_.size());
}

void FairnessTracker::add_demand(const JobSpec& job, const Amounts& a, int sign) {
  if (job.priority == PriorityClass::kBestEffort) return;
  Amounts& d = demand_[tree_.leaf_of(job.tenant)];
  for (size_t k = 0; k < kNumDims; ++k) d[k] += sign * a[k];
  dirty_ = true;
}

void FairnessTracker::add_usage(TenantId t, const Amounts& a, int sign) {
  Amounts& u = usage_[tree_.leaf_of(t)];
  for (size_t k = 0; k < kNumDims; ++k) u[k] += sign * a[k];
}

Amounts FairnessTracker::held(const JobSpec& job, const Allocation& a) const {
  return fair_amounts_of(tree_.settings(), cluster_, job, a);
}

void FairnessTracker::refresh_entitlement() {
  if (!dirty_) return;
  entitled_ = water_fill(tree_, capacity_, demand_);
  dirty_ = false;
}

void FairnessTracker::advance(double from, double to) {
  const double dt = to - from;
  if (!(dt > 0)) return;
  refresh_entitlement();
  // Jain's index over leaves of received / entitled GPU share, while every leaf has demand.
  // Leaves entitled to nothing (only best-effort work) have no ratio and are left out.
  if (leaves_.size() > 1) {
    bool all_active = true;
    double sum = 0, sq = 0;
    int n = 0;
    for (QueueId q : leaves_) {
      if (active_[q] == 0) {
        all_active = false;
        break;
      }
      if (entitled_[q][kGpuDim] <= 0) continue;
      const double x =
          static_cast<double>(usage_[q][kGpuDim]) / static_cast<double>(entitled_[q][kGpuDim]);
      sum += x;
      sq += x * x;
      ++n;
    }
    if (all_active && n > 0) {
      jain_integral_ += (sq > 0 ? sum * sum / (n * sq) : 1.0) * dt;
      jain_time_ += dt;
    }
  }
  decayed_.advance(dt, usage_, leaves_);
  if (series_interval_ > 0) {
    // Split [from, to) at bucket boundaries.
    double t = from;
    while (t < to) {
      const auto b = static_cast<size_t>(std::floor((t - series_start_) / series_interval_));
      const double bucket_end = series_start_ + static_cast<double>(b + 1) * series_interval_;
      const double step = std::min(to, bucket_end) - t;
      for (size_t i = 0; i < leaves_.size(); ++i) {
        if (gpu_seconds_[i].size() <= b) {
          gpu_seconds_[i].resize(b + 1, 0.0);
          entitled_seconds_[i].resize(b + 1, 0.0);
        }
        const QueueId q = leaves_[i];
        gpu_seconds_[i][b] += static_cast<double>(usage_[q][kGpuDim]) / kMilliPerGpu * step;
        entitled_seconds_[i][b] += static_cast<double>(entitled_[q][kGpuDim]) / kMilliPerGpu * step;
      }
      t += step;
    }
    series_end_ = std::max(series_end_, to);
  }
}

ShareSeries FairnessTracker::series() const {
  ShareSeries s;
  s.start = series_start_;
  s.interval = series_interval_;
  if (series_interval_ <= 0) return s;
  for (size_t i = 0; i < leaves_.size(); ++i) {
    s.queues.push_back(tree_.queue(leaves_[i]).path);
    std::vector<double> g = gpu_seconds_[i], e = entitled_seconds_[i];
    for (size_t b = 0; b < g.size(); ++b) {
      const double begin = series_start_ + static_cast<double>(b) * series_interval_;
      const double len = std::min(series_interval_, series_end_ - begin);
      g[b] = len > 0 ? g[b] / len : 0;
      e[b] = len > 0 ? e[b] / len : 0;
    }
    s.gpus.push_back(std::move(g));
    s.entitled.push_back(std::move(e));
  }
  return s;
}

}  // namespace tessera
