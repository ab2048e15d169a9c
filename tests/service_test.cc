// The control plane on its own: the Service over an in-memory backend and a clock the test
// moves, so that gang failure, preemption grace, launch failure and recovery are checked
// step by step (tick() runs one poll + cycle) without real processes or sleeps.
#include "control/serve/service.h"

#include <gtest/gtest.h>

#include <sqlite3.h>
#include <nlohmann/json.hpp>

#include <csignal>
#include <fstream>
#include <map>
#include <mutex>
#include <set>

#include "service_fixture.h"
#include "service_test_util.h"
#include "store/job_request.h"

namespace tessera {
namespace {

TEST_F(ServiceTest, AGangFailsTogetherWhenOneMemberFails) {
  auto s = make(4);
  const int64_t id =
      s->submit(as("lab"), job("name: g\ngang: 3\ncommand: [train]\n"), "", nullptr).row.id;
  s->tick();
  ASSERT_EQ(state(*s, id), JobState::kRunning);
  ASSERT_EQ(backend_->launches.size(), 1u);
  EXPECT_EQ(backend_->launches[0].members.size(), 3u);
  EXPECT_EQ(free_gpus(*s), 1);
  backend_->exit(id, 1, 3);
  s->tick();  // rank 1 failed: the others are killed at once
  EXPECT_EQ(backend_->signals_of(id, 0), std::vector<int>{SIGKILL});
  EXPECT_EQ(backend_->signals_of(id, 2), std::vector<int>{SIGKILL});
  s->tick();
  const JobView v = s->job(Caller{true, ""}, id);
  EXPECT_EQ(v.row.state, JobState::kFailed);
  EXPECT_EQ(v.row.exit_code, 3);
  EXPECT_EQ(v.row.message, "rank 1 exited with code 3");
  EXPECT_EQ(free_gpus(*s), 4);
}

TEST_F(ServiceTest, AllMembersExitingZeroSucceeds) {
  auto s = make(2);
  const int64_t id =
      s->submit(as("lab"), job("name: g\ngang: 2\ncommand: [train]\n"), "", nullptr).row.id;
  s->tick();
  backend_->exit(id, 0, 0);
  s->tick();
  EXPECT_EQ(state(*s, id), JobState::kRunning);  // a gang ends when its last member does
  backend_->exit(id, 1, 0);
  s->tick();
  EXPECT_EQ(state(*s, id), JobState::kSucceeded);
  EXPECT_EQ(free_gpus(*s), 2);
}

TEST_F(ServiceTest, APreemptedGangGetsItsGraceThenSigkillAndThePreemptorStartsAfter) {
  auto s = make(2);
  backend_->ignore_term_of.insert("stubborn");
  const int64_t victim =
      s->submit(as("team-a"), job("name: stubborn\ngang: 2\ncheckpoint_grace: 20s\ncommand: [x]\n"),
                "", nullptr)
          .row.id;
  s->tick();
  ASSERT_EQ(state(*s, victim), JobState::kRunning);
  now_ += 10;
  const int64_t mine =
      s->submit(as("team-b"), job("name: mine\ncommand: [y]\n"), "", nullptr).row.id;
  s->tick();  // team-b is under its fair share: team-a's gang gives way, whole
  EXPECT_EQ(state(*s, victim), JobState::kPreempted);
  EXPECT_EQ(backend_->signals_of(victim, 0), std::vector<int>{SIGTERM});
  EXPECT_EQ(backend_->signals_of(victim, 1), std::vector<int>{SIGTERM});
  const JobView waiting = s->job(Caller{true, ""}, mine);
  EXPECT_EQ(waiting.row.state, JobState::kPending);
  EXPECT_NE(waiting.pending_reason.find("waiting for preempted job"), std::string::npos)
      << waiting.pending_reason;
  EXPECT_EQ(backend_->launches.size(), 1u);
  now_ += 19;  // within the job's 20 s grace: nothing more
  s->tick();
  EXPECT_EQ(backend_->signals_of(victim, 0).size(), 1u);
  EXPECT_EQ(backend_->launches.size(), 1u);
  now_ += 2;  // past it: SIGKILL, the victim is requeued, the preemptor starts
  s->tick();
  s->tick();
  EXPECT_EQ(backend_->signals_of(victim, 0), (std::vector<int>{SIGTERM, SIGKILL}));
  const JobView v = s->job(Caller{true, ""}, victim);
  EXPECT_EQ(v.row.state, JobState::kPending);
  EXPECT_EQ(v.row.preemptions, 1);
  EXPECT_EQ(state(*s, mine), JobState::kRunning);
  ASSERT_EQ(backend_->launches.size(), 2u);
  EXPECT_EQ(backend_->launches[1].name, "mine");
}

// A cycle's decisions are written before they are acted on: when the database refuses the write
// (here another process holds its write lock), the preemption and the start are undone whole:
// no signal sent, no process started, the GPUs still the victim's; the next cycle decides again.
TEST_F(ServiceTest, ACycleWhoseWriteIsRefusedActsOnNothingAndDecidesAgainLater) {
  auto s = make(2);
  const int64_t victim =
      s->submit(as("team-a"), job("name: victim\ngang: 2\ncommand: [x]\n"), "", nullptr).row.id;
  s->tick();
  ASSERT_EQ(state(*s, victim), JobState::kRunning);
  now_ += 10;
  const int64_t mine =
      s->submit(as("team-b"), job("name: mine\ncommand: [y]\n"), "", nullptr).row.id;
  sqlite3* other = nullptr;
  ASSERT_EQ(sqlite3_open(dir_.file("tessera.db").c_str(), &other), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(other, "BEGIN EXCLUSIVE", nullptr, nullptr, nullptr), SQLITE_OK);
  s->tick();  // decides to preempt the victim for mine; the write waits out its timeout and fails
  EXPECT_EQ(state(*s, victim), JobState::kRunning);
  EXPECT_TRUE(backend_->signals_of(victim, 0).empty());
  EXPECT_EQ(state(*s, mine), JobState::kPending);
  EXPECT_EQ(free_gpus(*s), 0);
  EXPECT_EQ(s->job(Caller{true, ""}, victim).row.preemptions, 0);
  ASSERT_EQ(sqlite3_exec(other, "ROLLBACK", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(other);
  s->tick();
  EXPECT_EQ(state(*s, victim), JobState::kPreempted);
  EXPECT_EQ(backend_->signals_of(victim, 0), std::vector<int>{SIGTERM});
  EXPECT_EQ(s->job(Caller{true, ""}, victim).row.preemptions, 1);
  s->tick();  // the victim has exited: mine starts, once
  EXPECT_EQ(state(*s, mine), JobState::kRunning);
  ASSERT_EQ(backend_->launches.size(), 2u);
  EXPECT_EQ(backend_->launches[1].name, "mine");
}

// The read model the API's read routes use: everything for the admin, a tenant's own for one
// tenant (another's job is refused as not its own), and no reader of several tenants.
TEST_F(ServiceTest, TheReadModelShowsATenantItsOwnAndTheAdminEverything) {
  auto s = make(4);
  const int64_t a = submit_and_tick(*s, "team-a", "a", 1);
  const int64_t b = submit_and_tick(*s, "team-b", "b", 1);
  const ReadModel& m = *s;
  const Reader admin{true, {}}, team_a{false, {"team-a"}};
  EXPECT_EQ(m.jobs(admin, JobFilter{}).size(), 2u);
  const std::vector<JobView> own = m.jobs(team_a, JobFilter{});
  ASSERT_EQ(own.size(), 1u);
  EXPECT_EQ(own[0].row.id, a);
  EXPECT_EQ(m.job(team_a, a).row.id, a);
  try {
    m.job(team_a, b);
    ADD_FAILURE() << "team-a read team-b's job";
  } catch (const ServiceError& e) {
    EXPECT_EQ(e.kind(), ServiceError::kForbidden);
  }
  ASSERT_EQ(m.queues(team_a).size(), 1u);
  EXPECT_GT(m.queues(admin).size(), 1u);
  EXPECT_THROW(m.jobs(Reader{false, {"team-a", "team-b"}}, JobFilter{}), ServiceError);
  EXPECT_EQ(Service::reader_of(Caller{false, "team-a"}).owners, team_a.owners);
  EXPECT_TRUE(Service::reader_of(Caller{true, ""}).everything);
}

TEST_F(ServiceTest, APreemptedJobRunsBeforeALaterEqualJobOfItsTenant) {
  // As first reported: 8 GPUs; team-a submits big1 then big2 (6 GPUs each),
  // team-b submits b (4). b reclaims from big1; after b finishes, big1 runs, not big2.
  auto s = make(8);
  const auto submit = [&](const char* tenant, const char* name, int gpus) {
    return submit_and_tick(*s, tenant, name, gpus);
  };
  const int64_t big1 = submit("team-a", "big1", 6);
  const int64_t big2 = submit("team-a", "big2", 6);
  const int64_t b = submit("team-b", "b", 4);
  ASSERT_EQ(state(*s, big1), JobState::kPreempted);
  now_ += 10;
  s->tick();
  s->tick();
  ASSERT_EQ(state(*s, b), JobState::kRunning);
  backend_->exit(b, 0, 0);
  now_ += 1;
  s->tick();
  s->tick();
  EXPECT_EQ(state(*s, big1), JobState::kRunning);
  EXPECT_EQ(state(*s, big2), JobState::kPending);
  EXPECT_EQ(s->job(Caller{true, ""}, big2).pending_reason.find("reservation"), std::string::npos)
      << s->job(Caller{true, ""}, big2).pending_reason;
}

TEST_F(ServiceTest, UsageAccountsEveryRunAndWhoPreemptedWhom) {
  // The scenario above: big1 (team-a, 6 GPUs) runs, b (team-b, 4) reclaims from it, big1 runs
  // again after b. Accounting sees big1's two runs, b's run, one preemption each way.
  auto s = make(8);
  const double t0 = now_;
  Reclaimed r;
  ASSERT_NO_FATAL_FAILURE(reclaim_then_return(*s, r));
  const int64_t b = r.b;
  now_ += 50;
  const JobView bv = s->job(Caller{true, ""}, b);
  const std::vector<UsageRow> all = s->usage(Caller{true, ""}, t0, now_ + 1);
  ASSERT_EQ(all.size(), 2u);
  const UsageRow& a = all[0];
  const UsageRow& bt = all[1];
  EXPECT_EQ(a.tenant, "team-a");
  EXPECT_EQ(a.queue, "team-a");
  EXPECT_EQ(a.preempted, 1);
  EXPECT_EQ(a.preemptor, 0);
  EXPECT_EQ(bt.preemptor, 1);
  EXPECT_EQ(bt.jobs.at("succeeded"), 1);
  EXPECT_NEAR(bt.gpu_hours.at("virtual"), 4 * (bv.row.finished_at - bv.row.started_at) / 3600,
              1e-9);
  // big1: its first run (until its processes were gone) and the one going on now.
  EXPECT_GT(a.gpu_hours.at("virtual"), 6 * 50 / 3600.0);
  EXPECT_EQ(a.started, 1);  // big1; big2 still waits
  // A tenant sees its own row only; a window before anything ran has none.
  const std::vector<UsageRow> mine = s->usage(Caller{false, "team-b"}, t0, now_ + 1);
  ASSERT_EQ(mine.size(), 1u);
  EXPECT_EQ(mine[0].tenant, "team-b");
  EXPECT_TRUE(s->usage(Caller{true, ""}, t0 - 100, t0 - 50).empty());
  EXPECT_THROW(s->usage(Caller{true, ""}, now_, t0), ServiceError);
  // The runs that ended are in the database: a restarted server reports the same.
  const UsageRow before = bt;
  s.reset();
  auto again = make(8);
  const std::vector<UsageRow> after = again->usage(Caller{true, ""}, t0, now_ + 1);
  ASSERT_EQ(after.size(), 2u);
  EXPECT_EQ(after[1].preemptor, before.preemptor);
  EXPECT_DOUBLE_EQ(after[1].gpu_hours.at("virtual"), before.gpu_hours.at("virtual"));
}

// The history `tessera job ID` shows: every transition once, in order, with who and where.
TEST_F(ServiceTest, AJobsHistoryTellsItsLifeFromSubmissionToItsEnd) {
  auto s = make(8);
  const Caller admin{true, ""};
  const auto types = [&](int64_t id) {
    std::vector<std::string> out;
    for (const JobEvent& e : s->job_events(admin, id)) out.push_back(e.type);
    return out;
  };
  const auto message = [&](int64_t id, const std::string& type) {
    for (const JobEvent& e : s->job_events(admin, id)) {
      if (e.type == type) return e.message;
    }
    return std::string("(no " + type + ")");
  };
  Reclaimed r;
  ASSERT_NO_FATAL_FAILURE(reclaim_then_return(*s, r));
  const int64_t big1 = r.big1, big2 = r.big2, b = r.b;
  s->hold(RequestContext{admin, "POST", "/"}, big2);
  s->release(RequestContext{as("team-a").caller, "POST", "/"}, big2);
  s->cancel(RequestContext{admin, "POST", "/"}, big2);
  s->tick();

  // b was placed at once (waiting only for big1 to exit), so it never had a reason to wait.
  EXPECT_EQ(types(b), (std::vector<std::string>{"Submitted", "Started", "Succeeded"}));
  EXPECT_EQ(message(b, "Succeeded"), "exit code 0");
  EXPECT_NE(message(b, "Started").find("attempt 1 on "), std::string::npos);
  EXPECT_NE(message(b, "Started").find(" GPU "), std::string::npos);
  EXPECT_EQ(message(b, "Submitted"), "by team-b to queue team-b");
  EXPECT_EQ(types(big1), (std::vector<std::string>{"Submitted", "Started", "Preempted", "Requeued",
                                                   "Pending", "Started"}));
  // team-a reads it: team-b is not named.
  EXPECT_EQ(message(big1, "Preempted"),
            "preempted by job " + std::to_string(b) + " of another tenant");
  const std::vector<JobEvent> h1 = s->job_events(admin, big1);
  EXPECT_NE(h1.back().message.find("attempt 2"), std::string::npos);
  for (size_t i = 1; i < h1.size(); ++i) EXPECT_LE(h1[i - 1].at, h1[i].at);
  // big2 waited (its reason recorded once per change), was held, released and cancelled.
  const std::vector<std::string> t2 = types(big2);
  ASSERT_GE(t2.size(), 5u);
  EXPECT_EQ(t2.front(), "Submitted");
  EXPECT_EQ(t2[1], "Pending");
  EXPECT_EQ(std::vector<std::string>(t2.end() - 3, t2.end()),
            (std::vector<std::string>{"Held", "Released", "Cancelled"}));
  EXPECT_EQ(message(big2, "Held"), "held by admin");
  EXPECT_EQ(message(big2, "Released"), "by team-a");
  EXPECT_EQ(message(big2, "Cancelled"), "cancelled by admin");
  for (size_t i = 1; i < t2.size(); ++i) {
    if (t2[i] == "Pending") {
      EXPECT_NE(s->job_events(admin, big2)[i].message, "");
    }
  }
  // Another tenant's job's history is not shown; it is kept across a restart.
  EXPECT_THROW(s->job_events(as("team-b").caller, big1), ServiceError);
  const std::vector<std::string> before = types(big1);
  s.reset();
  s = make(8);
  const std::vector<std::string> after = types(big1);
  ASSERT_GE(after.size(), before.size());
  EXPECT_EQ(std::vector<std::string>(after.begin(), after.begin() + before.size()), before);
}

TEST_F(ServiceTest, ADeletedTenantLeavesTheListLosesItsTokenAndKeepsItsUsage) {
  auto s = make(4);
  const RequestContext admin{Caller{true, ""}, "DELETE", "/v1/tenants/team-a"};
  const std::string token = s->create_tenant(admin, "team-a");
  ASSERT_TRUE(s->authenticate(token));
  const double t0 = now_;
  const int64_t id = submit_and_tick(*s, "team-a", "work", 2);
  ASSERT_EQ(state(*s, id), JobState::kRunning);
  EXPECT_THROW(s->delete_tenant(as("team-a"), "team-a"), ServiceError);  // admin only
  try {
    s->delete_tenant(admin, "team-a");
    ADD_FAILURE() << "a tenant with a running job was deleted";
  } catch (const ServiceError& e) {
    EXPECT_EQ(e.kind(), ServiceError::kConflict);
    EXPECT_NE(std::string(e.what()).find("1 jobs waiting or running"), std::string::npos)
        << e.what();
  }
  now_ += 60;
  backend_->exit(id, 0, 0);
  s->tick();
  s->delete_tenant(admin, "team-a");
  EXPECT_FALSE(s->authenticate(token));
  for (const TenantView& v : s->tenants()) EXPECT_NE(v.name, "team-a");
  EXPECT_THROW(s->delete_tenant(admin, "team-a"), ServiceError);  // already gone
  EXPECT_THROW(s->submit(RequestContext{Caller{true, ""}, "POST", "/v1/jobs"},
                         job("name: x\ntenant: team-a\ncommand: [x]\n"), "", nullptr),
               ServiceError);
  // Its finished job and usage stay, and the deletion holds across a restart.
  EXPECT_EQ(state(*s, id), JobState::kSucceeded);
  const std::vector<UsageRow> usage = s->usage(Caller{true, ""}, t0, now_ + 1);
  ASSERT_EQ(usage.size(), 1u);
  EXPECT_EQ(usage[0].tenant, "team-a");
  s.reset();
  s = make(4);
  for (const TenantView& v : s->tenants()) EXPECT_NE(v.name, "team-a");
  EXPECT_FALSE(s->authenticate(token));
  // Created again, it is a tenant like any other.
  const std::string again = s->create_tenant(admin, "team-a");
  EXPECT_TRUE(s->authenticate(again));
  bool listed = false;
  for (const TenantView& v : s->tenants()) listed = listed || v.name == "team-a";
  EXPECT_TRUE(listed);
}

// Retention and archiving: finished jobs past the retention leave memory and are
// read from the database; archived ones leave the live tables for a file; usage keeps them.
TEST_F(ServiceTest, FinishedJobsLeaveMemoryAfterTheRetentionAndTheApiStillReadsThem) {
  ServiceOptions o = options(4);
  o.retain_finished_seconds = 3600;
  const auto make_retaining = [&] {
    auto b = std::make_unique<FakeBackend>();
    backend_ = b.get();
    return std::make_unique<Service>(o, std::move(b));
  };
  auto s = make_retaining();
  const Caller admin{true, ""};
  const double t0 = now_;
  const auto spec = [](const std::string& name) {
    return job("name: " + name + "\nresources: {gpus: 1}\ncommand: [x]\n");
  };
  const int64_t a = s->submit(as("team-a"), spec("a"), "", nullptr).row.id;
  bool created = true;
  const int64_t b = s->submit(as("team-a"), spec("b"), "key-b", &created).row.id;
  now_ += 1;
  s->tick();
  // c waits for a (held, so it stays waiting): a is pinned in memory while c depends on it.
  JobRequest c_spec = spec("c");
  c_spec.after_ok = {a};
  const int64_t c = s->submit(as("team-a"), c_spec, "", nullptr).row.id;
  s->hold(RequestContext{admin, "POST", "/"}, c);
  now_ += 60;
  backend_->exit(a, 0, 0);
  backend_->exit(b, 0, 0);
  s->tick();
  ASSERT_EQ(state(*s, b), JobState::kSucceeded);
  const uint64_t before = s->metrics().jobs_in_memory;
  now_ += 2 * 3600;
  s->tick();
  EXPECT_EQ(s->metrics().jobs_evicted, 1u);  // b; a is pinned by c
  EXPECT_EQ(s->metrics().jobs_in_memory, before - 1);
  // Read from the database: the job, its history, listings (merged by id, paged), the key.
  const JobView bv = s->job(admin, b);
  EXPECT_EQ(bv.row.state, JobState::kSucceeded);
  EXPECT_EQ(bv.queue, "team-a");
  EXPECT_FALSE(s->job_events(admin, b).empty());
  JobFilter page;
  page.newest_first = true;
  page.limit = 2;
  std::vector<JobView> first = s->jobs(admin, page);
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[0].row.id, c);
  EXPECT_EQ(first[1].row.id, b);
  page.before = b;
  std::vector<JobView> second = s->jobs(admin, page);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].row.id, a);
  JobFilter done;
  done.states = {JobState::kSucceeded};
  EXPECT_EQ(s->jobs(admin, done).size(), 2u);
  EXPECT_EQ(s->jobs(as("team-b").caller, done).size(), 0u);
  EXPECT_THROW(s->job(as("team-b").caller, b), ServiceError);
  EXPECT_THROW(s->cancel(RequestContext{admin, "POST", "/"}, b), ServiceError);
  EXPECT_EQ(s->submit(as("team-a"), spec("b"), "key-b", &created).row.id, b);
  EXPECT_FALSE(created);
  // A new job may depend on it: it succeeded, so after_ok is met at once.
  JobRequest d_spec = spec("d");
  d_spec.after_ok = {b};
  const int64_t d = s->submit(as("team-a"), d_spec, "", nullptr).row.id;
  now_ += 1;
  s->tick();
  EXPECT_EQ(state(*s, d), JobState::kRunning);
  backend_->exit(d, 0, 0);
  s->tick();
  // A restart loads only what was in memory (d took b's place).
  s.reset();
  s = make_retaining();
  EXPECT_EQ(s->metrics().jobs_in_memory, before);
  EXPECT_EQ(s->job(admin, b).row.state, JobState::kSucceeded);
  // A server started without retention does not load b again, and still lists it.
  o.retain_finished_seconds = -1;
  s.reset();
  s = make_retaining();
  EXPECT_EQ(s->jobs(admin, done).size(), 3u);  // a, b and d
  o.retain_finished_seconds = 3600;
  s.reset();
  s = make_retaining();
  // Archiving: the admin only, not inside the retention; b leaves the tables for a file.
  EXPECT_THROW(s->archive(RequestContext{as("team-a").caller, "POST", "/"}, 3600), ServiceError);
  EXPECT_THROW(s->archive(RequestContext{admin, "POST", "/"}, 60), ServiceError);
  const ArchiveResult r = s->archive(RequestContext{admin, "POST", "/v1/archive"}, 3600);
  EXPECT_EQ(r.jobs, 1u);
  ASSERT_EQ(r.files.size(), 1u);
  std::ifstream in(r.files[0]);
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  const nlohmann::json archived = nlohmann::json::parse(line);
  EXPECT_EQ(archived["id"], b);
  EXPECT_EQ(archived["state"], "succeeded");
  EXPECT_FALSE(archived["events"].empty());
  EXPECT_FALSE(std::getline(in, line));
  EXPECT_THROW(s->job(admin, b), ServiceError);
  // Accounting keeps its run.
  const std::vector<UsageRow> usage = s->usage(admin, t0, now_ + 1);
  ASSERT_EQ(usage.size(), 1u);
  EXPECT_EQ(usage[0].jobs.at("succeeded"), 3);  // a, b (archived) and d
}

TEST_F(ServiceTest, ADrainedNodeTakesNoNewWorkLetsItsJobsFinishAndStaysDrained) {
  auto s = make(4);
  const std::string node = s->nodes().at(0).name;
  const RequestContext admin{Caller{true, ""}, "POST", "/v1/nodes/" + node + "/drain"};
  const int64_t running =
      s->submit(as("team-a"), job("name: r\nresources: {gpus: 2}\ncommand: [x]\n"), "", nullptr)
          .row.id;
  s->tick();
  ASSERT_EQ(state(*s, running), JobState::kRunning);
  EXPECT_THROW(s->drain_node(as("team-a"), node, true), ServiceError);  // admin only
  EXPECT_THROW(s->drain_node(admin, "no-such-node", true), ServiceError);
  s->drain_node(admin, node, true);
  const int64_t waiting =
      s->submit(as("team-a"), job("name: w\nresources: {gpus: 1}\ncommand: [x]\n"), "", nullptr)
          .row.id;
  s->tick();
  EXPECT_EQ(state(*s, running), JobState::kRunning);  // what runs there goes on
  EXPECT_EQ(state(*s, waiting), JobState::kPending);  // 2 GPUs free, but drained
  EXPECT_EQ(s->nodes().at(0).state, "draining");
  backend_->exit(running, 0, 0);
  now_ += 1;
  s->tick();
  s->tick();
  EXPECT_EQ(state(*s, running), JobState::kSucceeded);
  EXPECT_EQ(state(*s, waiting), JobState::kPending);  // the freed GPUs are not handed out
  EXPECT_EQ(s->nodes().at(0).state, "drained");
  EXPECT_EQ(free_gpus(*s), 0);
  // A restart keeps the node drained; resuming lets the waiting job start.
  s.reset();
  s = make(4);
  s->tick();
  EXPECT_EQ(state(*s, waiting), JobState::kPending);
  EXPECT_EQ(s->nodes().at(0).state, "drained");
  s->drain_node(admin, node, false);
  s->tick();
  EXPECT_EQ(state(*s, waiting), JobState::kRunning);
  EXPECT_EQ(s->nodes().at(0).state, "up");
  bool audited = false;
  for (const AuditEntry& e : s->audit_log(10)) audited |= e.target == "node " + node;
  EXPECT_TRUE(audited);
}

TEST_F(ServiceTest, TheTenantListHasTenantsTheAdminSubmittedForWithoutAToken) {
  // A tenant made by an admin's submission was missing from the list.
  auto s = make(2);
  const RequestContext admin{Caller{true, ""}, "POST", "/v1/tenants"};
  s->create_tenant(admin, "team-a");
  s->submit(RequestContext{Caller{true, ""}, "POST", "/v1/jobs"},
            job("name: j\ntenant: ghost\ncommand: [x]\n"), "", nullptr);
  s->tick();
  const std::vector<TenantView> all = s->tenants();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].name, "ghost");
  EXPECT_FALSE(all[0].has_token);
  EXPECT_EQ(all[0].running_jobs, 1);
  EXPECT_EQ(all[1].name, "team-a");
  EXPECT_TRUE(all[1].has_token);
  EXPECT_EQ(all[1].created_at, now_);
  EXPECT_EQ(all[1].running_jobs + all[1].pending_jobs, 0);
}

// A cycle gives a reason only to jobs without one; every reason_refresh_seconds it
// gives every waiting job its reason anew. A job's reason that another's arrival changed is
// kept until then, and is then what a server that refreshes every cycle says.
TEST_F(ServiceTest, AWaitingJobKeepsItsReasonUntilTheNextRefresh) {
  struct Seen {
    std::string first, kept, refreshed;
  };
  auto run = [&](double refresh) {
    ServiceOptions o = options(3);
    o.reason_refresh_seconds = refresh;
    o.db_path = dir_.file("reasons-" + std::to_string(refresh) + ".db");
    auto b = std::make_unique<FakeBackend>();
    backend_ = b.get();
    Service s(o, std::move(b));
    now_ = 1000;
    auto why = [&](int64_t id) { return s.job(Caller{true, ""}, id).pending_reason; };
    submit_and_tick(s, "lab", "a", 1);
    const int64_t ends = submit_and_tick(s, "lab", "a2", 1);
    const int64_t waiting = submit_and_tick(s, "lab", "b", 3);
    Seen seen;
    seen.first = why(waiting);  // new to the queue: its reason at once
    // A job ends: one GPU more is free, but the waiting job still cannot start.
    backend_->exit(ends, 0, 0);
    now_ += 1;
    s.tick();
    EXPECT_EQ(state(s, waiting), JobState::kPending);
    EXPECT_EQ(state(s, ends), JobState::kSucceeded);
    seen.kept = why(waiting);
    now_ += 30;
    s.tick();
    seen.refreshed = why(waiting);
    return seen;
  };
  const Seen truth = run(0);  // every cycle a refresh
  ASSERT_FALSE(truth.first.empty());
  ASSERT_NE(truth.first, truth.kept) << "the free GPUs in the waiting job's reason change";
  const Seen kept = run(30);
  EXPECT_EQ(kept.first, truth.first);
  EXPECT_EQ(kept.kept, kept.first);  // kept while nothing refreshes it
  EXPECT_EQ(kept.refreshed, truth.refreshed);
}

TEST_F(ServiceTest, CancellingAPlacedJobBeforeItLaunchesFreesItsGpus) {
  auto s = make(2);
  backend_->ignore_term_of.insert("stubborn");
  const int64_t victim =
      s->submit(as("team-a"), job("name: stubborn\ngang: 2\ncommand: [x]\n"), "", nullptr).row.id;
  s->tick();
  const int64_t mine =
      s->submit(as("team-b"), job("name: mine\ncommand: [y]\n"), "", nullptr).row.id;
  s->tick();
  ASSERT_EQ(state(*s, victim), JobState::kPreempted);
  const JobView c =
      s->cancel(RequestContext{Caller{false, "team-b"}, "POST", "/v1/jobs/2/cancel"}, mine);
  EXPECT_EQ(c.row.state, JobState::kCancelled);
  EXPECT_GE(c.row.finished_at, 0);
  now_ += 31;
  s->tick();
  s->tick();
  // The victim ran out its grace and went back to the queue; with the cancelled job's GPU
  // released it starts again on the whole cluster.
  EXPECT_EQ(state(*s, mine), JobState::kCancelled);
  EXPECT_EQ(state(*s, victim), JobState::kRunning);
  EXPECT_EQ(free_gpus(*s), 0);
  EXPECT_EQ(backend_->launches.size(), 2u);
  EXPECT_EQ(backend_->launches[1].attempt, 2u);
}

TEST_F(ServiceTest, AJobThatCannotBeLaunchedFailsAndReturnsItsGpus) {
  auto s = make(2);
  backend_->fail_next_launch = true;
  const int64_t id = s->submit(as("lab"), job("name: x\ncommand: [nope]\n"), "", nullptr).row.id;
  s->tick();
  const JobView v = s->job(Caller{true, ""}, id);
  EXPECT_EQ(v.row.state, JobState::kFailed);
  EXPECT_NE(v.row.message.find("could not start"), std::string::npos) << v.row.message;
  s->tick();
  EXPECT_EQ(free_gpus(*s), 2);
}

TEST_F(ServiceTest, ARestartRequeuesAJobWhoseMembersAreGoneAndAdoptsOnesThatRun) {
  int64_t gone = 0, alive = 0;
  std::map<int64_t, FakeBackend::Proc> survivors;
  {
    auto s = make(2);
    gone = s->submit(as("lab"), job("name: gone\ncommand: [x]\n"), "", nullptr).row.id;
    alive = s->submit(as("lab"), job("name: alive\ncommand: [y]\n"), "", nullptr).row.id;
    s->tick();
    ASSERT_EQ(state(*s, gone), JobState::kRunning);
    ASSERT_EQ(state(*s, alive), JobState::kRunning);
    for (const auto& [pid, p] : backend_->procs) {
      if (p.job == static_cast<uint64_t>(alive)) survivors[pid] = p;
    }
  }  // the server goes away; only `alive`'s process survives it
  auto b = std::make_unique<FakeBackend>();
  b->procs = survivors;
  backend_ = b.get();
  Service s(options(2), std::move(b));
  EXPECT_EQ(state(s, alive), JobState::kRunning);
  const JobView g = s.job(Caller{true, ""}, gone);
  EXPECT_EQ(g.row.state, JobState::kPending);
  EXPECT_NE(g.row.message.find("requeued"), std::string::npos);
  s.tick();
  EXPECT_EQ(state(s, gone), JobState::kRunning);
  ASSERT_EQ(backend_->launches.size(), 1u);
  EXPECT_EQ(backend_->launches[0].attempt, 2u);
  backend_->exit(alive, 0, 0);
  s.tick();
  EXPECT_EQ(state(s, alive), JobState::kSucceeded);
}

// An 8,000-character key was accepted, and the same key with another
// spec silently returned the first job.
TEST_F(ServiceTest, AnIdempotencyKeyIsBoundedAndNotReusedForAnotherSpec) {
  auto s = make(1);
  bool created = false;
  const int64_t id = s->submit(as("lab"), job("name: x\ncommand: [x]\n"), "k1", &created).row.id;
  EXPECT_TRUE(created);
  // A retry: the same job, not created again.
  EXPECT_EQ(s->submit(as("lab"), job("name: x\ncommand: [x]\n"), "k1", &created).row.id, id);
  EXPECT_FALSE(created);
  auto refused = [&](const std::string& spec, const std::string& key, ServiceError::Kind kind,
                     const std::string& words) {
    try {
      s->submit(as("lab"), job(spec), key, &created);
      ADD_FAILURE() << "accepted key " << key.substr(0, 20);
    } catch (const ServiceError& e) {
      EXPECT_EQ(e.kind(), kind) << e.what();
      EXPECT_EQ(e.field(), "Idempotency-Key");
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  refused("name: y\ncommand: [y]\n", "k1", ServiceError::kConflict,
          "already used for job " + std::to_string(id) + " with a different spec");
  refused("name: x\ncommand: [x]\n", std::string(8000, 'k'), ServiceError::kInvalid, "1-255");
  refused("name: x\ncommand: [x]\n", "has space", ServiceError::kInvalid, "printable");
  EXPECT_EQ(s->jobs(Caller{false, "lab"}, JobFilter{}).size(), 1u);  // nothing more created
  // Another tenant's key space is its own.
  EXPECT_NE(s->submit(as("other"), job("name: y\ncommand: [y]\n"), "k1", &created).row.id, id);
  EXPECT_TRUE(created);
}

// Tenants named like the audit log's own actors were accepted.
TEST_F(ServiceTest, TheAuditLogsActorNamesAreNotTenantNames) {
  auto s = make(1);
  const RequestContext admin{Caller{true, ""}, "POST", "/v1/tenants"};
  for (const std::string name : {"admin", "anonymous"}) {
    try {
      s->create_tenant(admin, name);
      ADD_FAILURE() << "created tenant " << name;
    } catch (const ServiceError& e) {
      EXPECT_EQ(e.kind(), ServiceError::kInvalid);
      EXPECT_NE(std::string(e.what()).find("reserved"), std::string::npos) << e.what();
    }
    JobRequest r = job("name: x\ncommand: [x]\n");
    r.tenant = name;  // nor by the admin submitting on its behalf
    EXPECT_THROW(s->submit(admin, r, "", nullptr), ServiceError) << name;
  }
  EXPECT_FALSE(s->create_tenant(admin, "administrators").empty());  // only the exact names
}

// `checkpoint_grace: 1e9` let a stopping job keep its GPUs for ever.
TEST_F(ServiceTest, AGraceAboveTheServersLimitIsRefused) {
  auto s = make(1);  // the default limit: 3600 s
  for (const char* grace : {"1e9", "10000d", "3601"}) {
    try {
      s->submit(as("lab"),
                job(std::string("name: x\ncheckpoint_grace: ") + grace + "\ncommand: [x]\n"), "",
                nullptr);
      ADD_FAILURE() << "accepted a grace of " << grace;
    } catch (const ServiceError& e) {
      EXPECT_EQ(e.kind(), ServiceError::kInvalid) << grace;
      EXPECT_EQ(e.field(), "checkpoint_grace");
      EXPECT_NE(std::string(e.what()).find("--max-checkpoint-grace"), std::string::npos);
    }
  }
  EXPECT_GT(s->submit(as("lab"), job("name: x\ncheckpoint_grace: 1h\ncommand: [x]\n"), "", nullptr)
                .row.id,
            0);
}

TEST_F(ServiceTest, ATenantCannotActOnAnotherTenantsJob) {
  auto s = make(1);
  const int64_t id = s->submit(as("team-a"), job("name: x\ncommand: [x]\n"), "", nullptr).row.id;
  try {
    s->cancel(RequestContext{Caller{false, "team-b"}, "POST", "/"}, id);
    FAIL();
  } catch (const ServiceError& e) {
    EXPECT_EQ(e.kind(), ServiceError::kForbidden);
  }
  EXPECT_TRUE(s->jobs(Caller{false, "team-b"}, JobFilter{}).empty());
  EXPECT_EQ(s->jobs(Caller{false, "team-a"}, JobFilter{}).size(), 1u);
  EXPECT_EQ(state(*s, id), JobState::kPending);
  // Asking for another tenant's jobs by name is refused, not answered with an empty list; one's
  // own name and the admin are fine.
  JobFilter theirs;
  theirs.tenant = "team-a";
  try {
    s->jobs(Caller{false, "team-b"}, theirs);
    ADD_FAILURE() << "team-b listed team-a's jobs";
  } catch (const ServiceError& e) {
    EXPECT_EQ(e.kind(), ServiceError::kForbidden);
    EXPECT_EQ(e.field(), "tenant");
  }
  EXPECT_EQ(s->jobs(Caller{false, "team-a"}, theirs).size(), 1u);
  EXPECT_EQ(s->jobs(Caller{true, ""}, theirs).size(), 1u);
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

TEST_F(ServiceTest, AQueueTreeHoldsQuotasAndRefusesTenantsItDoesNotName) {
  auto s = make_with_queues(4, R"(queues:
  - name: team-a
    guarantee: {gpus: 1}
    borrow_limit: {gpus: 0}
  - name: team-b
)");
  const int64_t first =
      s->submit(as("team-a"), job("name: a1\ncommand: [x]\n"), "", nullptr).row.id;
  const int64_t second =
      s->submit(as("team-a"), job("name: a2\ncommand: [x]\n"), "", nullptr).row.id;
  s->tick();
  EXPECT_EQ(state(*s, first), JobState::kRunning);
  const JobView held = s->job(Caller{true, ""}, second);
  EXPECT_EQ(held.row.state, JobState::kPending);
  EXPECT_NE(held.pending_reason.find("quota"), std::string::npos) << held.pending_reason;
  EXPECT_EQ(free_gpus(*s), 3);  // free GPUs, but team-a may hold only 1
  try {
    s->submit(RequestContext{Caller{true, ""}, "POST", "/v1/jobs"},
              job("name: c\ntenant: team-c\ncommand: [x]\n"), "", nullptr);
    FAIL() << "a tenant outside the queue tree was accepted";
  } catch (const ServiceError& e) {
    EXPECT_EQ(e.kind(), ServiceError::kInvalid);
    EXPECT_EQ(e.field(), "tenant");
  }
  const std::vector<QueueView> qs = s->queues(Caller{true, ""});
  ASSERT_EQ(qs.size(), 3u);
  EXPECT_EQ(qs[1].path, "team-a");
  EXPECT_EQ(qs[1].limit_gpus, 1);
  EXPECT_EQ(qs[1].holds_gpus, 1);
  EXPECT_EQ(qs[1].running_jobs, 1);
  EXPECT_EQ(qs[1].pending_jobs, 1);
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

// fairness.half_life in the queue tree reaches the service's cycles: a tenant that used the
// whole cluster for hours yields to one that used nothing, and the memory survives a restart.
class LongTermFairness : public ServiceTest, public ::testing::WithParamInterface<bool> {};

TEST_P(LongTermFairness, ATenantThatUsedTheClusterYieldsToOneThatDidNot) {
  const bool long_term = GetParam();
  const std::string queues = dir_.file("queues.yaml");
  std::ofstream(queues) << (long_term ? "fairness: {half_life: 1h, long_term_weight: 1}\n" : "")
                        << "queues:\n  - name: team-a\n  - name: team-b\n";
  ServiceOptions o = options(4);
  o.queues_path = queues;
  auto b = std::make_unique<FakeBackend>();
  backend_ = b.get();
  auto s = std::make_unique<Service>(o, std::move(b));
  std::vector<int64_t> early;
  for (int i = 0; i < 4; ++i) {
    early.push_back(
        s->submit(as("team-a"), job("name: early\ncommand: [x]\n"), "", nullptr).row.id);
  }
  s->tick();
  now_ += 1;
  s->tick();
  now_ += 10 * 3600;  // team-a holds every GPU for ten hours
  for (int64_t id : early) backend_->exit(id, 0, 0);
  s->tick();
  s->tick();
  const double used = s->queues(Caller{true, ""})[1].decayed_gpus;
  if (long_term) {
    EXPECT_NEAR(used, 4.0, 0.01);
    // Restarted, the service remembers.
    s.reset();
    auto b2 = std::make_unique<FakeBackend>();
    backend_ = b2.get();
    s = std::make_unique<Service>(o, std::move(b2));
    EXPECT_NEAR(s->queues(Caller{true, ""})[1].decayed_gpus, used, 1e-9);
  } else {
    EXPECT_EQ(used, 0);
  }
  // Both tenants now want every GPU; team-a asks first.
  std::vector<int64_t> a, bb;
  for (int i = 0; i < 4; ++i) {
    a.push_back(s->submit(as("team-a"), job("name: a\ncommand: [x]\n"), "", nullptr).row.id);
  }
  for (int i = 0; i < 4; ++i) {
    bb.push_back(s->submit(as("team-b"), job("name: b\ncommand: [x]\n"), "", nullptr).row.id);
  }
  s->tick();
  int a_running = 0, b_running = 0;
  for (int64_t id : a) a_running += state(*s, id) == JobState::kRunning;
  for (int64_t id : bb) b_running += state(*s, id) == JobState::kRunning;
  // Equal weights split the GPUs 2:2. With long-term fairness team-b is entitled to about
  // 3.8 GPUs (team-a's recent use halves its weight, team-b's idle past multiplies its own by
  // ten): after team-a's first job (both queues at zero, arrival order breaks the tie) every
  // GPU goes to team-b.
  if (long_term) {
    EXPECT_EQ(a_running, 1);
    EXPECT_EQ(b_running, 3);
  } else {
    EXPECT_EQ(a_running, 2);
    EXPECT_EQ(b_running, 2);
  }
}

INSTANTIATE_TEST_SUITE_P(OnAndOff, LongTermFairness, ::testing::Bool());

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

// Every option is checked before the server makes anything on disk: refused flags leave no
// database, lock file or job folder behind (a typo must not leave a stray database to be
// mistaken for a real one on the next start).
TEST(ServiceOptionsTest, RefusedOptionsLeaveNothingOnDisk) {
  const std::vector<std::pair<std::string, std::function<void(ServiceOptions&)>>> bad = {
      {"policy", [](ServiceOptions& o) { o.policy = "bogus"; }},
      {"archive before retention",
       [](ServiceOptions& o) {
         o.retain_finished_seconds = 100;
         o.archive_after_seconds = 10;
       }},
      {"missing queue tree", [](ServiceOptions& o) { o.queues_path = "/nonexistent/q.yaml"; }},
      {"power cap", [](ServiceOptions& o) { o.power_cap = "5zz"; }},
      {"thermal limit on virtual GPUs", [](ServiceOptions& o) { o.thermal_limit_c = 80; }},
      {"power limits on virtual GPUs", [](ServiceOptions& o) { o.apply_power_limits = true; }},
      {"classifier", [](ServiceOptions& o) { o.classifier = "nope"; }},
      {"goodput round", [](ServiceOptions& o) {
         o.policy = "goodput";
         o.goodput_round_seconds = 0;
       }}};
  for (const auto& [what, spoil] : bad) {
    TempDir dir("refused");
    ServiceOptions o;
    o.db_path = dir.file("t.db");
    o.work_dir = dir.file("t.db.jobs");
    o.virtual_gpus = 4;
    spoil(o);
    EXPECT_ANY_THROW(Service s(o)) << what;
    EXPECT_TRUE(std::filesystem::is_empty(dir.str())) << what << ": something was made on disk";
  }
}

}  // namespace
}  // namespace tessera
