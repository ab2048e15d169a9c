// The dashboard's history: a sample of the server every history_interval_seconds, appended to
// memory and to the database (so that a restart keeps the charts), read back by GET /v1/history.
// Each hour's samples are also averaged into one kept for weeks (history_hourly), which answers
// for the time before the fine samples' window.
#include <cmath>
#include <iostream>

#include "control/serve/job.h"
#include "control/serve/service.h"
#include "store/store.h"

namespace tessera {

void Service::restore_history() {
  history_ = std::make_unique<HistoryLog>(opt_.history_window_seconds);
  history_sampler_ = std::make_unique<HistorySampler>(now());
  if (opt_.history_interval_seconds <= 0) return;
  size_t bad = 0;
  for (const auto& [t, text] : store_->history(now() - opt_.history_window_seconds)) {
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    try {
      history_->append(history_sample_from_json(j));
    } catch (const nlohmann::json::exception&) {
      ++bad;  // a row this build cannot read: the chart has a gap there, nothing else
    }
  }
  if (bad > 0) {
    std::cerr << "tessera serve: skipped " << bad << " unreadable history samples\n";
  }
  // Rolled up to the end of the last hour stored (hours since then are rolled from memory).
  const auto rolled = store_->history_hourly(now() - opt_.history_hourly_seconds, now());
  if (!rolled.empty()) rolled_until_ = std::ceil(rolled.back().first / 3600) * 3600;
}

void Service::roll_up_history(double t) {
  if (opt_.history_hourly_seconds <= 0) return;
  constexpr double kHour = 3600;
  const double hour_end = std::floor(t / kHour) * kHour;  // hours before this are complete
  // Each hour once, as soon as it is over (the fine samples hold it then; with a window of one
  // hour, but for its first sample or so).
  for (double end = std::max(rolled_until_ + kHour,
                             std::ceil((t - opt_.history_window_seconds) / kHour) * kHour);
       end <= hour_end; end += kHour) {
    // One bucket: the hour's samples averaged (counters summed).
    const std::vector<HistorySample> hour = history_->query(end - kHour, end - 1e-6, kHour);
    for (const HistorySample& h : hour) {
      store_->append_history_hourly(h.t, to_json(h).dump(), t - opt_.history_hourly_seconds);
    }
  }
  rolled_until_ = std::max(rolled_until_, hour_end);
}

std::vector<HistorySample> Service::hourly_history(double since, double until) const {
  std::vector<HistorySample> out;
  if (opt_.history_hourly_seconds <= 0 || since > until) return out;
  for (const auto& [t, text] : store_->history_hourly(since, until)) {
    try {
      out.push_back(history_sample_from_json(nlohmann::json::parse(text, nullptr, false)));
    } catch (const nlohmann::json::exception&) {  // unreadable: a gap in the chart
    }
  }
  return out;
}

void Service::record_history_if_due() {
  const double t = now();
  if (!history_sampler_->due(t, opt_.history_interval_seconds)) return;
  HistorySample s = history_sampler_->next(t, metrics(), queues(Caller{true, ""}));
  try {
    store_->append_history(t, to_json(s).dump(), t - opt_.history_window_seconds);
    roll_up_history(t);
    history_write_failing_ = false;
  } catch (const StoreError& e) {
    // Kept in memory; the database has a gap. Not the service's health: jobs' writes say that
    // (and their retry must not be skipped because a sample went through).
    if (!history_write_failing_) {
      std::cerr << "tessera serve: history samples are not being saved: " << e.what() << "\n";
    }
    history_write_failing_ = true;
  }
  history_->append(std::move(s));
}

std::vector<HistorySample> Service::history(const Caller& caller, double since, double until,
                                            double step) const {
  // Before the first whole hour of the fine samples' window, the hourly ones.
  const double fine_from = std::ceil((now() - opt_.history_window_seconds) / 3600) * 3600;
  std::vector<HistorySample> out;
  if (since >= fine_from || opt_.history_hourly_seconds <= 0) {
    out = history_->query(since, until, step);
  } else {
    std::deque<HistorySample> all;
    for (HistorySample& h : hourly_history(since, std::min(until, fine_from))) {
      if (h.t < fine_from) all.push_back(std::move(h));
    }
    for (HistorySample& h : history_->query(fine_from, until, 0)) all.push_back(std::move(h));
    out = downsample(all, since, until, step);
  }
  if (caller.admin) return out;
  std::string mine;
  {
    std::lock_guard lock(mu_);
    const std::optional<TenantId> t = tenants_.find(caller.tenant);
    mine = t ? leaf_path_locked(*t) : "";
  }
  for (HistorySample& s : out) {
    std::erase_if(s.tenants, [&](const auto& x) { return x.name != caller.tenant; });
    std::erase_if(s.queues, [&](const auto& q) { return q.path != mine; });
  }
  return out;
}

}  // namespace tessera
