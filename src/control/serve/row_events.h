// A job's history (`tessera job ID`, GET /v1/jobs/ID/events) as events derived from the
// changes of its stored row: whatever path changes a job (a cycle, a poll, an API call), the
// events are computed from what the row was at its last write and what it is now, and written
// in the same transaction as the row, so the history never misses or repeats a transition and
// never says what the database does not hold.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "store/store.h"

namespace tessera {

// What of a row the history follows, as of its last write.
struct RecordedState {
  JobState state = JobState::kPending;
  bool held = false;
  int32_t attempts = 0;
  double power_limit_w = 0;
  static RecordedState of(const JobRow& r) {
    return RecordedState{r.state, r.held, r.attempts, r.power_limit_w};
  }
};

// The events that take a job from `was` to `now` at time `at`, oldest first. `where`
// describes the placement of a run that starts ("node-0 GPU 0,1"); the job_id is now.id.
std::vector<JobEvent> transition_events(const RecordedState& was, const JobRow& now, double at,
                                        const std::string& where);

// Reason changes: a job that keeps waiting records each change of its reason code, at most
// this many times (a job whose reason flips every cycle would otherwise grow its history
// without bound); the last one says that further changes go unrecorded.
inline constexpr int32_t kMaxReasonEvents = 50;

}  // namespace tessera
