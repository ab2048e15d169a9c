// Reservations in `tessera serve`: the admin sets GPUs aside for a tenant or one of its users
// over a window; inside it only their jobs use them, and another tenant's job that needs them
// says so; before it, only jobs whose time limit ends by its start; GPUs that someone else's job
// may hold past the start are not reserved unless asked; reservations survive a restart.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <set>
#include <string>

#include "service_fixture.h"

namespace tessera {
namespace {

class ServiceReservations : public ServiceTest {
 protected:
  static RequestContext admin() {
    return RequestContext{Caller{true, ""}, "POST", "/v1/reservations"};
  }
  static std::string error_of(const std::function<void()>& f) { return field_error_of(f); }
  Service::ReservationRequest request(const std::string& name, const std::string& tenant, int gpus,
                                      double start, double end) const {
    Service::ReservationRequest r;
    r.name = name;
    r.tenant = tenant;
    r.gpus = gpus;
    r.start = start;
    r.end = end;
    return r;
  }
  int64_t submit(Service& s, const RequestContext& who, const std::string& name, int gpus,
                 const std::string& extra = "") {
    return s
        .submit(who,
                job("name: " + name + "\nresources: {gpus: " + std::to_string(gpus) + "}\n" +
                    extra + "command: [x]\n"),
                "", nullptr)
        .row.id;
  }
  // The GPUs (by host index) job `id` holds.
  static std::set<int32_t> gpus_of(Service& s, int64_t id) {
    std::set<int32_t> out;
    for (const NodeView& n : s.nodes()) {
      for (const GpuView& g : n.gpus) {
        for (int64_t j : g.jobs) {
          if (j == id) out.insert(g.index);
        }
      }
    }
    return out;
  }
};

TEST_F(ServiceReservations, InsideTheWindowOnlyTheTenantsJobsUseTheReservedGpus) {
  auto s = make(8);
  submit_and_tick(*s, "nlp", "warmup", 0);  // the tenants exist
  submit_and_tick(*s, "cv", "warmup", 0);
  const ReservationView v =
      s->create_reservation(admin(), request("deadline", "nlp", 4, now_, now_ + 3600));
  EXPECT_EQ(v.state, "active");
  ASSERT_EQ(v.gpus.size(), 4u);
  // cv's 6-GPU job waits, and says for what.
  const int64_t big = submit(*s, as("cv"), "big", 6);
  now_ += 1;
  s->tick();
  EXPECT_EQ(state(*s, big), JobState::kPending);
  const JobView page = s->job(Caller{true, ""}, big);
  EXPECT_EQ(page.reason_code, "ReservedGpus");
  EXPECT_NE(page.pending_reason.find("(reservation deadline)"), std::string::npos)
      << page.pending_reason;
  // nlp's 4-GPU job runs; the nodes view marks the reserved GPUs.
  const int64_t train = submit(*s, as("nlp"), "train", 4);
  now_ += 1;
  s->tick();
  EXPECT_EQ(state(*s, train), JobState::kRunning);
  int reserved = 0;
  for (const NodeView& n : s->nodes()) {
    for (const GpuView& g : n.gpus) reserved += g.reservation == "deadline" ? 1 : 0;
  }
  EXPECT_EQ(reserved, 4);
  // Deleted, the GPUs are everyone's: big runs once train ends.
  s->delete_reservation(admin(), "deadline");
  backend_->exit(static_cast<uint64_t>(train), 0, 0);
  now_ += 1;
  s->tick();
  s->tick();
  EXPECT_EQ(state(*s, big), JobState::kRunning);
}

TEST_F(ServiceReservations, BeforeTheWindowOnlyJobsWhoseTimeLimitEndsByItsStart) {
  auto s = make(4);
  submit_and_tick(*s, "nlp", "warmup", 0);
  submit_and_tick(*s, "cv", "warmup", 0);
  s->create_reservation(admin(), request("later", "nlp", 4, now_ + 3600, now_ + 7200));
  const int64_t open = submit(*s, as("cv"), "open", 4);  // no time limit
  const int64_t bounded = submit(*s, as("cv"), "bounded", 4, "time_limit: 30m\n");
  now_ += 1;
  s->tick();
  EXPECT_EQ(state(*s, open), JobState::kPending);
  EXPECT_EQ(s->job(Caller{true, ""}, open).reason_code, "ReservedGpus");
  EXPECT_EQ(state(*s, bounded), JobState::kRunning);
}

TEST_F(ServiceReservations, AJobsStopGraceCountsAndATimeLimitSetLaterReachesTheScheduler) {
  auto s = make(4);
  submit_and_tick(*s, "nlp", "warmup", 0);
  submit_and_tick(*s, "cv", "warmup", 0);
  s->create_reservation(admin(), request("later", "nlp", 4, now_ + 3600, now_ + 7200));
  // 30 min of run and 40 min of grace after it would reach 10 min into the window.
  const int64_t slow = submit(*s, as("cv"), "slow", 4, "time_limit: 30m\ncheckpoint_grace: 40m\n");
  now_ += 1;
  s->tick();
  EXPECT_EQ(state(*s, slow), JobState::kPending);
  EXPECT_EQ(s->job(Caller{true, ""}, slow).reason_code, "ReservedGpus");
  // Its time limit cut to 10 min (50 min with its grace), it ends before the window: it starts.
  JobUpdate u;
  u.time_limit_seconds = 600;
  s->update(RequestContext{Caller{false, "cv"}, "PATCH", "/v1/jobs"}, slow, u);
  now_ += 1;
  s->tick();
  s->tick();
  EXPECT_EQ(state(*s, slow), JobState::kRunning);
}

TEST_F(ServiceReservations, AUsersReservationIsTheirsAlone) {
  auto s = make(4);
  submit_and_tick(*s, "nlp", "warmup", 0);
  s->add_user(admin(), "nlp", "alice", UserRole::kMember);
  s->add_user(admin(), "nlp", "bob", UserRole::kMember);
  Service::ReservationRequest r = request("alice-only", "nlp", 4, now_, now_ + 3600);
  r.user = "alice";
  const ReservationView v = s->create_reservation(admin(), r);
  EXPECT_EQ(v.user, "alice");
  const auto as_user = [](const std::string& user) {
    Caller c{false, "nlp"};
    c.user = user;
    return RequestContext{c, "POST", "/v1/jobs"};
  };
  const int64_t bobs = submit(*s, as_user("bob"), "bobs", 2);
  const int64_t alices = submit(*s, as_user("alice"), "alices", 4);
  now_ += 1;
  s->tick();
  EXPECT_EQ(state(*s, bobs), JobState::kPending);
  EXPECT_EQ(state(*s, alices), JobState::kRunning);
}

TEST_F(ServiceReservations, RefusalsSayWhatStandsInTheWay) {
  auto s = make(8);
  submit_and_tick(*s, "nlp", "warmup", 0);
  submit_and_tick(*s, "cv", "warmup", 0);
  // A tenant may not reserve; names, tenants, users, types and windows are checked.
  EXPECT_EQ(error_of([&] {
              s->create_reservation(RequestContext{Caller{false, "nlp"}, "POST", "/v1/r"},
                                    request("r", "nlp", 1, now_, now_ + 60));
            }),
            ": only the admin reserves GPUs");
  EXPECT_EQ(
      error_of([&] { s->create_reservation(admin(), request("r", "nope", 1, now_, now_ + 60)); }),
      "tenant: no tenant \"nope\"");
  EXPECT_EQ(error_of([&] {
              s->create_reservation(admin(), request("r", "nlp", 1, now_ + 60, now_));
            }).rfind("end: the window must end after it begins", 0),
            0u);
  Service::ReservationRequest typed = request("r", "nlp", 1, now_, now_ + 60);
  typed.gpu_type = "H200";
  EXPECT_NE(error_of([&] { s->create_reservation(admin(), typed); }).find("gpu_type: "),
            std::string::npos);
  // cv runs a 6-GPU job without a time limit: only 2 GPUs are free to reserve past now.
  const int64_t cv = submit(*s, as("cv"), "cv", 6);
  now_ += 1;
  s->tick();
  ASSERT_EQ(state(*s, cv), JobState::kRunning);
  const std::string why = error_of(
      [&] { s->create_reservation(admin(), request("r", "nlp", 4, now_ + 600, now_ + 1200)); });
  EXPECT_NE(why.find("only 2 GPUs can be reserved"), std::string::npos) << why;
  EXPECT_NE(why.find("6 are held by jobs that may run past its start (no time limit ending by "
                     "then: " +
                     std::to_string(cv) + ")"),
            std::string::npos)
      << why;
  // --ignore-jobs reserves them anyway; the view names the job in the way.
  Service::ReservationRequest anyway = request("r", "nlp", 4, now_ + 600, now_ + 1200);
  anyway.ignore_jobs = true;
  const ReservationView v = s->create_reservation(admin(), anyway);
  EXPECT_EQ(v.busy_jobs, std::vector<int64_t>{cv});
  // Another over an overlapping window finds the rest, and then nothing.
  s->create_reservation(admin(), request("r2", "cv", 4, now_ + 900, now_ + 1500));
  const std::string full = error_of(
      [&] { s->create_reservation(admin(), request("r3", "cv", 1, now_ + 1000, now_ + 1100)); });
  EXPECT_NE(full.find("8 are in reservations over that window (r, r2)"), std::string::npos) << full;
  // After both windows it is free again.
  EXPECT_EQ(error_of([&] {
              s->create_reservation(admin(), request("r3", "cv", 8, now_ + 1500, now_ + 1600));
            }),
            "");
  EXPECT_NE(
      error_of([&] { s->create_reservation(admin(), request("r3", "cv", 1, now_, now_ + 1)); }),
      "");  // the name is taken
  // A tenant sees every reservation, not whose the others are.
  for (const ReservationView& r : s->reservations(Caller{false, "nlp"})) {
    EXPECT_EQ(r.tenant.empty(), r.name != "r") << r.name;
  }
}

TEST_F(ServiceReservations, TheNextReservationTakesOtherGpusWhereThereAreAny) {
  auto s = make(8);
  submit_and_tick(*s, "nlp", "warmup", 0);
  submit_and_tick(*s, "cv", "warmup", 0);
  const ReservationView now =
      s->create_reservation(admin(), request("now", "nlp", 4, now_, now_ + 3600));
  const ReservationView later =
      s->create_reservation(admin(), request("later", "cv", 4, now_ + 86400, now_ + 90000));
  for (const std::string& g : later.gpus) {
    EXPECT_EQ(std::count(now.gpus.begin(), now.gpus.end(), g), 0) << g;
  }
}

TEST_F(ServiceReservations, AReservationSurvivesARestart) {
  {
    auto s = make(4);
    submit_and_tick(*s, "nlp", "warmup", 0);
    s->create_reservation(admin(), request("kept", "nlp", 2, now_ + 60, now_ + 3600));
  }
  auto s = make(4);
  const std::vector<ReservationView> all = s->reservations(Caller{true, ""});
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].name, "kept");
  EXPECT_EQ(all[0].tenant, "nlp");
  EXPECT_EQ(all[0].gpus.size(), 2u);
  EXPECT_EQ(all[0].missing_gpus, 0);
  bool audited = false;
  for (const AuditEntry& e : s->audit_log(10)) {
    audited = audited || e.target.find("reservation kept: 2 GPUs for nlp") != std::string::npos;
  }
  EXPECT_TRUE(audited);
}

}  // namespace
}  // namespace tessera
