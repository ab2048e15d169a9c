// What the scheduler told each gang's pods (the Events it wrote: Scheduled, FailedScheduling,
// Preempted, ...), kept in memory for the read API's job history (`tessera job ID`), as
// `tessera serve` keeps a job's history in its store. Kubernetes keeps the Events themselves
// (for an hour, by default); this is the scheduler's own record, bounded.
//
// Thread-safe: the scheduler thread adds, the read API's threads read.
#pragma once

#include <cstddef>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "store/store.h"

namespace tessera::kube {

class EventJournal {
 public:
  // `per_gang`: the newest kept of each gang's events; `gangs`: how many gangs are kept (the
  // one least recently written to is dropped first).
  explicit EventJournal(size_t per_gang = 64, size_t gangs = 20000)
      : per_gang_(per_gang), gangs_(gangs) {}

  // An event about one pod of gang `gang_key` (Gang::key), "pod NAME: " before its words.
  void add(const std::string& gang_key, double at, const std::string& type,
           const std::string& message);
  // Its events, oldest first, numbered in the order they were added.
  std::vector<JobEvent> of(const std::string& gang_key) const;

 private:
  struct Kept {
    std::deque<JobEvent> events;
    int64_t touched = 0;  // the last event's number: the least recent go first
  };
  mutable std::mutex mu_;
  size_t per_gang_, gangs_;
  int64_t next_ = 1;
  std::map<std::string, Kept> by_gang_;
};

}  // namespace tessera::kube
