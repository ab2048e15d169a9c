// The admission gates (engine/gates/): one behaviour suite over every gate, then what each one
// decides on its own.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <optional>

#include "engine/cycle.h"
#include "engine/gates/admission_gate.h"
#include "engine/gates/carbon_gate.h"
#include "engine/gates/inference_reserve_gate.h"
#include "engine/gates/lending_gate.h"
#include "engine/gates/quota_gate.h"
#include "model/carbon_intensity.h"
#include "model/cluster_spec.h"
#include "test_util.h"

namespace tessera {
namespace {

using testing::find_reason;
using testing::gang;
using testing::queue_spec;
using testing::whole_gpus;
using testing::World;

// One node of 8 GPUs, two queues: "a" (tenant 0; its best-effort jobs may wait an hour for
// cleaner power) and "b" (tenant 1, limit 2 GPUs). Tenant 0 runs 4 GPUs.
struct Case {
  World w{make_uniform_cluster(1, 1, 1, 8)};
  QueueTree tree;
  CarbonIntensity carbon{{{0, 500}, {1800, 100}}, CarbonIntensity::TimeBase::kRelative};
  bool with_carbon = false;
  int64_t reserve_milli = 0;
  double borrow_max_runtime = 0;

  Case() {
    QueueSpec a = queue_spec("a");
    a.carbon_defer_seconds = 3600;
    tree.add(kRootQueue, a);
    tree.add(kRootQueue, queue_spec("b", 1, 0, 2));
  }
  void finish() {
    tree.settings().borrow_max_runtime_seconds = borrow_max_runtime;
    tree.finish();
    Interner names;
    names.intern("a");
    names.intern("b");
    tree.bind(names, "test");
    w.queues = &tree;
    w.add_running(gang("a-run", 1, 4), whole_gpus(w.cluster, 0, 0, 4));
  }
  Snapshot snapshot() const {
    Snapshot s = w.snapshot();
    if (with_carbon) s.carbon = &carbon;
    s.inference_reserve_milli = reserve_milli;
    return s;
  }
};

// Asks `gate` about `job` as a cycle would: with the job waiting (its demand counts in the fair
// shares), and its reason filled with the job, its need and what is free.
struct Asked {
  bool admitted;
  PendingReason reason;
};
Asked ask(const AdmissionGate& gate, Case& c, const JobSpec& job) {
  c.w.add_pending(job);
  const Snapshot snap = c.snapshot();
  const QueueShares shares = compute_queue_shares(snap);
  PendingReason r;
  r.job = 42;
  r.need_gpu_milli = job.gpu_milli_per_gang(job.min_members);
  r.free_gpu_milli = c.w.state.free_milli_matching(kAnyGpuType);
  const GateInput in{snap, *shares.tree, shares, shares.usage, c.w.state};
  const bool ok = gate.admit(in, job, shares.leaf_of(job.tenant), r);
  c.w.pending.pop_back();
  return {ok, r};
}

// A gate, a case it holds a job in, and one it lets the same kind of job through.
struct GateCase {
  const char* name;
  std::function<std::unique_ptr<AdmissionGate>()> make;
  std::function<void(Case&)> setup;  // before Case::finish
  JobSpec held, admitted;
  PendingCode code;
  const char* policy = "fair";
};

JobSpec with_estimate(JobSpec s, double seconds) {
  s.duration_estimate = seconds;
  return s;
}

std::vector<GateCase> every_gate() {
  return {
      {"quota", [] { return std::make_unique<QuotaGate>(); }, [](Case&) {}, gang("b3", 1, 3, 0, 1),
       gang("a2", 1, 2), PendingCode::kQuotaExceeded},
      // Tenant 0 holds 4 of 8 GPUs and asks 6 more: past its fair share of 8 unless short.
      {"lending", [] { return std::make_unique<LendingGate>(); },
       [](Case& c) { c.borrow_max_runtime = 600; }, with_estimate(gang("a-long", 1, 6), 7200),
       with_estimate(gang("a-short", 1, 6), 60), PendingCode::kOverFairShare},
      {"carbon", [] { return std::make_unique<CarbonGate>(); },
       [](Case& c) { c.with_carbon = true; }, gang("a-be", 1, 1, 0, 0, PriorityClass::kBestEffort),
       gang("a-prod", 1, 1), PendingCode::kCarbonDeferred},
      {"inference-reserve", [] { return std::make_unique<InferenceReserveGate>(); },
       [](Case& c) { c.reserve_milli = 3000; }, gang("b-train", 1, 2, 0, 1),
       gang("a-serve", 1, 2, 0, 0, PriorityClass::kInferenceCritical),
       PendingCode::kReservedForInference},
  };
}

class EveryGate : public ::testing::TestWithParam<GateCase> {};

TEST_P(EveryGate, HoldsAJobSayingWhyWithItsOwnCodeAndLeavesTheRestOfTheReason) {
  const GateCase& g = GetParam();
  Case c;
  g.setup(c);
  c.finish();
  const auto gate = g.make();
  const Asked a = ask(*gate, c, g.held);
  EXPECT_FALSE(a.admitted);
  EXPECT_EQ(a.reason.code, g.code);
  EXPECT_EQ(a.reason.job, 42u);
  EXPECT_EQ(a.reason.need_gpu_milli, g.held.gpu_milli_per_gang(g.held.min_members));
  EXPECT_EQ(a.reason.free_gpu_milli, 4000);
}

TEST_P(EveryGate, LetsThroughAJobItDoesNotConcernAndWritesNoReason) {
  const GateCase& g = GetParam();
  Case c;
  g.setup(c);
  c.finish();
  const Asked a = ask(*g.make(), c, g.admitted);
  EXPECT_TRUE(a.admitted);
  EXPECT_EQ(a.reason.code, PendingReason{}.code);
}

TEST_P(EveryGate, AskingTwiceGivesTheSameAnswer) {
  const GateCase& g = GetParam();
  Case c;
  g.setup(c);
  c.finish();
  const auto gate = g.make();
  const Asked a = ask(*gate, c, g.held), b = ask(*gate, c, g.held);
  EXPECT_EQ(a.admitted, b.admitted);
  EXPECT_EQ(a.reason.code, b.reason.code);
  EXPECT_EQ(a.reason.queue, b.reason.queue);
  EXPECT_EQ(a.reason.queue_bound_milli, b.reason.queue_bound_milli);
}

// Through a whole cycle: the cycle asks the gate (admission_gates() gives it), the held job
// waits for the gate's reason, the other starts, and no GPU is given twice.
TEST_P(EveryGate, ACycleAsksItAndHoldsTheJobWithoutOverCommitting) {
  const GateCase& g = GetParam();
  Case c;
  g.setup(c);
  c.finish();
  bool listed = false;
  for (const auto& gate : admission_gates(c.snapshot(), make_policy(g.policy, 1), c.tree)) {
    listed = listed || gate->name() == g.make()->name();
  }
  EXPECT_TRUE(listed);
  const JobId held = c.w.add_pending(g.held);
  const JobId admitted = c.w.add_pending(g.admitted);
  const Decisions d = schedule_cycle(c.snapshot(), make_policy(g.policy, 1));
  ASSERT_NE(find_reason(d, held), nullptr);
  EXPECT_EQ(find_reason(d, held)->code, g.code);
  // The other starts where it fits (a-short, 6 GPUs of 4 free, waits for GPUs instead).
  if (g.admitted.gpu_milli_per_gang(g.admitted.min_members) <= 4000) {
    EXPECT_NE(testing::find_start(d, admitted), nullptr);
  }
  ClusterState s = c.w.state;
  for (const Start& st : d.starts) {
    ASSERT_TRUE(s.fits(st.alloc)) << "a GPU given twice";
    s.allocate(st.alloc);
  }
}

INSTANTIATE_TEST_SUITE_P(Gates, EveryGate, ::testing::ValuesIn(every_gate()), [](const auto& p) {
  std::string n = p.param.name;
  for (char& ch : n) {
    if (ch == '-') ch = '_';
  }
  return n;
});

TEST(AdmissionGates, ACycleHasOnlyTheGatesItsPolicyAndSnapshotCallFor) {
  Case c;
  c.finish();
  const auto names = [&](const Policy& p) {
    std::vector<std::string> out;
    for (const auto& g : admission_gates(c.snapshot(), p, c.tree)) out.emplace_back(g->name());
    return out;
  };
  EXPECT_EQ(names(make_policy("fifo", 1)), std::vector<std::string>{"quota"});
  c.with_carbon = true;
  c.reserve_milli = 1000;
  c.tree.settings().borrow_max_runtime_seconds = 600;
  EXPECT_EQ(names(make_policy("fair", 1)),
            (std::vector<std::string>{"quota", "lending", "carbon", "inference-reserve"}));
  // Bounded lending is a rule of reclaim: without it, no lending gate.
  EXPECT_EQ(names(make_policy("fifo", 1)),
            (std::vector<std::string>{"quota", "carbon", "inference-reserve"}));
}

TEST(QuotaGate, NamesTheQueueAtItsLimitAndWhatItHolds) {
  Case c;
  c.finish();
  const Asked a = ask(QuotaGate(), c, gang("b3", 1, 3, 0, 1));
  ASSERT_FALSE(a.admitted);
  EXPECT_EQ(a.reason.queue_holds_milli, 0);
  EXPECT_EQ(a.reason.queue_bound_milli, 2000);
  EXPECT_EQ(c.tree.queue(a.reason.queue).name, "b");
  EXPECT_TRUE(ask(QuotaGate(), c, gang("b2", 1, 2, 0, 1)).admitted);
}

TEST(LendingGate, SaysTheBoundAndNeverHoldsBestEffortOrInferenceCritical) {
  Case c;
  c.borrow_max_runtime = 600;
  c.finish();
  const Asked a = ask(LendingGate(), c, gang("a-unknown", 1, 6));
  ASSERT_FALSE(a.admitted);  // no estimate: not known to end soon
  EXPECT_EQ(a.reason.borrow_max_runtime, 600);
  EXPECT_EQ(c.tree.queue(a.reason.queue).name, "a");
  EXPECT_TRUE(ask(LendingGate(), c, gang("a-be", 1, 6, 0, 0, PriorityClass::kBestEffort)).admitted);
  EXPECT_TRUE(
      ask(LendingGate(), c, gang("a-ic", 1, 6, 0, 0, PriorityClass::kInferenceCritical)).admitted);
  EXPECT_TRUE(ask(LendingGate(), c, gang("a-within", 1, 4)).admitted);  // 8 of 8: its share
}

TEST(CarbonGate, WaitsForTheCleanerHourOnlyWithinItsQueuesBound) {
  Case c;
  c.with_carbon = true;
  c.finish();
  const JobSpec be = gang("a-be", 1, 1, 0, 0, PriorityClass::kBestEffort);
  const Asked a = ask(CarbonGate(), c, be);
  ASSERT_FALSE(a.admitted);
  EXPECT_EQ(a.reason.carbon_now, 500);
  EXPECT_EQ(a.reason.carbon_then, 100);
  EXPECT_EQ(a.reason.carbon_at, 1800);
  EXPECT_EQ(a.reason.carbon_until, 3600);
  // Submitted long ago: past its queue's bound, it runs now.
  EXPECT_TRUE(
      ask(CarbonGate(), c, gang("a-old", 1, 1, -7200, 0, PriorityClass::kBestEffort)).admitted);
  // Queue b sets no bound.
  EXPECT_TRUE(ask(CarbonGate(), c, gang("b-be", 1, 1, 0, 1, PriorityClass::kBestEffort)).admitted);
}

TEST(InferenceReserveGate, HoldsOnlyWhatWouldEatIntoTheReserve) {
  Case c;
  c.reserve_milli = 3000;
  c.finish();
  EXPECT_TRUE(ask(InferenceReserveGate(), c, gang("b1", 1, 1, 0, 1)).admitted);  // 3 left
  const Asked a = ask(InferenceReserveGate(), c, gang("b2", 1, 2, 0, 1));        // 2 left
  ASSERT_FALSE(a.admitted);
  EXPECT_EQ(a.reason.queue_bound_milli, 3000);
}

}  // namespace
}  // namespace tessera
