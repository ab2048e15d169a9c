#include "control/dashboard_samples.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace tessera {

namespace {

// Keeps the kHistoryMaxEntries - 1 largest entries of `v` (by `size`) and adds the rest up into
// one `other` entry (with `add`).
template <class Entry, class Size, class Add>
void fold_smallest(std::vector<Entry>& v, Entry other, Size size, Add add) {
  if (v.size() <= kHistoryMaxEntries) return;
  std::stable_sort(v.begin(), v.end(),
                   [&](const Entry& a, const Entry& b) { return size(a) > size(b); });
  for (size_t k = kHistoryMaxEntries - 1; k < v.size(); ++k) add(other, v[k]);
  v.resize(kHistoryMaxEntries - 1);
  v.push_back(std::move(other));
}

}  // namespace

void cap_entries(HistorySample& s) {
  using T = HistorySample::Tenant;
  using Q = HistorySample::Queue;
  fold_smallest(
      s.tenants, T{"(other)"}, [](const T& t) { return t.gpus; },
      [](T& o, const T& t) {
        o.gpus += t.gpus;
        o.pending += t.pending;
        o.running += t.running;
      });
  fold_smallest(
      s.queues, Q{"(other)"}, [](const Q& q) { return q.holds_gpus; },
      [](Q& o, const Q& q) {
        o.holds_gpus += q.holds_gpus;
        o.fair_share_gpus += q.fair_share_gpus;
        o.guarantee_gpus += q.guarantee_gpus;
      });
}

nlohmann::json to_json(const HistorySample& s) {
  nlohmann::json tenants = nlohmann::json::array();
  for (const auto& t : s.tenants) {
    tenants.push_back(
        {{"name", t.name}, {"gpus", t.gpus}, {"pending", t.pending}, {"running", t.running}});
  }
  nlohmann::json queues = nlohmann::json::array();
  for (const auto& q : s.queues) {
    queues.push_back({{"path", q.path},
                      {"holds_gpus", q.holds_gpus},
                      {"fair_share_gpus", q.fair_share_gpus},
                      {"guarantee_gpus", q.guarantee_gpus}});
  }
  return {{"t", s.t},
          {"interval_s", s.interval_s},
          {"gpus_total", s.gpus_total},
          {"gpus_allocated", s.gpus_allocated},
          {"pending_jobs", s.pending_jobs},
          {"running_jobs", s.running_jobs},
          {"cycles", s.cycles},
          {"starts", s.starts},
          {"preemptions", s.preemptions},
          {"completions", s.completions},
          {"decisions_per_s", s.decisions_per_s()},
          {"tenants", std::move(tenants)},
          {"queues", std::move(queues)}};
}

HistorySample history_sample_from_json(const nlohmann::json& j) {
  HistorySample s;
  s.t = j.at("t").get<double>();
  s.interval_s = j.at("interval_s").get<double>();
  s.gpus_total = j.at("gpus_total").get<double>();
  s.gpus_allocated = j.at("gpus_allocated").get<double>();
  s.pending_jobs = j.at("pending_jobs").get<double>();
  s.running_jobs = j.at("running_jobs").get<double>();
  s.cycles = j.at("cycles").get<uint64_t>();
  s.starts = j.at("starts").get<uint64_t>();
  s.preemptions = j.at("preemptions").get<uint64_t>();
  s.completions = j.at("completions").get<uint64_t>();
  for (const auto& t : j.at("tenants")) {
    s.tenants.push_back({t.at("name").get<std::string>(), t.at("gpus").get<double>(),
                         t.at("pending").get<double>(), t.at("running").get<double>()});
  }
  for (const auto& q : j.at("queues")) {
    s.queues.push_back({q.at("path").get<std::string>(), q.at("holds_gpus").get<double>(),
                        q.at("fair_share_gpus").get<double>(),
                        q.at("guarantee_gpus").get<double>()});
  }
  return s;
}

namespace {

// The running sums of one bucket.
struct Bucket {
  HistorySample sum;
  size_t n = 0;
  std::map<std::string, HistorySample::Tenant> tenants;
  std::map<std::string, HistorySample::Queue> queues;

  void add(const HistorySample& s) {
    sum.t = s.t;
    sum.interval_s += s.interval_s;
    sum.gpus_total += s.gpus_total;
    sum.gpus_allocated += s.gpus_allocated;
    sum.pending_jobs += s.pending_jobs;
    sum.running_jobs += s.running_jobs;
    sum.cycles += s.cycles;
    sum.starts += s.starts;
    sum.preemptions += s.preemptions;
    sum.completions += s.completions;
    for (const auto& t : s.tenants) {
      auto& e = tenants[t.name];
      e.gpus += t.gpus;
      e.pending += t.pending;
      e.running += t.running;
    }
    for (const auto& q : s.queues) {
      auto& e = queues[q.path];
      e.holds_gpus += q.holds_gpus;
      e.fair_share_gpus += q.fair_share_gpus;
      e.guarantee_gpus += q.guarantee_gpus;
    }
    ++n;
  }

  HistorySample mean() const {
    HistorySample out = sum;
    const auto k = static_cast<double>(n);
    out.gpus_total /= k;
    out.gpus_allocated /= k;
    out.pending_jobs /= k;
    out.running_jobs /= k;
    for (const auto& [name, t] : tenants) {
      out.tenants.push_back({name, t.gpus / k, t.pending / k, t.running / k});
    }
    for (const auto& [path, q] : queues) {
      out.queues.push_back({path, q.holds_gpus / k, q.fair_share_gpus / k, q.guarantee_gpus / k});
    }
    return out;
  }
};

}  // namespace

std::vector<HistorySample> downsample(const std::deque<HistorySample>& in, double since,
                                      double until, double step) {
  const auto first = std::lower_bound(in.begin(), in.end(), since,
                                      [](const HistorySample& s, double t) { return s.t < t; });
  std::vector<HistorySample> out;
  Bucket b;
  double key = NAN;
  for (auto it = first; it != in.end() && it->t <= until; ++it) {
    // A step no wider than the sample interval keeps every sample.
    if (step <= it->interval_s || step <= 0) {
      if (b.n > 0) out.push_back(b.mean());
      b = Bucket{};
      out.push_back(*it);
      continue;
    }
    const double k = std::floor(it->t / step);
    if (b.n > 0 && k != key) {
      out.push_back(b.mean());
      b = Bucket{};
    }
    key = k;
    b.add(*it);
  }
  if (b.n > 0) out.push_back(b.mean());
  return out;
}

HistorySample HistorySampler::next(double t, const ServiceMetrics& m,
                                   const std::vector<QueueView>& queues) {
  HistorySample s;
  s.t = t;
  s.interval_s = t - from_;
  s.gpus_total = m.gpus_total;
  s.gpus_allocated = m.gpus_allocated;
  s.pending_jobs = static_cast<double>(m.pending_jobs);
  s.running_jobs = static_cast<double>(m.running_jobs);
  s.cycles = m.cycles - base_.cycles;
  s.starts = m.starts - base_.starts;
  s.preemptions = m.preemptions - base_.preemptions;
  s.completions = m.completions - base_.completions;
  for (const ServiceMetrics::Tenant& x : m.tenants) {
    if (x.gpus_allocated == 0 && x.pending == 0 && x.running == 0) continue;
    s.tenants.push_back(
        {x.name, x.gpus_allocated, static_cast<double>(x.pending), static_cast<double>(x.running)});
  }
  for (const QueueView& q : queues) {
    s.queues.push_back({q.path, q.holds_gpus, q.fair_share_gpus, q.guarantee_gpus});
  }
  cap_entries(s);
  base_ = m;
  from_ = t;
  return s;
}

void HistoryLog::append(HistorySample s) {
  std::lock_guard lock(mu_);
  if (!samples_.empty() && s.t <= samples_.back().t) return;
  const double oldest = s.t - window_;
  while (!samples_.empty() && samples_.front().t < oldest) samples_.pop_front();
  samples_.push_back(std::move(s));
}

std::vector<HistorySample> HistoryLog::query(double since, double until, double step) const {
  // The range is copied under the lock and averaged outside it: the scheduler thread's next
  // append never waits on a reader's arithmetic.
  std::deque<HistorySample> range;
  {
    std::lock_guard lock(mu_);
    const auto from = std::lower_bound(samples_.begin(), samples_.end(), since,
                                       [](const HistorySample& s, double t) { return s.t < t; });
    const auto to = std::upper_bound(from, samples_.end(), until,
                                     [](double t, const HistorySample& s) { return t < s.t; });
    range.assign(from, to);
  }
  return downsample(range, since, until, step);
}

size_t HistoryLog::size() const {
  std::lock_guard lock(mu_);
  return samples_.size();
}

}  // namespace tessera
