// Accounting (issue 15): the usage report over a window, and the price table.
#include "model/accounting.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace tessera {
namespace {

RunRecord run(int64_t job, const std::string& tenant, double start, double end,
              const std::string& outcome, int64_t gpu_milli, int64_t preempted_by = -1) {
  RunRecord r;
  r.job = job;
  r.attempt = 1;
  r.tenant = tenant;
  r.queue = "/" + tenant;
  r.started = start;
  r.ended = end;
  r.outcome = outcome;
  r.gpu_milli["V100"] = gpu_milli;
  r.cpu_milli = 4000;
  r.preempted_by = preempted_by;
  return r;
}

TEST(Accounting, CountsTheTimeInsideTheWindowPreemptionsBothWaysAndWaits) {
  const double h = 3600;
  // Job 1 (team-a, 2 GPUs) ran 0..2h, was preempted by job 2 (team-b, 1 GPU, 2h..5h), and ran
  // again 6h..7h and succeeded; job 2 failed; job 3 (team-a) is still running from 4h.
  std::vector<RunRecord> runs = {run(1, "team-a", 0, 2 * h, "preempted", 2000, 2),
                                 run(2, "team-b", 2 * h, 5 * h, "failed", 1000),
                                 run(1, "team-a", 6 * h, 7 * h, "succeeded", 2000),
                                 run(3, "team-a", 4 * h, 8 * h, "running", 4000)};
  runs[1].attempt = 1;
  runs[2].attempt = 2;
  const std::vector<JobRecord> jobs = {{1, "team-a", "/team-a", "succeeded", -h, 7 * h},
                                       {2, "team-b", "/team-b", "failed", 1 * h, 5 * h},
                                       {3, "team-a", "/team-a", "running", 3 * h, -1}};
  // The window 1h..6.5h: job 1's first run counts 1h, its second 0.5h; job 3 counts 2.5h.
  const auto rows = usage_report(runs, jobs, 1 * h, 6.5 * h);
  ASSERT_EQ(rows.size(), 2u);
  const UsageRow& a = rows[0];
  const UsageRow& b = rows[1];
  EXPECT_EQ(a.tenant, "team-a");
  EXPECT_DOUBLE_EQ(a.gpu_hours.at("V100"), 2 * 1.0 + 2 * 0.5 + 4 * 2.5);
  EXPECT_DOUBLE_EQ(a.cpu_hours, 4 * (1.0 + 0.5 + 2.5));
  EXPECT_EQ(a.preempted, 1);  // job 1's run ended preempted at 2h, inside
  EXPECT_EQ(a.preemptor, 0);
  EXPECT_TRUE(a.jobs.empty());  // job 1 finished at 7h, outside
  EXPECT_EQ(a.started, 1);      // job 3 first started at 4h; job 1 before the window
  EXPECT_DOUBLE_EQ(a.mean_wait_hours(), 1.0);
  EXPECT_EQ(b.tenant, "team-b");
  EXPECT_DOUBLE_EQ(b.gpu_hours.at("V100"), 3.0);
  EXPECT_EQ(b.preemptor, 1);
  EXPECT_EQ(b.jobs.at("failed"), 1);
  EXPECT_DOUBLE_EQ(b.mean_wait_hours(), 1.0);
  // A window with nothing in it has no rows.
  EXPECT_TRUE(usage_report(runs, jobs, 20 * h, 21 * h).empty());
}

TEST(Accounting, PricesCostTheirTypesAndNameTheOnesWithout) {
  const auto dir = std::filesystem::temp_directory_path() / "tessera_prices_test";
  std::filesystem::create_directories(dir);
  const std::string good = (dir / "good.yaml").string();
  std::ofstream(good) << "V100: 2.5\ncpu_hour: 0.1\n";
  const PriceTable p = load_prices(good);
  UsageRow r;
  r.gpu_hours["V100"] = 4;
  r.gpu_hours["A100-80G"] = 1;
  r.cpu_hours = 10;
  std::vector<std::string> unpriced;
  EXPECT_DOUBLE_EQ(cost_of(r, p, unpriced), 4 * 2.5 + 10 * 0.1);
  EXPECT_EQ(unpriced, std::vector<std::string>{"A100-80G"});
  const std::string bad = (dir / "bad.yaml").string();
  std::ofstream(bad) << "V100: cheap\n";
  try {
    load_prices(bad);
    FAIL() << "a price that is not a number was taken";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("bad.yaml: V100"), std::string::npos) << e.what();
  }
  std::ofstream(bad) << "V100: -1\n";
  EXPECT_THROW(load_prices(bad), std::invalid_argument);
  std::ofstream(bad) << "- V100\n";
  EXPECT_THROW(load_prices(bad), std::invalid_argument);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tessera
