// The simulator's event queue: a binary heap on (time, sequence). The sequence number makes
// the order of simultaneous events the order they were scheduled in, so runs are reproducible.
#pragma once

#include <cstdint>
#include <queue>
#include <vector>

namespace tessera {

// kRequeue: a preempted job has checkpointed (its grace is over) and waits again.
// kBegin: a job that preempted others gets their GPUs (their grace is over).
// kNodeFail / kNodeRecover: a node goes down (`job` is the index of the failure in
// SimOptions::failures) or comes back (`job` is the node).
// kNodeSleep: node `job` has been empty for the sleep threshold (stale if its generation moved).
enum class EventKind : uint8_t {
  kFinish,
  kTick,
  kRequeue,
  kBegin,
  kNodeFail,
  kNodeRecover,
  kNodeSleep,
  kRound  // a round boundary of round-based scheduling (SimOptions::round_seconds)
};

struct Event {
  double time = 0;
  uint64_t seq = 0;
  EventKind kind = EventKind::kTick;
  uint32_t job = 0;
  uint32_t generation = 0;  // a finish is stale if the job was preempted since it was scheduled
};

class EventQueue {
 public:
  void push(double time, EventKind kind, uint32_t job = 0, uint32_t generation = 0) {
    heap_.push(Event{time, next_seq_++, kind, job, generation});
  }
  bool empty() const { return heap_.empty(); }
  const Event& top() const { return heap_.top(); }
  Event pop() {
    Event e = heap_.top();
    heap_.pop();
    return e;
  }
  size_t size() const { return heap_.size(); }

 private:
  struct Later {
    bool operator()(const Event& a, const Event& b) const {
      return a.time != b.time ? a.time > b.time : a.seq > b.seq;
    }
  };
  std::priority_queue<Event, std::vector<Event>, Later> heap_;
  uint64_t next_seq_ = 0;
};

}  // namespace tessera
