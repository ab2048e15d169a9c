// Each job's history (control/serve/row_events.h): events derived from row changes, written with
// the rows, and the changes of a waiting job's reason recorded after each cycle.
#include <fmt/format.h>
#include <cmath>
#include <set>

#include "control/serve/job.h"
#include "control/serve/service.h"

namespace tessera {

std::vector<JobEvent> Service::row_events_locked(std::span<const JobRow* const> rows,
                                                 double t) const {
  std::vector<JobEvent> out;
  std::set<int64_t> seen;  // a row written twice in one batch changes once
  for (const JobRow* r : rows) {
    if (!seen.insert(r->id).second) continue;
    const auto it = jobs_.find(r->id);
    if (it == jobs_.end()) continue;
    const Job& j = *it->second;
    std::string where;
    if (r->state == JobState::kRunning) {
      for (const MemberPlacement& p : placement_locked(j.alloc)) {
        std::string gpus;
        for (const int32_t g : p.gpus) gpus += (gpus.empty() ? "" : ",") + std::to_string(g);
        if (!where.empty()) where += "; ";
        where += p.node + (gpus.empty() ? "" : " GPU " + gpus);
      }
    }
    for (JobEvent& e : transition_events(j.recorded, *r, t, where)) out.push_back(std::move(e));
    // Its power limit changed (serve's power policies): at its start, or while it runs.
    const bool new_run = r->attempts != j.recorded.attempts;
    const double was = new_run ? 0.0 : j.recorded.power_limit_w;
    if (r->state == JobState::kRunning && std::abs(r->power_limit_w - was) > 1e-9) {
      const double w = r->power_limit_w > 0 ? r->power_limit_w : tdp_of(j.alloc);
      std::string msg = fmt::format("power limit {:.0f} W", w);
      if (!j.power_why.empty()) msg += " (" + j.power_why + ")";
      out.push_back(JobEvent{0, r->id, t, "PowerLimit", std::move(msg)});
    }
  }
  return out;
}

void Service::mark_recorded_locked(std::span<const JobRow* const> rows) {
  for (const JobRow* r : rows) {
    if (const auto it = jobs_.find(r->id); it != jobs_.end()) {
      // A job that just ended teaches the classifier (once: its recorded state now says so).
      if (!is_terminal(it->second->recorded.state) && is_terminal(r->state)) learn_kind_locked(*r);
      it->second->recorded = RecordedState::of(*r);
    }
  }
}

void Service::record_reason_changes_locked(double t, const std::vector<Job*>* only) {
  std::vector<JobEvent> events;
  std::vector<std::pair<Job*, std::string>> changed;
  // Once each: `only` may name a job twice (its standing changed and the cycle gave it a
  // reason), and its recorded reason changes only after the write.
  std::set<int64_t> seen;
  auto look_at = [&](Job* j) {
    if (j->row.state != JobState::kPending || !seen.insert(j->row.id).second) return;
    if (j->reason_events > kMaxReasonEvents) return;
    auto [code, text] = why_pending_locked(*j, false);
    // Held has its own event (Held / Released); an undecided job has nothing to say yet.
    if (code.empty() || code == j->reason_recorded) return;
    if (code != "Held") {
      text = why_pending_locked(*j, true).second;
      if (j->reason_events == kMaxReasonEvents) {
        text += " (its reason changed " + std::to_string(kMaxReasonEvents) +
                " times: further changes are not recorded)";
      }
      events.push_back(JobEvent{0, j->row.id, t, "Pending", code + ": " + text});
    }
    changed.emplace_back(j, std::move(code));
  };
  if (only != nullptr) {
    for (Job* j : *only) look_at(j);
  } else {
    for (Job* j : pending_) look_at(j);
  }
  if (events.empty() && changed.empty()) return;
  try {
    if (!events.empty()) store_->update_jobs({}, nullptr, {}, events);
  } catch (const StoreError& e) {
    note_write_failure(e);  // recorded at the next cycle that can write
    return;
  }
  for (auto& [j, code] : changed) {
    if (code != "Held") ++j->reason_events;
    j->reason_recorded = std::move(code);
  }
}

std::vector<JobEvent> Service::job_events(const Caller& caller, int64_t id) const {
  {
    std::lock_guard lock(mu_);
    visible_row_locked(caller, id);
  }
  return store_->job_events(id);
}

}  // namespace tessera
