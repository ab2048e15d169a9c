// The dashboard's history: a sample of the server every history_interval_seconds, appended to
// memory and to the database (so that a restart keeps the charts), read back by GET /v1/history.
#include <iostream>

#include "control/service.h"
#include "control/service_job.h"
#include "store/store.h"

namespace tessera {

void Service::restore_history() {
  history_ = std::make_unique<HistoryLog>(opt_.history_window_seconds);
  history_from_ = now();
  if (opt_.history_interval_seconds <= 0) return;
  size_t bad = 0;
  for (const auto& [t, text] : store_->history(history_from_ - opt_.history_window_seconds)) {
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
  if (opt_.history_interval_seconds <= 0) return;
  const double t = now();
  if (t - history_from_ < opt_.history_interval_seconds) return;
  const ServiceMetrics m = metrics();
  HistorySample s;
  s.t = t;
  s.interval_s = t - history_from_;
  s.gpus_total = m.gpus_total;
  s.gpus_allocated = m.gpus_allocated;
  s.pending_jobs = static_cast<double>(m.pending_jobs);
  s.running_jobs = static_cast<double>(m.running_jobs);
  // Counters restart at zero with the process: the first sample counts from then.
  s.cycles = m.cycles - history_base_.cycles;
  s.starts = m.starts - history_base_.starts;
  s.preemptions = m.preemptions - history_base_.preemptions;
  s.completions = m.completions - history_base_.completions;
  for (const ServiceMetrics::Tenant& x : m.tenants) {
    if (x.gpus_allocated == 0 && x.pending == 0 && x.running == 0) continue;
    s.tenants.push_back(
        {x.name, x.gpus_allocated, static_cast<double>(x.pending), static_cast<double>(x.running)});
  }
  for (const QueueView& q : queues(Caller{true, ""})) {
    s.queues.push_back({q.path, q.holds_gpus, q.fair_share_gpus, q.guarantee_gpus});
  }
  cap_entries(s);
  history_base_ = m;
  history_from_ = t;
  try {
    store_->append_history(t, to_json(s).dump(), t - opt_.history_window_seconds);
  } catch (const StoreError& e) {
    // Kept in memory; the database has a gap (it is full or failing: health reports it).
    note_write_failure(e);
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
