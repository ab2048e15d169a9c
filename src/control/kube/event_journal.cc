#include "control/kube/event_journal.h"

#include <algorithm>

namespace tessera::kube {

void EventJournal::add(const std::string& gang_key, double at, const std::string& type,
                       const std::string& message) {
  std::lock_guard lock(mu_);
  if (by_gang_.size() >= gangs_ && by_gang_.count(gang_key) == 0) {
    // Over its bound: drop the gang written to least recently. A linear scan, paid by every
    // new gang once the bound is reached (gangs are not forgotten when they end).
    auto oldest = std::min_element(
        by_gang_.begin(), by_gang_.end(),
        [](const auto& a, const auto& b) { return a.second.touched < b.second.touched; });
    by_gang_.erase(oldest);
  }
  Kept& k = by_gang_[gang_key];
  JobEvent e;
  e.id = next_++;
  e.at = at;
  e.type = type;
  e.message = message;
  k.touched = e.id;
  k.events.push_back(std::move(e));
  while (k.events.size() > per_gang_) k.events.pop_front();
}

std::vector<JobEvent> EventJournal::of(const std::string& gang_key) const {
  std::lock_guard lock(mu_);
  const auto it = by_gang_.find(gang_key);
  if (it == by_gang_.end()) return {};
  return {it->second.events.begin(), it->second.events.end()};
}

}  // namespace tessera::kube
