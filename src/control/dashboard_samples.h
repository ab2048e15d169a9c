// What the dashboard's charts draw: a sample of the server every few seconds (GPUs held per
// tenant, queue depth, decisions, completions, each queue's share against its entitlement),
// kept for a window (24 h by default), stored so that a restart loses none of it, and read
// back averaged into buckets as wide as the chart needs.
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "control/views.h"

namespace tessera {

struct HistorySample {
  struct Tenant {
    std::string name;
    double gpus = 0, pending = 0, running = 0;
  };
  struct Queue {
    std::string path;
    double holds_gpus = 0, fair_share_gpus = 0, guarantee_gpus = 0;
  };
  double t = 0;           // unix seconds at the end of the interval
  double interval_s = 0;  // how long the interval was (the counters count over it)
  // Gauges, as of t (averages, once downsampled).
  double gpus_total = 0, gpus_allocated = 0, pending_jobs = 0, running_jobs = 0;
  // Counters: what happened during the interval.
  uint64_t cycles = 0, starts = 0, preemptions = 0, completions = 0;
  std::vector<Tenant> tenants;  // active tenants only (GPUs, pending or running)
  std::vector<Queue> queues;

  double decisions_per_s() const {
    return interval_s > 0 ? static_cast<double>(starts + preemptions) / interval_s : 0;
  }
};

// At most this many tenants and queues per sample: beyond it the smallest (by GPUs held) are
// added up into one "(other)" entry, so that a sample's size is bounded whatever the load.
inline constexpr size_t kHistoryMaxEntries = 64;
void cap_entries(HistorySample& s);

nlohmann::json to_json(const HistorySample& s);
// Throws nlohmann::json::exception on a value that is not a sample.
HistorySample history_sample_from_json(const nlohmann::json& j);

// Samples in [since, until] averaged per bucket of `step` seconds (aligned to multiples of
// step): gauges and per-entry values are means over the bucket's samples (an entry missing from
// a sample counts 0), counters and intervals are sums, t is the bucket's last sample's. A step
// no wider than one sample returns the samples unchanged. `in` is in time order.
std::vector<HistorySample> downsample(const std::deque<HistorySample>& in, double since,
                                      double until, double step);

// Makes each sample from the server's counters and queues: the counters' increase since the
// previous sample (they restart at zero with the process, as the sampler does).
class HistorySampler {
 public:
  explicit HistorySampler(double start) : from_(start) {}
  bool due(double t, double interval) const { return interval > 0 && t - from_ >= interval; }
  HistorySample next(double t, const ServiceMetrics& m, const std::vector<QueueView>& queues);

 private:
  double from_;          // the start of the next sample's interval
  ServiceMetrics base_;  // the counters as of the last sample
};

// The window of samples in memory, oldest first. Thread-safe: the scheduler thread appends,
// API threads read.
class HistoryLog {
 public:
  explicit HistoryLog(double window_seconds) : window_(window_seconds) {}
  // Appends s (ignored unless later than the last sample) and drops samples older than the
  // window before it.
  void append(HistorySample s);
  std::vector<HistorySample> query(double since, double until, double step) const;
  size_t size() const;
  double window_seconds() const { return window_; }

 private:
  double window_;
  mutable std::mutex mu_;
  std::deque<HistorySample> samples_;  // invariant: t strictly increasing
};

}  // namespace tessera
