// What a report needs from a simulation's event log (simulate --events: one JSON object per
// line with t, type, job): per-job JCTs and waits for the CDFs, and when preemptions and job
// failures happened, for results written before simulate's --json carried them.
#pragma once

#include <istream>
#include <string>
#include <vector>

namespace tessera::report {

struct EventsDigest {
  std::vector<double> jct, wait;              // seconds, one per finished job / started job
  std::vector<double> preemptions, failures;  // times of `preempt` and `fail` events
  double first = 0, last = 0;                 // the first and last event times
  size_t lines = 0;
};

// Reads an event log; `name` is the file's name for errors ("EVENTS.jsonl line 3: ...").
// Throws std::runtime_error on a line that is not an event.
EventsDigest digest_events(std::istream& in, const std::string& name);

}  // namespace tessera::report
