// Accounting: the usage report over a window, and the price table.
#include "model/accounting.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "model/accounting_json.h"

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
  const std::vector<JobRecord> jobs = {{1, "team-a", "/team-a", "succeeded", -h, 7 * h, "alice"},
                                       {2, "team-b", "/team-b", "failed", 1 * h, 5 * h, ""},
                                       {3, "team-a", "/team-a", "running", 3 * h, -1, "bob"}};
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

// By user: the same runs split by who submitted each job, the preemptor's row by its user too.
TEST(Accounting, ByUserSplitsATenantsRowByWhoSubmittedEachJob) {
  const double h = 3600;
  std::vector<RunRecord> runs = {run(1, "team-a", 0, 2 * h, "preempted", 2000, 3),
                                 run(2, "team-a", 0, 4 * h, "succeeded", 1000),
                                 run(3, "team-a", 2 * h, 4 * h, "succeeded", 1000)};
  runs[0].user = "alice";
  runs[1].user = "bob";
  const std::vector<JobRecord> jobs = {{1, "team-a", "/team-a", "pending", 0, -1, "alice"},
                                       {2, "team-a", "/team-a", "succeeded", 0, 4 * h, "bob"},
                                       {3, "team-a", "/team-a", "succeeded", 0, 4 * h, ""}};
  const auto rows = usage_report(runs, jobs, 0, 5 * h, nullptr, /*by_user=*/true);
  ASSERT_EQ(rows.size(), 3u);  // by (tenant, queue, user): "" (the tenant's token) first
  EXPECT_EQ(rows[0].user, "");
  EXPECT_DOUBLE_EQ(rows[0].total_gpu_hours(), 2);
  EXPECT_EQ(rows[0].preemptor, 1);  // job 3 preempted alice's
  EXPECT_EQ(rows[1].user, "alice");
  EXPECT_DOUBLE_EQ(rows[1].total_gpu_hours(), 4);
  EXPECT_EQ(rows[1].preempted, 1);
  EXPECT_EQ(rows[2].user, "bob");
  EXPECT_EQ(rows[2].jobs.at("succeeded"), 1);
  const auto whole = usage_report(runs, jobs, 0, 5 * h);
  ASSERT_EQ(whole.size(), 1u);
  EXPECT_DOUBLE_EQ(whole[0].total_gpu_hours(), 10);
  EXPECT_EQ(whole[0].user, "");
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

TEST(Accounting, EnergyIsEachRunsDrawOverItsTimeInTheWindowWithItsCarbon) {
  const double h = 3600;
  // team-a: 2 GPUs at 500 W from 0 to 2h, then a run with no estimate; team-b: 250 W, 1h..3h.
  std::vector<RunRecord> runs = {run(1, "team-a", 0, 2 * h, "succeeded", 2000),
                                 run(2, "team-a", 0, 2 * h, "succeeded", 1000),
                                 run(3, "team-b", 1 * h, 3 * h, "running", 1000)};
  runs[0].gpu_watts = 500;
  runs[2].gpu_watts = 250;
  // 100 g/kWh in the first hour, 400 after.
  const CarbonIntensity carbon({{0, 100}, {h, 400}}, CarbonIntensity::TimeBase::kAbsolute);
  const auto rows = usage_report(runs, {}, 0.5 * h, 2.5 * h, &carbon);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_NEAR(rows[0].energy_kwh, 0.5 * 1.5, 1e-9);  // 500 W over 1.5 h of the window
  EXPECT_NEAR(rows[0].carbon_kg, (0.25 * 100 + 0.5 * 400) / 1000, 1e-9);
  EXPECT_NEAR(rows[1].energy_kwh, 0.25 * 1.5, 1e-9);
  EXPECT_NEAR(rows[1].carbon_kg, 0.375 * 400 / 1000, 1e-9);
  // Without a series: energy, but carbon unknown (absent from the JSON).
  const auto plain = usage_report(runs, {}, 0, 3 * h);
  EXPECT_NEAR(plain[0].energy_kwh, 1.0, 1e-9);
  EXPECT_EQ(plain[0].carbon_kg, -1);
  auto j = usage_row_json<nlohmann::json>(plain[0]);
  EXPECT_FALSE(j.contains("carbon_kg"));
  EXPECT_NEAR(usage_row_from_json(j).energy_kwh, 1.0, 1e-9);
  // A row read from JSON without energy (a simulation's) has it unknown, not 0.
  j.erase("energy_kwh");
  EXPECT_EQ(usage_row_from_json(j).energy_kwh, -1);
}

TEST(Accounting, AnEnergyPriceCostsTheRowsKilowattHours) {
  const auto dir = std::filesystem::temp_directory_path() / "tessera-energy-prices";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "prices.yaml").string();
  std::ofstream(path) << "V100: 2.0\nkwh: 0.15\n";
  const PriceTable p = load_prices(path);
  EXPECT_DOUBLE_EQ(p.kwh, 0.15);
  EXPECT_TRUE(p.gpu_hour.find("kwh") == p.gpu_hour.end());
  UsageRow r;
  r.gpu_hours["V100"] = 3;
  r.energy_kwh = 10;
  std::vector<std::string> unpriced;
  EXPECT_DOUBLE_EQ(cost_of(r, p, unpriced), 3 * 2.0 + 10 * 0.15);
  r.energy_kwh = -1;  // unknown: no energy cost
  EXPECT_DOUBLE_EQ(cost_of(r, p, unpriced), 3 * 2.0);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tessera
