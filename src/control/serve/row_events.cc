#include "control/serve/row_events.h"

namespace tessera {

std::vector<JobEvent> transition_events(const RecordedState& was, const JobRow& now, double at,
                                        const std::string& where) {
  std::vector<JobEvent> out;
  const auto add = [&](std::string type, std::string message) {
    out.push_back(JobEvent{0, now.id, at, std::move(type), std::move(message)});
  };
  if (!was.held && now.held) add("Held", now.message);
  if (was.held && !now.held) add("Released", "");
  if (was.state == now.state) {
    // A run that ended and started again between two writes (a launch that failed at once is
    // written as it fails): its new attempt still gets a Started.
    if (now.state == JobState::kRunning && now.attempts > was.attempts) {
      add("Started",
          "attempt " + std::to_string(now.attempts) + (where.empty() ? "" : " on ") + where);
    }
    return out;
  }
  const std::string exit_code =
      now.exit_code ? "exit code " + std::to_string(*now.exit_code) : std::string();
  const auto with_code = [&](const std::string& msg) {
    if (exit_code.empty()) return msg;
    return msg.empty() ? exit_code : msg + " (" + exit_code + ")";
  };
  switch (now.state) {
    case JobState::kRunning:
      add("Started",
          "attempt " + std::to_string(now.attempts) + (where.empty() ? "" : " on ") + where);
      break;
    case JobState::kPreempted:
      add("Preempted", now.message);
      break;
    case JobState::kPending:
      if (was.state == JobState::kPreempted) {
        add("Requeued", "its processes exited after the preemption; back in the queue");
      } else {
        add("Requeued", now.message);
      }
      break;
    case JobState::kSucceeded:
      add("Succeeded", with_code(""));
      break;
    case JobState::kFailed:
      add("Failed", with_code(now.message));
      break;
    case JobState::kCancelled:
      add("Cancelled", now.message);
      break;
    case JobState::kTimeout:
      add("TimedOut", with_code(now.message));
      break;
  }
  return out;
}

}  // namespace tessera
