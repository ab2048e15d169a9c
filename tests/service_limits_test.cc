// What a tenant's submissions may cost the server: a dependency chain cancelled from its head
// (each dependent looked at once), an array's tasks sharing one index list, and memory that a
// job naming none still gets bounded by its queue's or the server's default.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "service_fixture.h"
#include "store/job_request.h"

namespace tessera {
namespace {

class ServiceLimitsTest : public ServiceTest {
 protected:
  // A service without a submission rate (the tests submit thousands of jobs at one instant).
  std::unique_ptr<Service> unmetered(ServiceOptions o) {
    o.limits.submissions_per_second = 0;
    auto b = std::make_unique<FakeBackend>();
    backend_ = b.get();
    return std::make_unique<Service>(o, std::move(b));
  }
};

// Cancelling the head of a 10,000-job after_ok chain froze the API for 14 s: the cascade
// rescanned every waiting job per link. It looks at each dependent once.
TEST_F(ServiceLimitsTest, ALongDependencyChainIsCancelledLookingAtEachDependentOnce) {
  auto s = unmetered(options(1));
  constexpr int kChain = 3000;
  const int64_t head = s->submit(as("lab"), job("name: head\ncommand: [x]\n"), "", nullptr).row.id;
  int64_t prev = head, last = head;
  for (int k = 0; k < kChain; ++k) {
    last = s->submit(as("lab"),
                     job("name: link\nafter_ok: [" + std::to_string(prev) + "]\ncommand: [x]\n"),
                     "", nullptr)
               .row.id;
    prev = last;
  }
  s->tick();
  ASSERT_EQ(state(*s, head), JobState::kRunning);
  const uint64_t before = s->dependency_visits();
  backend_->exit(head, 0, 1);
  s->tick();
  s->tick();
  EXPECT_EQ(state(*s, head), JobState::kFailed);
  EXPECT_EQ(state(*s, last), JobState::kCancelled);
  EXPECT_EQ(state(*s, head + kChain / 2), JobState::kCancelled);
  // Each link's one dependent, once.
  EXPECT_EQ(s->dependency_visits() - before, static_cast<uint64_t>(kChain - 1));
}

// Every task of an array held its own copy of the array's 10,000 indices.
TEST(ArrayIndices, CopiesShareOneListAndCompareByValue) {
  const JobRequest r = parse_job_request("name: a\narray: 0-9999%10\ncommand: [x]\n");
  ASSERT_EQ(r.array_indices.size(), 10000u);
  const JobRequest task = r;  // as each task's row holds the spec
  EXPECT_EQ(&task.array_indices.get()[0], &r.array_indices.get()[0]);
  EXPECT_EQ(task, r);
  const JobRequest other = parse_job_request("name: a\narray: 0-9999%10\ncommand: [x]\n");
  EXPECT_EQ(other, r);  // another list with the same indices is equal
  EXPECT_EQ(to_json(other)["array"], "0-9999%10");
}

// Finding 5: a job that names no memory got an unbounded cgroup. Its queue's default (else
// the server's) is its limit and its demand; asking for more than the maximum is refused.
TEST_F(ServiceLimitsTest, AJobNamingNoMemoryGetsItsQueuesDefault) {
  const std::string path = dir_.file("queues.yaml");
  std::ofstream(path) << "queues:\n"
                         "  - name: small\n"
                         "    memory: {default: 512Mi, max: 2Gi}\n"
                         "  - name: open\n";
  ServiceOptions o = options(2);
  o.queues_path = path;
  o.default_memory_mib = 1024;
  o.max_memory_mib = 8192;
  auto s = unmetered(o);
  const int64_t a = s->submit(as("small"), job("name: a\ncommand: [x]\n"), "", nullptr).row.id;
  const int64_t b = s->submit(as("open"), job("name: b\ncommand: [x]\n"), "", nullptr).row.id;
  EXPECT_EQ(s->job(Caller{true, ""}, a).row.spec.mem_mib, 512);
  EXPECT_EQ(s->job(Caller{true, ""}, b).row.spec.mem_mib, 1024);
  s->tick();
  EXPECT_EQ(backend_->launched_mem_of(a), 512);
  try {
    s->submit(as("small"), job("name: c\nresources: {memory: 4Gi}\ncommand: [x]\n"), "", nullptr);
    FAIL() << "4Gi was accepted in a queue whose maximum is 2Gi";
  } catch (const ServiceError& e) {
    EXPECT_EQ(e.field(), "resources.memory");
    EXPECT_NE(std::string(e.what()).find("memory.max"), std::string::npos) << e.what();
  }
  try {
    s->submit(as("open"), job("name: d\nresources: {memory: 16Gi}\ncommand: [x]\n"), "", nullptr);
    FAIL() << "16Gi was accepted beyond --max-memory";
  } catch (const ServiceError& e) {
    EXPECT_NE(std::string(e.what()).find("--max-memory"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tessera
