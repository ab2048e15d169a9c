// The dashboard's history: a sample of the server every history_interval_seconds, appended to
// memory and to the database (so that a restart keeps the charts), read back by GET /v1/history.
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
}

void Service::record_history_if_due() {
  const double t = now();
  if (!history_sampler_->due(t, opt_.history_interval_seconds)) return;
  HistorySample s = history_sampler_->next(t, metrics(), queues(Caller{true, ""}));
  try {
    store_->append_history(t, to_json(s).dump(), t - opt_.history_window_seconds);
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
  std::vector<HistorySample> out = history_->query(since, until, step);
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
