// The queue tree changes without a restart: checked whole before it replaces the running one
// (a bad file names its line; a tenant left without a queue is refused, naming its jobs),
// audited, seen at once by the queue view and by submissions, and kept for the next start.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>

#include "service_fixture.h"

namespace tessera {
namespace {

class ServiceQueueApply : public ServiceTest {
 protected:
  static RequestContext admin() { return RequestContext{Caller{true, ""}, "POST", "/v1/queues"}; }
  static std::string error_of(const std::function<void()>& f) { return field_error_of(f); }
  static std::map<std::string, double> weights(const Service& s) {
    std::map<std::string, double> out;
    for (const QueueView& q : s.queues(Caller{true, ""})) out[q.path] = q.weight;
    return out;
  }
};

TEST_F(ServiceQueueApply, ATreeIsCheckedWholeThenReplacesTheRunningOneAndIsKept) {
  auto s = make_with_queues(2, R"(queues:
  - name: team-a
  - name: team-b
)");
  const int64_t a = submit_and_tick(*s, "team-a", "a", 2);
  ASSERT_EQ(state(*s, a), JobState::kRunning);
  const int64_t b = s->submit(as("team-b"), job("name: b\ncommand: [x]\n"), "", nullptr).row.id;
  EXPECT_NE(error_of([&] { s->submit(as("team-c"), job("name: c\ncommand: [x]\n"), "", nullptr); }),
            "");  // no queue for it yet

  // A bad file names its line; a tree without team-b names team-b's waiting job.
  const std::string bad = error_of([&] {
    s->apply_queue_tree(admin(), "queues:\n  - name: team-a\n    wieght: 2\n", "new.yaml", false);
  });
  EXPECT_EQ(bad.rfind("queues: new.yaml:3: field queues[0].wieght: unknown key (did you mean "
                      "'weight'?)",
                      0),
            0u)
      << bad;
  EXPECT_EQ(error_of([&] {
              s->apply_queue_tree(admin(), "queues:\n  - name: team-a\n", "new.yaml", false);
            }),
            "queues: new.yaml has no leaf queue for tenant team-b (jobs " + std::to_string(b) +
                " waiting or running): keep a queue for each, or cancel their jobs first");
  EXPECT_EQ(error_of([&] {
              s->apply_queue_tree(RequestContext{Caller{false, "team-a"}, "POST", "/v1/queues"},
                                  "queues:\n  - name: team-a\n", "new.yaml", false);
            }),
            ": only the admin changes the queue tree");
  const std::string next = R"(queues:
  - name: team-a
    weight: 3
  - name: team-b
  - name: team-c
)";
  const QueueTreeChange dry = s->apply_queue_tree(admin(), next, "new.yaml", true);
  EXPECT_EQ(dry.added, std::vector<std::string>{"team-c"});
  EXPECT_EQ(weights(*s)["team-a"], 1);  // checked, not applied

  const QueueTreeChange change = s->apply_queue_tree(admin(), next, "new.yaml", false);
  EXPECT_EQ(change.queues, 3u);
  EXPECT_EQ(change.added, std::vector<std::string>{"team-c"});
  EXPECT_TRUE(change.removed.empty());
  EXPECT_EQ(weights(*s)["team-a"], 3);
  EXPECT_EQ(state(*s, a), JobState::kRunning);  // running jobs keep running
  EXPECT_EQ(error_of([&] { s->submit(as("team-c"), job("name: c\ncommand: [x]\n"), "", nullptr); }),
            "");
  EXPECT_EQ(s->audit_log(2)[1].target, "queue tree (3 queues)");

  // A server started without --queues comes back with the tree applied last.
  s.reset();
  ServiceOptions o = options(2);
  auto backend = std::make_unique<FakeBackend>();
  backend_ = backend.get();
  s = std::make_unique<Service>(o, std::move(backend));
  EXPECT_EQ(weights(*s)["team-a"], 3);
  EXPECT_TRUE(weights(*s).contains("team-c"));
}

}  // namespace
}  // namespace tessera
