// People inside tenants: each user's own token stands for them (alice@team-a in the audit log
// and the job's history); a member acts on their own jobs only, a tenant admin on all the
// tenant's and manages its users; a removed user's token stops working at once; all of it
// survives a restart.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>

#include "service_fixture.h"

namespace tessera {
namespace {

class ServiceUsers : public ServiceTest {
 protected:
  static RequestContext ctx(const Caller& c) { return RequestContext{c, "POST", "/v1/x"}; }
  static Caller admin() { return Caller{true, ""}; }
  // The error `f` raises, as "KIND: message" (403/404/409/400); "" if none.
  static std::string error_of(const std::function<void()>& f) {
    try {
      f();
    } catch (const ServiceError& e) {
      const char* kinds[] = {"invalid",  "unauthorized", "forbidden", "not found",
                             "conflict", "infeasible",   "too many",  "unavailable"};
      return std::string(kinds[e.kind()]) + ": " + e.what();
    }
    return "";
  }
};

TEST_F(ServiceUsers, EachUserIsThemselvesAndAMemberActsOnlyOnTheirOwnJobs) {
  auto s = make(4);
  s->create_tenant(ctx(admin()), "team-a");
  s->create_tenant(ctx(admin()), "team-b");
  const std::string alice = s->add_user(ctx(admin()), "team-a", "alice", UserRole::kMember);
  const std::string carol = s->add_user(ctx(admin()), "team-a", "carol", UserRole::kMember);
  const std::string bob = s->add_user(ctx(admin()), "team-a", "bob", UserRole::kAdmin);
  ASSERT_NE(alice, carol);
  const Caller as_alice = s->authenticate(alice).value();
  EXPECT_EQ(as_alice.actor(), "alice@team-a");
  EXPECT_FALSE(as_alice.tenant_admin);
  const Caller as_carol = s->authenticate(carol).value();
  const Caller as_bob = s->authenticate(bob).value();
  EXPECT_TRUE(as_bob.tenant_admin);

  // Alice's job is hers: the row, the history and the audit log say so.
  const int64_t id = s->submit(ctx(as_alice), job("name: a\ncommand: [x]\n"), "", nullptr).row.id;
  EXPECT_EQ(s->job(as_carol, id).row.user, "alice");  // the tenant's members see it
  const std::vector<JobEvent> history = s->job_events(as_alice, id);
  ASSERT_FALSE(history.empty());
  EXPECT_NE(history.front().message.find("by alice@team-a"), std::string::npos)
      << history.front().message;
  EXPECT_EQ(s->audit_log(1).front().actor, "alice@team-a");

  // Carol may not stop it; Bob (a tenant admin) may hold it; Alice may cancel her own.
  EXPECT_EQ(error_of([&] { s->cancel(ctx(as_carol), id); }),
            "forbidden: job " + std::to_string(id) +
                " was submitted by alice@team-a: a member acts on their own jobs (a tenant admin "
                "on all of its tenant's)");
  EXPECT_EQ(error_of([&] { s->hold(ctx(as_carol), id); }).substr(0, 9), "forbidden");
  EXPECT_EQ(error_of([&] { s->hold(ctx(as_bob), id); }), "");
  EXPECT_EQ(error_of([&] { s->cancel(ctx(as_alice), id); }), "");
  EXPECT_EQ(s->job(admin(), id).row.message, "cancelled by alice@team-a");

  // Managing users: a member may not, a tenant admin may in their own tenant only.
  EXPECT_EQ(error_of([&] { s->add_user(ctx(as_alice), "team-a", "eve", UserRole::kMember); }),
            "forbidden: only a tenant admin manages team-a's users (alice@team-a is a member)");
  EXPECT_EQ(error_of([&] { s->add_user(ctx(as_bob), "team-b", "eve", UserRole::kAdmin); }),
            "forbidden: only the admin or team-b's own admins manage its users");
  EXPECT_EQ(error_of([&] { s->add_user(ctx(as_bob), "team-a", "alice", UserRole::kMember); }),
            "conflict: user alice@team-a exists");
  // Another tenant's users are refused alike whether it exists or not (no oracle of names);
  // the admin is told.
  EXPECT_EQ(error_of([&] { s->add_user(ctx(as_bob), "nowhere", "x", UserRole::kMember); }),
            "forbidden: only the admin or nowhere's own admins manage its users");
  EXPECT_EQ(error_of([&] { s->add_user(ctx(admin()), "nowhere", "x", UserRole::kMember); }),
            "not found: no tenant nowhere");
  EXPECT_EQ(
      error_of([&] { s->add_user(ctx(as_bob), "team-a", "..", UserRole::kMember); }).substr(0, 7),
      "invalid");
  EXPECT_EQ(
      error_of([&] { s->add_user(ctx(as_bob), "team-a", "a b", UserRole::kMember); }).substr(0, 7),
      "invalid");
  const std::string dave = s->add_user(ctx(as_bob), "team-a", "dave", UserRole::kMember);
  EXPECT_EQ(s->authenticate(dave)->actor(), "dave@team-a");
  std::vector<std::string> names;
  for (const UserRow& u : s->users(as_bob, "team-a")) {
    names.push_back(u.name + ":" + std::string(to_string(u.role)));
    EXPECT_EQ(u.token_sha256, "");  // never shown
  }
  EXPECT_EQ(names,
            (std::vector<std::string>{"alice:member", "bob:admin", "carol:member", "dave:member"}));
  EXPECT_EQ(error_of([&] { s->users(as_alice, "team-a"); }).substr(0, 9), "forbidden");

  // An idempotency key is the tenant's, but one user's job is not handed to another's retry.
  const int64_t keyed =
      s->submit(ctx(as_alice), job("name: k\ncommand: [x]\n"), "key-1", nullptr).row.id;
  EXPECT_EQ(s->submit(ctx(as_alice), job("name: k\ncommand: [x]\n"), "key-1", nullptr).row.id,
            keyed);
  EXPECT_EQ(
      error_of([&] { s->submit(ctx(as_carol), job("name: k\ncommand: [x]\n"), "key-1", nullptr); }),
      "conflict: idempotency key already used for job " + std::to_string(keyed) +
          " by alice@team-a");
  s->cancel(ctx(as_alice), keyed);

  // A user rotates their own token; a removed user's token stops working at once.
  const std::string alice2 = s->rotate_user_token(ctx(as_alice), "team-a", "alice");
  EXPECT_FALSE(s->authenticate(alice).has_value());
  EXPECT_EQ(s->authenticate(alice2)->actor(), "alice@team-a");
  EXPECT_EQ(error_of([&] { s->rotate_user_token(ctx(as_alice), "team-a", "carol"); }).substr(0, 9),
            "forbidden");
  s->remove_user(ctx(as_bob), "team-a", "carol");
  EXPECT_FALSE(s->authenticate(carol).has_value());

  // What was stored is what a restart reads: users, their roles, who submitted what.
  s.reset();
  s = make(4);
  EXPECT_EQ(s->authenticate(alice2)->actor(), "alice@team-a");
  EXPECT_TRUE(s->authenticate(bob)->tenant_admin);
  EXPECT_FALSE(s->authenticate(carol).has_value());
  EXPECT_EQ(s->job(admin(), id).row.user, "alice");

  // Deleting the tenant removes its users.
  s->delete_tenant(ctx(admin()), "team-a");
  EXPECT_FALSE(s->authenticate(alice2).has_value());
  EXPECT_FALSE(s->authenticate(bob).has_value());
}

// Usage by user, as sreport by user: each user's jobs' GPU-hours, and the tenant's own
// token's apart; by queue the same hours are the tenant's one row.
TEST_F(ServiceUsers, UsageIsReportedPerUserOfEachTenant) {
  auto s = make(4);
  s->create_tenant(ctx(admin()), "team-a");
  const Caller alice =
      s->authenticate(s->add_user(ctx(admin()), "team-a", "alice", UserRole::kMember)).value();
  const Caller bob =
      s->authenticate(s->add_user(ctx(admin()), "team-a", "bob", UserRole::kMember)).value();
  const double start = now_;
  const auto run = [&](const Caller& who, int gpus) {
    return s
        ->submit(ctx(who),
                 job("name: j\nresources: {gpus: " + std::to_string(gpus) + "}\ncommand: [x]\n"),
                 "", nullptr)
        .row.id;
  };
  const int64_t a = run(alice, 1);
  const int64_t b = run(bob, 2);
  const int64_t t = run(Caller{false, "team-a"}, 1);
  now_ += 1;
  s->tick();
  for (const int64_t id : {a, b, t}) ASSERT_EQ(state(*s, id), JobState::kRunning);
  now_ += 3600;
  for (const int64_t id : {a, b, t}) backend_->exit(id, 0, 0);
  s->tick();
  std::map<std::string, double> hours;
  for (const UsageRow& r : s->usage(admin(), start, now_ + 1, /*by_user=*/true)) {
    hours[r.user.empty() ? r.tenant : r.user + "@" + r.tenant] = r.total_gpu_hours();
    EXPECT_EQ(r.jobs.at("succeeded"), 1) << r.user;
  }
  ASSERT_EQ(hours.size(), 3u);
  EXPECT_NEAR(hours["alice@team-a"], 1, 0.01);
  EXPECT_NEAR(hours["bob@team-a"], 2, 0.01);
  EXPECT_NEAR(hours["team-a"], 1, 0.01);
  const std::vector<UsageRow> by_queue = s->usage(admin(), start, now_ + 1);
  ASSERT_EQ(by_queue.size(), 1u);
  EXPECT_NEAR(by_queue[0].total_gpu_hours(), 4, 0.01);
  EXPECT_EQ(by_queue[0].user, "");
  // A member sees their tenant's rows.
  EXPECT_EQ(s->usage(alice, start, now_ + 1, true).size(), 3u);
}

// Each user's share of the tenant's queue: one user's flood does not fill it for the others.
TEST_F(ServiceUsers, AUserMayQueueOnlyTheirOwnShareOfTheTenantsJobs) {
  auto s = make_with_queues(1, R"(queues:
  - name: team-a
    tenant_limits: {max_pending_jobs: 10, max_pending_jobs_per_user: 2}
)");
  s->create_tenant(ctx(admin()), "team-a");
  const Caller alice =
      s->authenticate(s->add_user(ctx(admin()), "team-a", "alice", UserRole::kMember)).value();
  const Caller bob =
      s->authenticate(s->add_user(ctx(admin()), "team-a", "bob", UserRole::kMember)).value();
  const auto submit = [&](const Caller& who) {
    return error_of([&] { s->submit(ctx(who), job("name: j\ncommand: [x]\n"), "", nullptr); });
  };
  EXPECT_EQ(submit(alice), "");
  EXPECT_EQ(submit(alice), "");
  EXPECT_EQ(submit(alice),
            "too many: alice@team-a has 2 jobs waiting, past the most this server queues for one "
            "user (2, --max-pending-per-user or the queue's "
            "tenant_limits.max_pending_jobs_per_user); submit more as they start");
  EXPECT_EQ(submit(bob), "");
  // An array larger than the limit could never be queued: a request to change, not to retry.
  EXPECT_EQ(error_of([&] {
              s->submit(ctx(bob), job("name: a\narray: 0-2\ncommand: [x]\n"), "", nullptr);
            }),
            "invalid: an array of 3 tasks is more than this server queues for one user (2, "
            "--max-pending-per-user or the queue's tenant_limits.max_pending_jobs_per_user)");
  EXPECT_EQ(submit(Caller{false, "team-a"}), "");  // the tenant's own token is no user
}

// One tenant's admin cannot make the server keep users without bound.
TEST_F(ServiceUsers, ATenantHasAtMostAThousandUsers) {
  auto s = make(1);
  s->create_tenant(ctx(admin()), "team-a");
  for (int i = 0; i < 1000; ++i) {
    s->add_user(ctx(admin()), "team-a", "u" + std::to_string(i), UserRole::kMember);
  }
  EXPECT_EQ(error_of([&] { s->add_user(ctx(admin()), "team-a", "one-more", UserRole::kMember); }),
            "too many: tenant team-a has 1000 users, the most one tenant may have; remove some "
            "first");
  s->remove_user(ctx(admin()), "team-a", "u0");
  EXPECT_EQ(error_of([&] { s->add_user(ctx(admin()), "team-a", "one-more", UserRole::kMember); }),
            "");
}

}  // namespace
}  // namespace tessera
