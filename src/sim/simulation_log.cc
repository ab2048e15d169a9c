// What the simulation records for readers (sim/simulation.h): the event log
// (SimOptions::events) and the histories of explained jobs (SimOptions::explain).
#include "sim/simulation.h"

#include <fmt/format.h>

#include <string>

namespace tessera::sim_detail {

void Simulation::write_event(std::string_view type, JobId j) {
  if (opt_.events == nullptr) return;
  *opt_.events << fmt::format(R"({{"t":{},"type":"{}","job":"{}"}})", now_, type, w_.jobs[j].name)
               << '\n';
}

void Simulation::note_pending(const PendingReason& r) {
  JobState& js = jobs_[r.job];
  if (js.history < 0) return;
  if (js.has_reason && js.reason == r.code && js.reason_queue == r.queue &&
      js.reason_blocker == r.blocker) {
    return;  // the same rule still holds it
  }
  js.has_reason = true;
  js.reason = r.code;
  js.reason_queue = r.queue;
  js.reason_blocker = r.blocker;
  const std::string blocker = r.blocker < w_.jobs.size() ? w_.jobs[r.blocker].name : "";
  const std::string queue = r.queue < tree_.size() ? tree_.queue(r.queue).path : "";
  note(r.job, "pending ({}): {}", to_string(r.code), describe(r, blocker, queue));
}

// "2 x node-3 (4 GPUs each)" style summary of where a gang sits.
std::string Simulation::describe_placement(const Allocation& a) const {
  std::string out;
  size_t i = 0;
  while (i < a.member_node.size()) {
    size_t k = i;
    while (k < a.member_node.size() && a.member_node[k] == a.member_node[i]) ++k;
    if (!out.empty()) out += ", ";
    out += fmt::format("{}{}", k - i > 1 ? fmt::format("{} x ", k - i) : "",
                       c_.node(a.member_node[i]).name);
    i = k;
  }
  int64_t per_member = 0;
  for (int32_t g = 0; g < a.gpus_per_member && g < static_cast<int32_t>(a.shares.size()); ++g) {
    per_member += a.shares[static_cast<size_t>(g)].milli;
  }
  return fmt::format("{} ({:g} GPUs per member)", out,
                     static_cast<double>(per_member) / kMilliPerGpu);
}

}  // namespace tessera::sim_detail
