// The history's events from row changes (control/serve/row_events.h), one per transition.
#include "control/serve/row_events.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

JobRow row(JobState s) {
  JobRow r;
  r.id = 7;
  r.state = s;
  return r;
}

std::vector<std::string> types(const std::vector<JobEvent>& es) {
  std::vector<std::string> out;
  for (const JobEvent& e : es) out.push_back(e.type);
  return out;
}

TEST(JobHistory, EachTransitionIsOneEventSayingWhatHappened) {
  RecordedState pending;
  JobRow running = row(JobState::kRunning);
  running.attempts = 1;
  auto es = transition_events(pending, running, 5, "n0 GPU 0,1");
  ASSERT_EQ(types(es), std::vector<std::string>{"Started"});
  EXPECT_EQ(es[0].message, "attempt 1 on n0 GPU 0,1");
  EXPECT_EQ(es[0].job_id, 7);
  EXPECT_EQ(es[0].at, 5);
  // Nothing changed: nothing to say.
  EXPECT_TRUE(transition_events(RecordedState::of(running), running, 6, "n0").empty());

  JobRow failed = running;
  failed.state = JobState::kFailed;
  failed.exit_code = 3;
  failed.message = "rank 1 exited with 3";
  es = transition_events(RecordedState::of(running), failed, 7, "");
  ASSERT_EQ(types(es), std::vector<std::string>{"Failed"});
  EXPECT_EQ(es[0].message, "rank 1 exited with 3 (exit code 3)");

  JobRow preempted = running;
  preempted.state = JobState::kPreempted;
  preempted.message = "preempted by job 9 (team-b)";
  EXPECT_EQ(transition_events(RecordedState::of(running), preempted, 8, "")[0].message,
            "preempted by job 9 (team-b)");
  JobRow back = preempted;
  back.state = JobState::kPending;
  es = transition_events(RecordedState::of(preempted), back, 9, "");
  ASSERT_EQ(types(es), std::vector<std::string>{"Requeued"});
  EXPECT_NE(es[0].message.find("preemption"), std::string::npos);

  JobRow timeout = running;
  timeout.state = JobState::kTimeout;
  timeout.message = "stopped at its time limit of 60 s";
  EXPECT_EQ(types(transition_events(RecordedState::of(running), timeout, 10, "")),
            std::vector<std::string>{"TimedOut"});
}

TEST(JobHistory, HoldAndReleaseAreTheirOwnEventsAndAnEndAfterAHoldIsStillSeen) {
  JobRow held = row(JobState::kPending);
  held.held = true;
  held.message = "held by admin";
  auto es = transition_events(RecordedState{}, held, 1, "");
  ASSERT_EQ(types(es), std::vector<std::string>{"Held"});
  EXPECT_EQ(es[0].message, "held by admin");
  JobRow cancelled = held;
  cancelled.held = false;
  cancelled.state = JobState::kCancelled;
  cancelled.message = "cancelled by team-a";
  EXPECT_EQ(types(transition_events(RecordedState::of(held), cancelled, 2, "")),
            (std::vector<std::string>{"Released", "Cancelled"}));
}

}  // namespace
}  // namespace tessera
