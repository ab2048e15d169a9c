#include "sim/generator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <sstream>
#include <vector>

namespace tessera {
namespace {

std::string jsonl_of(const Workload& w) {
  std::ostringstream out;
  write_jsonl(w, out);
  return out.str();
}

TEST(GeneratorTest, SameSeedSameWorkload) {
  GeneratorOptions opt;
  opt.seed = 42;
  const std::string a = jsonl_of(generate_workload(opt));
  EXPECT_EQ(a, jsonl_of(generate_workload(opt)));
  opt.seed = 43;
  EXPECT_NE(a, jsonl_of(generate_workload(opt)));
}

TEST(GeneratorTest, DefaultsGiveLoadAboutOneOn64Gpus) {
  const Workload w = generate_workload({});
  ASSERT_EQ(w.jobs.size(), 400u);
  EXPECT_EQ(w.tenants.size(), 4u);
  EXPECT_EQ(w.jobs.front().submit_time, 0);
  std::set<int32_t> sizes;
  std::set<TenantId> tenants;
  std::vector<double> durations;
  double gpu_seconds = 0;
  for (const JobSpec& j : w.jobs) {
    sizes.insert(j.min_members);
    tenants.insert(j.tenant);
    EXPECT_EQ(j.min_members, j.max_members);
    EXPECT_GE(j.work_seconds, 60);
    EXPECT_LE(j.work_seconds, 86400);
    EXPECT_EQ(j.duration_estimate, j.work_seconds);
    EXPECT_EQ(j.demand, (MemberDemand{1, 1000, 0, 0}));
    durations.push_back(j.work_seconds);
    gpu_seconds += j.work_seconds * j.min_members;
  }
  EXPECT_EQ(sizes, (std::set<int32_t>{1, 2, 4, 8, 16}));
  EXPECT_EQ(tenants.size(), 4u);
  std::nth_element(durations.begin(), durations.begin() + 200, durations.end());
  EXPECT_GT(durations[200], 900);
  EXPECT_LT(durations[200], 3600);
  // Offered load: GPU-seconds asked for over the GPU-seconds 64 GPUs offer while jobs arrive.
  const double load = gpu_seconds / (64.0 * w.jobs.back().submit_time);
  EXPECT_GT(load, 0.6);
  EXPECT_LT(load, 1.6);
}

TEST(GeneratorTest, RoundTripThroughJsonl) {
  GeneratorOptions opt;
  opt.seed = 7;
  opt.jobs = 200;
  opt.fraction_share_pct = 50;
  const Workload w = generate_workload(opt);
  const std::string text = jsonl_of(w);
  const Workload r = parse_workload(text, "gen.jsonl", TraceFormat::kJsonl, {});
  ASSERT_EQ(r.jobs.size(), w.jobs.size());
  size_t fractional = 0;
  for (size_t i = 0; i < w.jobs.size(); ++i) {
    const JobSpec& a = w.jobs[i];
    const JobSpec& b = r.jobs[i];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(w.tenants.name(a.tenant), r.tenants.name(b.tenant));
    EXPECT_EQ(a.priority, b.priority);
    EXPECT_EQ(a.submit_time, b.submit_time);
    EXPECT_EQ(a.min_members, b.min_members);
    EXPECT_EQ(a.max_members, b.max_members);
    EXPECT_EQ(a.demand, b.demand);
    EXPECT_EQ(a.work_seconds, b.work_seconds);
    EXPECT_EQ(a.duration_estimate, b.duration_estimate);
    EXPECT_EQ(a.restart_cost, b.restart_cost);
    EXPECT_EQ(a.checkpoint_interval, b.checkpoint_interval);
    fractional += a.demand.gpu_milli < 1000;
  }
  EXPECT_GT(fractional, 0u);
  EXPECT_EQ(jsonl_of(r), text);
}

TEST(GeneratorTest, PolluxModels) {
  GeneratorOptions opt;
  opt.jobs = 50;
  opt.pollux_models = true;
  const Workload w = generate_workload(opt);
  for (const JobSpec& j : w.jobs) {
    ASSERT_NE(j.model, kNoId);
    EXPECT_EQ(j.work_seconds, kUnknown);
    EXPECT_GT(j.batch_size, 0);
  }
  const std::string text = jsonl_of(w);
  const Workload r = parse_workload(text, "gen.jsonl", TraceFormat::kJsonl, {});
  EXPECT_EQ(jsonl_of(r), text);
}

TEST(GeneratorTest, RejectsBadOptions) {
  GeneratorOptions opt;
  opt.tenants = 0;
  EXPECT_THROW(generate_workload(opt), std::invalid_argument);
  opt = {};
  opt.gang_weights = {0, 0, 0, 0, 0};
  EXPECT_THROW(generate_workload(opt), std::invalid_argument);
}

}  // namespace
}  // namespace tessera
