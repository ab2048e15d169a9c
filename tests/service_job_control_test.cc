// Job control in the Service over an in-memory backend and a clock the test moves: arrays and
// their throttle, time limits, hold / release / requeue, updates, and dependencies.
#include <gtest/gtest.h>

#include <csignal>
#include <functional>
#include <string>
#include <vector>

#include "control/serve/service.h"
#include "service_fixture.h"
#include "service_test_util.h"
#include "store/job_request.h"

namespace tessera {
namespace {

// Job arrays: one job per index, at most the throttle running, lowest index first,
// each told its index; cancelled together.
TEST_F(ServiceTest, AnArrayRunsItsTasksWithinItsThrottleAndIsCancelledTogether) {
  auto s = make(8);
  const Caller admin{true, ""};
  const JobView first = s->submit(
      as("team-a"), job("name: sweep\narray: 0-5%2\nresources: {gpus: 1}\ncommand: [x]\n"), "",
      nullptr);
  const int64_t array = first.row.array_id;
  EXPECT_EQ(array, first.row.id);
  EXPECT_EQ(first.row.array_index, 0);
  JobFilter f;
  f.array = array;
  const std::vector<JobView> tasks = s->jobs(admin, f);
  ASSERT_EQ(tasks.size(), 6u);
  for (size_t k = 0; k < tasks.size(); ++k) {
    EXPECT_EQ(tasks[k].row.array_index, static_cast<int32_t>(k));
    EXPECT_EQ(tasks[k].row.array_id, array);
  }
  now_ += 1;
  s->tick();
  // 8 GPUs free, but the throttle lets two run: indices 0 and 1.
  const auto running = [&] {
    std::vector<int32_t> out;
    for (const JobView& v : s->jobs(admin, f)) {
      if (v.row.state == JobState::kRunning) out.push_back(v.row.array_index);
    }
    return out;
  };
  EXPECT_EQ(running(), (std::vector<int32_t>{0, 1}));
  const JobView waiting = s->job(admin, tasks[2].row.id);
  EXPECT_EQ(waiting.reason_code, "ArrayLimit");
  EXPECT_NE(waiting.pending_reason.find("runs 2 tasks at once"), std::string::npos);
  ASSERT_EQ(backend_->launches.size(), 2u);
  for (const LaunchSpec& l : backend_->launches) {
    const auto has = [&](const std::string& k, const std::string& v) {
      return std::find(l.env.begin(), l.env.end(), std::make_pair(k, v)) != l.env.end();
    };
    EXPECT_TRUE(has("TESSERA_ARRAY_JOB_ID", std::to_string(array)));
    EXPECT_TRUE(has("TESSERA_ARRAY_INDEX", std::to_string(l.job - static_cast<uint64_t>(array))));
  }
  // One ends: the next index takes its place.
  now_ += 10;
  backend_->exit(tasks[0].row.id, 0, 0);
  s->tick();
  s->tick();
  EXPECT_EQ(running(), (std::vector<int32_t>{1, 2}));
  // The tasks survive a restart as an array.
  s.reset();
  s = make(8);
  EXPECT_EQ(s->jobs(admin, f).size(), 6u);
  EXPECT_EQ(s->job(admin, tasks[5].row.id).row.array_index, 5);
  // Cancelling the array cancels every task that has not ended, in one audited write.
  const size_t n = s->cancel_array(RequestContext{admin, "POST", "/"}, tasks[3].row.id);
  EXPECT_EQ(n, 5u);  // index 0 had succeeded
  for (const JobView& v : s->jobs(admin, f)) {
    if (v.row.array_index == 0) {
      EXPECT_EQ(v.row.state, JobState::kSucceeded);
    } else {
      EXPECT_TRUE(v.row.state == JobState::kCancelled) << v.row.array_index;
    }
  }
  EXPECT_THROW(s->cancel_array(RequestContext{admin, "POST", "/"}, tasks[3].row.id), ServiceError);
  const std::vector<AuditEntry> audit = s->audit_log(1);
  ASSERT_EQ(audit.size(), 1u);
  EXPECT_EQ(audit[0].target, "array " + std::to_string(array) + " (5 tasks)");
}

// Preempted tasks of an array give up their place in its throttle, and take it back before
// higher indices: they are the lowest waiting.
TEST_F(ServiceTest, PreemptedArrayTasksRunAgainBeforeHigherIndices) {
  auto s = make(3);
  const Caller admin{true, ""};
  s->submit(as("team-a"),
            job("name: sweep\narray: 0-8%3\npriority_class: best-effort\nresources: {gpus: 1}\n"
                "checkpoint_grace: 20s\ncommand: [x]\n"),
            "", nullptr);
  JobFilter f;
  f.array = s->jobs(admin, JobFilter{}).front().row.array_id;
  const auto tasks = [&] { return s->jobs(admin, f); };
  const auto indices_in = [&](JobState state) {
    std::vector<int32_t> out;
    for (const JobView& v : tasks()) {
      if (v.row.state == state) out.push_back(v.row.array_index);
    }
    return out;
  };
  now_ += 1;
  s->tick();
  for (const JobView& v : tasks()) {
    if (v.row.array_index < 3) backend_->exit(v.row.id, 0, 0);
  }
  now_ += 10;
  s->tick();
  s->tick();
  ASSERT_EQ(indices_in(JobState::kRunning), (std::vector<int32_t>{3, 4, 5}));
  // Best-effort, tasks 3-5 give way to team-b, and take the whole grace to exit.
  for (auto& [pid, p] : backend_->procs) p.ignores_term = p.alive;
  now_ += 10;
  const int64_t b =
      s->submit(as("team-b"), job("name: b\nresources: {gpus: 3}\ncommand: [y]\n"), "", nullptr)
          .row.id;
  s->tick();
  ASSERT_EQ(indices_in(JobState::kPreempted), (std::vector<int32_t>{3, 4, 5}));
  now_ += 1;
  s->tick();
  ASSERT_EQ(indices_in(JobState::kPreempted), (std::vector<int32_t>{3, 4, 5}));
  // Stopping, they no longer run: the array's waiting tasks are not held by its throttle.
  for (const JobView& v : tasks()) {
    if (v.row.state == JobState::kPending) {
      EXPECT_NE(v.reason_code, "ArrayLimit") << v.row.array_index;
    }
  }
  now_ += 20;  // past the grace: killed, back in the queue, b starts
  s->tick();
  s->tick();
  ASSERT_EQ(state(*s, b), JobState::kRunning);
  ASSERT_TRUE(indices_in(JobState::kRunning).empty());
  // None of the array runs: its lowest waiting tasks are not held by its throttle.
  for (const JobView& v : tasks()) {
    if (v.row.array_index < 6) {
      EXPECT_NE(v.reason_code, "ArrayLimit") << v.row.array_index;
    }
  }
  // b ends: the lowest indices run first.
  now_ += 100;
  backend_->exit(b, 0, 0);
  s->tick();
  s->tick();
  EXPECT_EQ(indices_in(JobState::kRunning), (std::vector<int32_t>{3, 4, 5}));
}

TEST_F(ServiceTest, AnArrayLargerThanATenantMayQueueIsRefusedWhole) {
  ServiceOptions o = options(4);
  o.limits.max_pending_jobs = 10;
  auto b = std::make_unique<FakeBackend>();
  backend_ = b.get();
  Service s(o, std::move(b));
  try {
    s.submit(as("team-a"), job("name: big\narray: 0-10\ncommand: [x]\n"), "", nullptr);
    ADD_FAILURE() << "an 11-task array passed a limit of 10";
  } catch (const ServiceError& e) {
    EXPECT_EQ(e.kind(), ServiceError::kInvalid);
    EXPECT_EQ(e.field(), "array");
  }
  EXPECT_TRUE(s.jobs(Caller{true, ""}, JobFilter{}).empty());  // nothing half-submitted
  s.submit(as("team-a"), job("name: ok\narray: 0-9\ncommand: [x]\n"), "", nullptr);
  EXPECT_EQ(s.jobs(Caller{true, ""}, JobFilter{}).size(), 10u);
}

TEST_F(ServiceTest, ARunIsStoppedAtItsTimeLimitWithTheGraceAndEndsAsTimeout) {
  // time_limit is enforced (SIGTERM, the grace, SIGKILL; state timeout), while a
  // duration_estimate that is exceeded stops nothing.
  auto s = make(2);
  backend_->ignore_term_of.insert("stubborn");
  const int64_t limited =
      s->submit(as("lab"),
                job("name: stubborn\ntime_limit: 60s\ncheckpoint_grace: 10s\ncommand: [x]\n"), "",
                nullptr)
          .row.id;
  const int64_t estimated =
      s->submit(as("lab"), job("name: est\nduration_estimate: 30s\ncommand: [x]\n"), "", nullptr)
          .row.id;
  s->tick();
  ASSERT_EQ(state(*s, limited), JobState::kRunning);
  now_ += 59;
  s->tick();
  EXPECT_TRUE(backend_->signals_of(limited, 0).empty());
  now_ += 1;  // the limit: SIGTERM, which it ignores
  s->tick();
  EXPECT_EQ(backend_->signals_of(limited, 0), std::vector<int>{SIGTERM});
  now_ += 10;  // past the grace: SIGKILL
  s->tick();
  s->tick();
  EXPECT_EQ(backend_->signals_of(limited, 0), (std::vector<int>{SIGTERM, SIGKILL}));
  const JobView v = s->job(Caller{true, ""}, limited);
  EXPECT_EQ(v.row.state, JobState::kTimeout);
  EXPECT_EQ(v.row.message, "stopped at its time limit of 60 s");
  EXPECT_TRUE(is_terminal(v.row.state));
  EXPECT_EQ(state(*s, estimated), JobState::kRunning);  // 70 s past a 30 s estimate
  EXPECT_TRUE(backend_->signals_of(estimated, 0).empty());
}

TEST_F(ServiceTest, AQueueGivesItsDefaultTimeLimitAndRefusesMoreThanItsMaximum) {
  auto s = make_with_queues(4, R"(queues:
  - name: batch
    time_limit: {default: 1h, max: 4h}
    queues:
      - name: team-a
      - name: team-b
        time_limit: {default: 10m}
)");
  const auto limit_of = [&](const std::string& tenant, const std::string& extra) {
    const JobView v =
        s->submit(as(tenant), job("name: j\n" + extra + "command: [x]\n"), "", nullptr);
    return v.row.spec.time_limit_seconds;
  };
  EXPECT_EQ(limit_of("team-a", ""), 3600);  // its parent's default
  EXPECT_EQ(limit_of("team-b", ""), 600);   // its own default
  EXPECT_EQ(limit_of("team-a", "time_limit: 2h\n"), 7200);
  try {
    limit_of("team-b", "time_limit: 5h\n");  // the inherited maximum holds
    FAIL() << "a time limit above the queue's maximum was accepted";
  } catch (const ServiceError& e) {
    EXPECT_EQ(e.field(), "time_limit");
    EXPECT_NE(std::string(e.what()).find("batch/team-b"), std::string::npos) << e.what();
  }
}

TEST_F(ServiceTest, AHeldJobWaitsUntilReleasedAndARequeuedJobRunsAgain) {
  // tessera hold / release / requeue, with the hold kept across a restart.
  auto s = make(1);
  const int64_t first = s->submit(as("lab"), job("name: a\ncommand: [x]\n"), "", nullptr).row.id;
  const int64_t second = s->submit(as("lab"), job("name: b\ncommand: [x]\n"), "", nullptr).row.id;
  s->hold(as("lab"), first);
  s->tick();
  EXPECT_EQ(state(*s, first), JobState::kPending);
  EXPECT_EQ(state(*s, second), JobState::kRunning);  // the held job lets the next one run
  const JobView held = s->job(Caller{true, ""}, first);
  EXPECT_EQ(held.reason_code, "Held");
  EXPECT_NE(held.pending_reason.find("held by lab"), std::string::npos) << held.pending_reason;
  // Holding a running job, or releasing one not held, is a conflict.
  EXPECT_THROW(s->hold(as("lab"), second), ServiceError);
  EXPECT_THROW(s->release(as("lab"), second), ServiceError);
  // Requeue: the running job stops and waits again; the held one stays held.
  s->requeue(as("lab"), second);
  EXPECT_EQ(backend_->signals_of(second, 0), std::vector<int>{SIGTERM});
  s->tick();
  s->tick();
  const JobView again = s->job(Caller{true, ""}, second);
  EXPECT_EQ(again.row.state, JobState::kRunning);  // requeued, and the free GPU is its again
  EXPECT_EQ(again.row.attempts, 2);
  EXPECT_EQ(state(*s, first), JobState::kPending);
  // A restart keeps the hold.
  s.reset();
  s = make(1);
  EXPECT_EQ(s->job(Caller{true, ""}, first).reason_code, "Held");
  s->release(as("lab"), first);
  EXPECT_EQ(s->job(Caller{true, ""}, first).reason_code, "");
}

// A requeued run did not finish the job: it has no finished time while it waits or runs again,
// and only the run that ends it counts as a completion.
TEST_F(ServiceTest, ARequeuedJobHasNoFinishedTimeUntilItEnds) {
  auto s = make(1);
  const Caller admin{true, ""};
  const int64_t id = s->submit(as("lab"), job("name: a\ncommand: [x]\n"), "", nullptr).row.id;
  now_ += 1;
  s->tick();
  ASSERT_EQ(state(*s, id), JobState::kRunning);
  now_ += 10;
  s->requeue(as("lab"), id);
  s->tick();
  for (int k = 0; k < 3 && state(*s, id) != JobState::kRunning; ++k) {
    EXPECT_EQ(s->job(admin, id).row.finished_at, -1.0);  // waiting again
    now_ += 1;
    s->tick();
  }
  const JobView again = s->job(admin, id);
  ASSERT_EQ(again.row.state, JobState::kRunning);
  EXPECT_EQ(again.row.attempts, 2);
  EXPECT_EQ(again.row.finished_at, -1.0);
  EXPECT_EQ(s->metrics().completions, 0u);
  now_ += 10;
  backend_->exit(id, 0, 0);
  s->tick();
  const JobView done = s->job(admin, id);
  ASSERT_EQ(done.row.state, JobState::kSucceeded);
  EXPECT_EQ(done.row.finished_at, now_);
  EXPECT_EQ(s->metrics().completions, 1u);
}

// A job that keeps waiting for one reason, over cycles and across a restart, has it once in its
// history.
TEST_F(ServiceTest, AWaitingJobsHistoryDoesNotRepeatItsReason) {
  auto s = make(2);
  const Caller admin{true, ""};
  const int64_t big = submit_and_tick(*s, "team-a", "big", 2);
  const int64_t waits = submit_and_tick(*s, "team-a", "waits", 1);
  ASSERT_EQ(state(*s, big), JobState::kRunning);
  ASSERT_EQ(state(*s, waits), JobState::kPending);
  const std::map<int64_t, FakeBackend::Proc> procs = backend_->procs;
  s.reset();
  s = make(2);
  backend_->procs = procs;  // big's processes outlive the server
  for (int k = 0; k < 3; ++k) {
    now_ += 1;
    s->tick();
  }
  ASSERT_EQ(state(*s, big), JobState::kRunning);
  const std::vector<JobEvent> history = s->job_events(admin, waits);
  ASSERT_GE(history.size(), 2u);
  EXPECT_EQ(history[1].type, "Pending");
  for (size_t i = 1; i < history.size(); ++i) {
    EXPECT_FALSE(history[i].type == history[i - 1].type &&
                 history[i].message == history[i - 1].message)
        << "event " << i << " repeats: " << history[i].type << " " << history[i].message;
  }
}

TEST_F(ServiceTest, UpdateChangesAClassOrATimeLimitWithinWhatTheQueueAllows) {
  auto s = make_with_queues(1, R"(queues:
  - name: lab
    priority_classes: [research, best-effort]
    time_limit: {max: 4h}
)");
  const RequestContext admin{Caller{true, ""}, "PATCH", "/v1/jobs/1"};
  const int64_t running =
      s->submit(as("lab"), job("name: r\ntime_limit: 1h\ncommand: [x]\n"), "", nullptr).row.id;
  s->tick();
  const int64_t waiting = s->submit(as("lab"), job("name: w\ncommand: [x]\n"), "", nullptr).row.id;
  const auto kind_of = [&](const RequestContext& ctx, int64_t id,
                           const JobUpdate& u) -> std::optional<ServiceError::Kind> {
    try {
      s->update(ctx, id, u);
    } catch (const ServiceError& e) {
      return e.kind();
    }
    return std::nullopt;
  };
  // A waiting job's class, to one its queue allows.
  EXPECT_EQ(s->update(as("lab"), waiting, JobUpdate{"best-effort", std::nullopt}).priority_class,
            "best-effort");
  EXPECT_EQ(kind_of(as("lab"), waiting, JobUpdate{"production", std::nullopt}),
            ServiceError::kForbidden);  // as a submission naming it
  EXPECT_EQ(kind_of(as("lab"), running, JobUpdate{"research", std::nullopt}),
            ServiceError::kConflict);
  // Time limits: a tenant may lower its own, only the admin raise it, nobody past the maximum.
  EXPECT_EQ(
      s->update(as("lab"), running, JobUpdate{std::nullopt, 1800}).row.spec.time_limit_seconds,
      1800);
  EXPECT_EQ(kind_of(as("lab"), running, JobUpdate{std::nullopt, 3600}), ServiceError::kForbidden);
  EXPECT_EQ(s->update(admin, running, JobUpdate{std::nullopt, 3600}).row.spec.time_limit_seconds,
            3600);
  EXPECT_EQ(kind_of(admin, running, JobUpdate{std::nullopt, 5 * 3600}), ServiceError::kInvalid);
  // What the update stored is what a restart reads.
  EXPECT_EQ(s->job(Caller{true, ""}, waiting).priority_class, "best-effort");
}

// A tenant outranks (and so preempts) others only where the operator said it may: a queue
// naming no priority_classes allows its default class and lower ones.
TEST_F(ServiceTest, ATenantMayNotRaiseItsClassAboveWhatItsQueueGrants) {
  const auto refusal = [](const std::function<void()>& f) -> std::string {
    try {
      f();
    } catch (const ServiceError& e) {
      return e.kind() == ServiceError::kForbidden ? e.field() + ": " + e.what() : "other error";
    }
    return "";
  };
  auto s = make(4);  // no queue file: every tenant's queue names nothing
  const int64_t nlp = submit_and_tick(*s, "nlp", "big", 4);
  ASSERT_EQ(state(*s, nlp), JobState::kRunning);
  EXPECT_EQ(
      refusal([&] {
        s->submit(as("cv"), job("name: x\npriority_class: inference-critical\ncommand: [x]\n"), "",
                  nullptr);
      }),
      "priority_class: queue cv does not allow priority class inference-critical (it allows "
      "best-effort, research; a queue that lists no priority_classes allows its default class "
      "and lower ones)");
  const int64_t waiting =
      s->submit(as("cv"), job("name: w\nresources: {gpus: 2}\ncommand: [x]\n"), "", nullptr).row.id;
  EXPECT_NE(refusal([&] {
              s->update(as("cv"), waiting, JobUpdate{"production", std::nullopt});
            }),
            "");
  now_ += 1;
  s->tick();
  EXPECT_EQ(s->job(Caller{true, ""}, waiting).priority_class, "research");
  s.reset();

  // What the tree grants: a default of production allows production, not above it; a list
  // allows what it lists, in the queues below too.
  auto t = make_with_queues(4, R"(queues:
  - name: nlp
  - name: cv
  - name: serving
    default_priority_class: production
  - name: ops
    priority_classes: [inference-critical, best-effort]
    queues:
      - name: oncall
)");
  const auto submit = [&](const char* tenant, const char* cls) {
    return refusal([&] {
      t->submit(as(tenant),
                job(std::string("name: x\npriority_class: ") + cls + "\ncommand: [x]\n"), "",
                nullptr);
    });
  };
  EXPECT_EQ(submit("serving", "production"), "");
  EXPECT_EQ(submit("serving", "research"), "");
  EXPECT_NE(submit("serving", "inference-critical")
                .find("(it allows best-effort, research, "
                      "production;"),
            std::string::npos);
  EXPECT_EQ(submit("oncall", "inference-critical"), "");
  EXPECT_EQ(submit("oncall", "research"),
            "priority_class: queue ops/oncall does not allow priority class research (it allows "
            "best-effort, inference-critical)");
}

TEST_F(ServiceTest, DependenciesHoldJobsBackAndAFailedOneCancelsItsDependents) {
  // after_ok waits for success (a failure cancels the dependent, and its own
  // dependents, with the reason); after_any waits for the end, whatever it was.
  auto s = make(4);
  const auto sub = [&](const std::string& name, const std::string& deps) {
    return s->submit(as("lab"), job("name: " + name + "\n" + deps + "command: [x]\n"), "", nullptr)
        .row.id;
  };
  const int64_t a = sub("a", "");
  const int64_t b = sub("b", "after_ok: [" + std::to_string(a) + "]\n");
  const int64_t c = sub("c", "after_any: [" + std::to_string(a) + "]\n");
  const int64_t d = sub("d", "after_ok: [" + std::to_string(b) + "]\n");
  s->tick();
  EXPECT_EQ(state(*s, a), JobState::kRunning);
  for (int64_t id : {b, c, d}) {
    const JobView v = s->job(Caller{true, ""}, id);
    EXPECT_EQ(v.row.state, JobState::kPending) << id;
    EXPECT_EQ(v.reason_code, "Dependency") << id;
  }
  EXPECT_NE(
      s->job(Caller{true, ""}, b).pending_reason.find("job " + std::to_string(a) + " (running)"),
      std::string::npos);
  backend_->exit(a, 0, 1);
  s->tick();
  s->tick();
  EXPECT_EQ(state(*s, a), JobState::kFailed);
  const JobView vb = s->job(Caller{true, ""}, b);
  EXPECT_EQ(vb.row.state, JobState::kCancelled);
  EXPECT_EQ(vb.row.message,
            "dependency never satisfied: job " + std::to_string(a) + " ended failed (after_ok)");
  EXPECT_EQ(state(*s, d), JobState::kCancelled);  // the chain, in one pass
  EXPECT_EQ(state(*s, c), JobState::kRunning);
  // A dependency on a job that does not exist (or is another tenant's) is refused.
  try {
    sub("e", "after_ok: [999]\n");
    FAIL() << "a dependency on no job was accepted";
  } catch (const ServiceError& e) {
    EXPECT_EQ(e.field(), "after_ok[0]");
  }
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

// A job placed on GPUs its victims still hold (they run out their checkpoint grace) and then
// cancelled: the GPUs stay held until the victims are gone, so no third job lands on GPUs that
// a process still uses.
TEST_F(ServiceTest, ACancelledPreemptorKeepsItsGpusUntilItsVictimsAreGone) {
  auto s = make(8);
  backend_->ignore_term_of.insert("big");  // runs out its grace
  const int64_t big = submit_and_tick(*s, "team-a", "big", 8);
  ASSERT_EQ(state(*s, big), JobState::kRunning);
  const int64_t b = submit_and_tick(*s, "team-b", "b", 4);  // reclaims from big
  s->tick();
  ASSERT_EQ(state(*s, big), JobState::kPreempted);
  s->cancel(as("team-b"), b, false);
  now_ += 1;
  s->tick();
  s->tick();
  EXPECT_EQ(state(*s, b), JobState::kCancelled);
  EXPECT_EQ(free_gpus(*s), 4) << "big still runs on the GPUs b was given";
  const int64_t c = submit_and_tick(*s, "team-c", "c", 8);
  EXPECT_EQ(state(*s, c), JobState::kPending);
  // big's processes end: its GPUs and the cancelled b's go back, and an 8-GPU job (big again,
  // first in the queue, or c) takes them all.
  backend_->exit(static_cast<uint64_t>(big), 0, 143);
  now_ += 1;
  s->tick();
  s->tick();
  s->tick();
  EXPECT_TRUE(state(*s, big) == JobState::kRunning || state(*s, c) == JobState::kRunning);
  EXPECT_EQ(free_gpus(*s), 0);
}

}  // namespace
}  // namespace tessera
