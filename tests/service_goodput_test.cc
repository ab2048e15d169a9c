// `tessera serve --policy goodput`: adaptive jobs report how they train, and goodput rounds size
// them (docs/goodput.md), over the fake backend and a clock the test moves.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>

#include "service_fixture.h"

namespace tessera {
namespace {

class ServiceGoodput : public ServiceTest {
 protected:
  std::unique_ptr<Service> make_goodput(int gpus, double round = 60) {
    ServiceOptions o = options(gpus);
    o.policy = "goodput";
    o.goodput_round_seconds = round;
    o.api_url = "http://127.0.0.1:8080";
    auto b = std::make_unique<FakeBackend>();
    backend_ = b.get();
    return std::make_unique<Service>(o, std::move(b));
  }
  // An adaptive job of 1..max_members one-GPU members.
  int64_t submit_adaptive(Service& s, const std::string& tenant, const std::string& name,
                          int max_members, int min_members = 1) {
    const std::string spec = "name: " + name + "\ngang: {min: " + std::to_string(min_members) +
                             ", max: " + std::to_string(max_members) +
                             "}\nresources: {gpus: 1}\ncheckpoint_grace: 5s\n"
                             "adaptive: {batch: 128, max_batch: 4096, per_gpu: {min: 8, max: 64}}\n"
                             "command: [train]\n";
    return s.submit(as(tenant), job(spec), "", nullptr).row.id;
  }
  // The environment of job `id`'s latest launch.
  std::map<std::string, std::string> env_of(int64_t id) const {
    for (auto it = backend_->launches.rbegin(); it != backend_->launches.rend(); ++it) {
      if (it->job == static_cast<uint64_t>(id)) return {it->env.begin(), it->env.end()};
    }
    return {};
  }
  size_t members_of(int64_t id) const {
    for (auto it = backend_->launches.rbegin(); it != backend_->launches.rend(); ++it) {
      if (it->job == static_cast<uint64_t>(id)) return it->members.size();
    }
    return 0;
  }
  size_t launches_of(int64_t id) const {
    return static_cast<size_t>(
        std::count_if(backend_->launches.begin(), backend_->launches.end(),
                      [&](const LaunchSpec& l) { return l.job == static_cast<uint64_t>(id); }));
  }
  // A report of a job that scales well: its step time at `gpus` GPUs of 32 samples each, a
  // noisy gradient (large batches nearly as efficient as small ones), and its progress.
  static JobReport scaling_report(int gpus, double done = 100, double total = 1e6) {
    JobReport r;
    r.step = StepReport{1, gpus, 32, 0.2, 0.01};
    r.gradient = GradientStats{1.0, 500.0};
    r.progress = std::make_pair(done, total);
    return r;
  }
  static Caller admin() { return Caller{true, ""}; }
  void advance(Service& s, double seconds) {
    now_ += seconds;
    s.tick();
    s.tick();
  }
};

TEST_F(ServiceGoodput, AdaptiveJobsAreRefusedWithoutTheGoodputPolicy) {
  auto s = make(8);
  try {
    submit_adaptive(*s, "team-a", "adaptive", 8);
    FAIL() << "accepted an adaptive job under fair";
  } catch (const ServiceError& e) {
    EXPECT_EQ(e.kind(), ServiceError::kInvalid);
    EXPECT_EQ(e.field(), "adaptive");
    EXPECT_NE(std::string(e.what()).find("--policy goodput"), std::string::npos) << e.what();
  }
}

TEST_F(ServiceGoodput, ANewJobStartsAtOnceOnWhatItMayExploreAndIsToldItsBatch) {
  auto s = make_goodput(8);
  const int64_t id = submit_adaptive(*s, "team-a", "train", 8);
  advance(*s, 1);
  ASSERT_EQ(state(*s, id), JobState::kRunning);
  // Never reported: offered 4 x one member's GPUs (--goodput-explore), not all eight.
  EXPECT_EQ(members_of(id), 4u);
  const auto env = env_of(id);
  EXPECT_EQ(env.at("TESSERA_GPUS"), "4");
  EXPECT_EQ(env.at("TESSERA_NODES"), "1");
  // No step time known yet: the batch it was tuned for, split over its GPUs.
  EXPECT_EQ(env.at("TESSERA_BATCH_SIZE"), "128");
  EXPECT_EQ(env.at("TESSERA_MICRO_BATCH"), "32");
  EXPECT_EQ(env.at("TESSERA_ACCUM_STEPS"), "0");
  EXPECT_EQ(env.at("TESSERA_REPORT_URL"),
            "http://127.0.0.1:8080/v1/jobs/" + std::to_string(id) + "/report");
  // Its token speaks for its tenant, on this job only.
  const std::string token = env.at("TESSERA_REPORT_TOKEN");
  const auto caller = s->authenticate_report(token, id);
  ASSERT_TRUE(caller.has_value());
  EXPECT_EQ(caller->tenant, "team-a");
  EXPECT_FALSE(caller->admin);
  EXPECT_FALSE(s->authenticate_report(token, id + 1).has_value());
  EXPECT_FALSE(s->authenticate_report("", id).has_value());
  EXPECT_FALSE(s->authenticate(token).has_value());  // not a tenant token
}

TEST_F(ServiceGoodput, AJobThatReportsScalingIsResizedAtTheNextRoundAndRestartedLarger) {
  auto s = make_goodput(8);
  const int64_t id = submit_adaptive(*s, "team-a", "train", 8);
  advance(*s, 1);
  ASSERT_EQ(members_of(id), 4u);
  const JobReportView v = s->report(admin(), id, scaling_report(4));
  EXPECT_TRUE(v.profiled);
  EXPECT_EQ(v.gpus, 4);
  EXPECT_EQ(v.round_gpus, 4);
  EXPECT_GT(v.speedup, 3.0);
  EXPECT_GT(v.remaining_gpu_seconds, 0);
  EXPECT_EQ(v.global_batch, v.batch.batch(4));

  // Before the round is due nothing changes.
  advance(*s, 10);
  EXPECT_EQ(launches_of(id), 1u);
  // The round: it scales, and nothing else wants the GPUs, so it gets all eight; it is stopped
  // (checkpoint grace) and started again at eight, told its new batch.
  advance(*s, 60);
  EXPECT_EQ(launches_of(id), 2u) << s->job(admin(), id).row.message;
  EXPECT_EQ(members_of(id), 8u);
  EXPECT_EQ(state(*s, id), JobState::kRunning);
  const auto env = env_of(id);
  EXPECT_EQ(env.at("TESSERA_GPUS"), "8");
  EXPECT_GE(std::stoi(env.at("TESSERA_BATCH_SIZE")), 128);
  const auto events = s->job_events(admin(), id);
  bool said = false;
  for (const JobEvent& e : events) {
    said = said || e.message.find("resized by the goodput round: 4 -> 8 GPUs") != std::string::npos;
  }
  EXPECT_TRUE(said);
  const ServiceMetrics m = s->metrics();
  EXPECT_EQ(m.resizes, 1u);
  EXPECT_GE(m.goodput_rounds, 2u);
}

TEST_F(ServiceGoodput, ANewcomerGetsGpusFromARunningJobAndNoGpuIsEverOvercommitted) {
  auto s = make_goodput(8, 30);
  const int64_t a = submit_adaptive(*s, "team-a", "first", 8);
  advance(*s, 1);
  s->report(admin(), a, scaling_report(4));
  advance(*s, 31);
  ASSERT_EQ(members_of(a), 8u);
  s->report(admin(), a, scaling_report(8, 5000));
  // A second job arrives: a round runs at once, and the first job, having run long enough that
  // a restart costs it little, gives up GPUs the newcomer gains more from.
  advance(*s, 600);
  const int64_t b = submit_adaptive(*s, "team-b", "second", 8);
  for (int i = 0; i < 6; ++i) {
    advance(*s, 10);
    EXPECT_LE(8 - free_gpus(*s), 8.0);
    EXPECT_GE(free_gpus(*s), 0.0);
  }
  ASSERT_EQ(state(*s, b), JobState::kRunning) << s->job(admin(), b).pending_reason;
  EXPECT_EQ(state(*s, a), JobState::kRunning) << s->job(admin(), a).row.message;
  EXPECT_GT(members_of(b), 0u);
  EXPECT_LT(members_of(a), 8u);
  EXPECT_LE(members_of(a) + members_of(b), 8u);
}

TEST_F(ServiceGoodput, ARigidAdaptiveJobRunsAtItsSizeOnlyAndWaitsWithAReason) {
  auto s = make_goodput(4);
  const int64_t big = submit_adaptive(*s, "team-a", "rigid", 3, 3);
  advance(*s, 1);
  ASSERT_EQ(state(*s, big), JobState::kRunning);
  EXPECT_EQ(members_of(big), 3u);
  const int64_t other = submit_adaptive(*s, "team-b", "rigid2", 3, 3);
  advance(*s, 1);
  EXPECT_EQ(state(*s, other), JobState::kPending);
  EXPECT_EQ(launches_of(other), 0u);
  EXPECT_EQ(launches_of(big), 1u);
  const JobView waiting = s->job(admin(), other);
  EXPECT_EQ(waiting.reason_code, "GoodputRound");
  EXPECT_NE(waiting.pending_reason.find("goodput round"), std::string::npos)
      << waiting.pending_reason;
  for (int rank = 0; rank < 3; ++rank) backend_->exit(big, rank, 0);
  advance(*s, 61);
  EXPECT_EQ(state(*s, other), JobState::kRunning)
      << s->job(admin(), other).pending_reason << " / " << s->job(admin(), big).row.message
      << to_string(state(*s, big));
  EXPECT_EQ(members_of(other), 3u);
}

TEST_F(ServiceGoodput, ReportsThatCannotBeTrueAreRefusedNamingTheField) {
  auto s = make_goodput(8);
  const int64_t id = submit_adaptive(*s, "team-a", "train", 8);
  const auto refused = [&](const Caller& c, const JobReport& r, ServiceError::Kind kind,
                           const std::string& field) {
    try {
      s->report(c, id, r);
      ADD_FAILURE() << "accepted; expected " << field;
    } catch (const ServiceError& e) {
      EXPECT_EQ(e.kind(), kind) << e.what();
      EXPECT_EQ(e.field(), field) << e.what();
    }
  };
  // Not running yet.
  refused(admin(), scaling_report(1), ServiceError::kConflict, "");
  advance(*s, 1);
  ASSERT_EQ(state(*s, id), JobState::kRunning);
  JobReport r = scaling_report(4);
  r.step->sync_time = 1.0;  // longer than the step
  refused(admin(), r, ServiceError::kInvalid, "step.sync_seconds");
  r = scaling_report(16);  // more GPUs than its gang may ever have
  refused(admin(), r, ServiceError::kInvalid, "step.gpus");
  r = scaling_report(4);
  r.step->atomic_bsz = 65;  // more than adaptive.per_gpu.max
  refused(admin(), r, ServiceError::kInvalid, "step.per_gpu_batch");
  r = scaling_report(4);
  r.step->nodes = 2;  // this server has one node
  refused(admin(), r, ServiceError::kInvalid, "step.nodes");
  r = scaling_report(4);
  r.progress = std::make_pair(1.0, 0.0);
  refused(admin(), r, ServiceError::kInvalid, "progress.total");
  // A refused report records nothing, even its valid parts.
  r = scaling_report(4);
  r.gradient->var = -1;
  refused(admin(), r, ServiceError::kInvalid, "gradient.var");
  EXPECT_FALSE(s->report(admin(), id, JobReport{}).profiled);
  // Another tenant neither reports for it nor learns it exists.
  refused(Caller{false, "team-b"}, scaling_report(4), ServiceError::kForbidden, "");
  // A job that is not adaptive has nothing to report.
  const int64_t plain = submit_and_tick(*s, "team-a", "plain", 1);
  try {
    s->report(admin(), plain, scaling_report(1));
    ADD_FAILURE() << "a plain job's report was taken";
  } catch (const ServiceError& e) {
    EXPECT_EQ(e.field(), "adaptive");
  }
}

TEST_F(ServiceGoodput, TheReportTokenSurvivesARestart) {
  std::string token;
  int64_t id = 0;
  {
    auto s = make_goodput(8);
    id = submit_adaptive(*s, "team-a", "train", 8);
    advance(*s, 1);
    token = env_of(id).at("TESSERA_REPORT_TOKEN");
  }
  auto s = make_goodput(8);
  EXPECT_TRUE(s->authenticate_report(token, id).has_value());
}

}  // namespace
}  // namespace tessera
