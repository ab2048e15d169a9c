// The client's tables, from API JSON as the server sends it.
#include "apps/client_tables.h"

#include <gtest/gtest.h>

#include <sstream>

namespace tessera {
namespace {

nlohmann::json job(int64_t id, const std::string& name, const std::string& state, double gpus,
                   double submitted, double started = -1) {
  nlohmann::json j = {
      {"id", id},
      {"name", name},
      {"tenant", "team-a"},
      {"queue", "org/team-a"},
      {"priority_class", "research"},
      {"state", state},
      {"reason", state == "pending" ? nlohmann::json("Quota") : nlohmann::json()},
      {"pending_reason", nullptr},
      {"attempts", started >= 0 ? 1 : 0},
      {"submitted_at", submitted},
      {"started_at", started >= 0 ? nlohmann::json(started) : nlohmann::json()},
      {"finished_at", nullptr},
      {"spec", {{"resources", {{"gpus", gpus}}}, {"gang", {{"min", 2}, {"max", 2}}}}},
      {"allocation", nlohmann::json::array()}};
  if (started >= 0) {
    j["allocation"] = {{{"rank", 0}, {"node", "n1"}, {"gpus", {0}}, {"gpu_milli", 1000}},
                       {{"rank", 1}, {"node", "n2"}, {"gpus", {0}}, {"gpu_milli", 1000}}};
  }
  return j;
}

TEST(ClientTables, DurationsAreShortAndSigned) {
  EXPECT_EQ(short_duration(42.9), "42s");
  EXPECT_EQ(short_duration(312), "5m12s");
  EXPECT_EQ(short_duration(2 * 3600 + 5 * 60), "2h05m");
  EXPECT_EQ(short_duration(3 * 86400 + 4 * 3600), "3d04h");
  EXPECT_EQ(short_duration(-1), "-");
}

TEST(ClientTables, LongNamesDoNotBreakTheColumns) {
  const nlohmann::json jobs = {job(1, std::string(60, 'x'), "running", 4, 1000, 1100),
                               job(22, "short", "pending", 1, 1500)};
  const std::string table = job_table(jobs, 2000);
  std::vector<size_t> state_column;
  size_t start = 0;
  while (start < table.size()) {
    const size_t end = table.find('\n', start);
    const std::string line = table.substr(start, end - start);
    state_column.push_back(line.find(line.find("STATE") != std::string::npos     ? "STATE"
                                     : line.find("running") != std::string::npos ? "running"
                                                                                 : "pending"));
    start = end + 1;
  }
  ASSERT_EQ(state_column.size(), 3u) << table;
  EXPECT_EQ(state_column[0], state_column[1]) << table;
  EXPECT_EQ(state_column[1], state_column[2]) << table;
  EXPECT_NE(table.find("xxx..."), std::string::npos) << table;
  // GPUs are members x GPUs per member; nodes are counted from the placement.
  EXPECT_NE(table.find("org/team-a"), std::string::npos) << table;
  EXPECT_NE(table.find("Quota"), std::string::npos) << table;
  EXPECT_NE(table.find("     8     2"), std::string::npos) << table;
  EXPECT_NE(table.find("16m40s"), std::string::npos) << table;  // age of job 1
  EXPECT_NE(table.find("15m00s"), std::string::npos) << table;  // its elapsed time
}

// A job back in the queue (preempted or requeued) still carries its last start, but no time
// passes for it while it waits.
TEST(ClientTables, AJobWaitingAgainHasNoElapsedTime) {
  nlohmann::json waiting = job(7, "again", "pending", 1, 1000, 1100);
  waiting["allocation"] = nlohmann::json::array();
  const std::string table = job_table(nlohmann::json::array({waiting}), 2000);
  const std::string row = table.substr(table.find('\n') + 1);
  EXPECT_TRUE(row.ends_with(" -       -\n")) << table;  // ELAPSED and LIMIT
  EXPECT_EQ(row.find("15m00s"), std::string::npos) << table;
  const std::string page = job_page(waiting, 2000);
  EXPECT_NE(page.find("Elapsed:        -\n"), std::string::npos) << page;
}

TEST(ClientTables, SortKeysOrderTheRowsAndAnUnknownKeyIsRefused) {
  nlohmann::json jobs = {job(1, "b", "running", 1, 1000, 1100), job(2, "a", "pending", 4, 1500),
                         job(3, "c", "pending", 2, 1200)};
  sort_jobs(jobs, "gpus", 2000);
  EXPECT_EQ(jobs[0]["id"], 2);
  sort_jobs(jobs, "name", 2000);
  EXPECT_EQ(jobs[0]["name"], "a");
  sort_jobs(jobs, "age", 2000);
  EXPECT_EQ(jobs[0]["id"], 1);
  EXPECT_THROW(sort_jobs(jobs, "colour", 2000), std::invalid_argument);
}

TEST(ClientTables, TheNodeTableNamesTheJobsOnEachGpu) {
  const nlohmann::json nodes = {
      {{"name", "n1"},
       {"gpu_type", "H100"},
       {"gpus",
        {{{"index", 0}, {"free_milli", 0}, {"jobs", {7}}},
         {{"index", 1}, {"free_milli", 500}, {"jobs", {8, 9}}},
         {{"index", 2}, {"free_milli", 1000}, {"jobs", nlohmann::json::array()}}}},
       {"cpu_milli", 64000},
       {"free_cpu_milli", 32000},
       {"mem_mib", 1024},
       {"free_mem_mib", 512}}};
  const std::string table = node_table(nodes);
  EXPECT_NE(table.find("NODE"), std::string::npos);
  EXPECT_NE(table.find("8,9"), std::string::npos) << table;
  EXPECT_NE(table.find("0.5"), std::string::npos) << table;
  EXPECT_NE(table.find("32/64"), std::string::npos) << table;
}

TEST(ClientTables, TheQueueTableMarksBorrowersAndQueuesOverTheirShare) {
  const auto queue = [](const std::string& path, double guarantee, double holds, double share) {
    return nlohmann::json{
        {"path", path},          {"weight", 1},         {"guarantee_gpus", guarantee},
        {"limit_gpus", nullptr}, {"holds_gpus", holds}, {"fair_share_gpus", share},
        {"decayed_gpus", 1.5},   {"pending_jobs", 0},   {"running_jobs", 1}};
  };
  const std::string table = queue_table(
      {queue("/", 0, 18, 24), queue("a", 4, 6, 8), queue("b", 4, 10, 8), queue("c", 4, 2, 8)});
  const auto row = [&](const std::string& name) {
    const size_t at = table.find("\n" + name + " ");
    return table.substr(at + 1, table.find('\n', at + 1) - at - 1);
  };
  EXPECT_TRUE(row("a").ends_with("borrowing")) << table;
  EXPECT_TRUE(row("b").ends_with("borrowing, over-share")) << table;
  EXPECT_TRUE(row("c").ends_with("-")) << table;
  EXPECT_TRUE(row("/").ends_with("-")) << table;  // the root lends to no one
  EXPECT_NE(table.find("DECAYED"), std::string::npos);
  EXPECT_NE(row("a").find("1.5"), std::string::npos) << table;
}

TEST(ClientTables, UsageShowsHoursByTypeJobsPreemptionsAndCostWithATotal) {
  const nlohmann::json rows =
      nlohmann::json::array({{{"tenant", "team-a"},
                              {"queue", "research/team-a"},
                              {"gpu_hours", {{"A100-80G", 2.0}, {"V100", 10.0}}},
                              {"cpu_hours", 5.0},
                              {"jobs", {{"succeeded", 3}, {"failed", 1}}},
                              {"started", 4},
                              {"mean_wait_hours", 0.5},
                              {"preempted", 2},
                              {"preemptor", 0}},
                             {{"tenant", "team-b"},
                              {"queue", "team-b"},
                              {"gpu_hours", {{"V100", 1.0}}},
                              {"cpu_hours", 0.0},
                              {"jobs", nlohmann::json::object()},
                              {"started", 0},
                              {"mean_wait_hours", 0.0},
                              {"preempted", 0},
                              {"preemptor", 2}}});
  PriceTable prices;
  prices.gpu_hour["V100"] = 2.0;
  prices.cpu_hour = 0.1;
  std::vector<std::string> unpriced;
  const std::string table = usage_table(rows, &prices, unpriced);
  EXPECT_NE(table.find("A100-80G 2.00, V100 10.00"), std::string::npos) << table;
  EXPECT_NE(table.find("1 failed, 3 ok"), std::string::npos) << table;
  EXPECT_NE(table.find("30m"), std::string::npos) << table;    // mean wait
  EXPECT_NE(table.find("20.50"), std::string::npos) << table;  // 10 x 2.0 + 5 x 0.1
  EXPECT_NE(table.find("TOTAL"), std::string::npos) << table;
  EXPECT_NE(table.find("13.00"), std::string::npos) << table;  // GPU-hours in all
  EXPECT_EQ(unpriced, std::vector<std::string>{"A100-80G"});
  std::vector<std::string> none;
  EXPECT_EQ(usage_table(rows, nullptr, none).find("COST"), std::string::npos);
  const std::string csv = usage_csv(rows, &prices, unpriced);
  EXPECT_NE(csv.find("team-a,research/team-a,A100-80G,2.0000,5.0000,3,1,0,0,4,0.5000,2,0,0.5000"),
            std::string::npos)
      << csv;
  EXPECT_NE(csv.find("team-a,research/team-a,V100,10.0000,0.0000,0,0,0,0,0,0.0000,0,0,20.0000"),
            std::string::npos)
      << csv;
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 4);
}

TEST(ClientTables, UsageShowsEnergyAndCarbonAndADashWhereUnknown) {
  const nlohmann::json rows = nlohmann::json::array(
      {{{"tenant", "team-a"},
        {"queue", "team-a"},
        {"gpu_hours", {{"V100", 2.0}}},
        {"energy_kwh", 12.5},
        {"carbon_kg", 3.25}},
       {{"tenant", "team-b"}, {"queue", "team-b"}, {"gpu_hours", {{"V100", 1.0}}}}});
  PriceTable prices;
  prices.gpu_hour["V100"] = 2.0;
  prices.kwh = 0.2;
  std::vector<std::string> unpriced;
  const std::string table = usage_table(rows, &prices, unpriced);
  std::istringstream lines(table);
  std::string header, a, b, total;
  std::getline(lines, header);
  std::getline(lines, a);
  std::getline(lines, b);
  std::getline(lines, total);
  EXPECT_NE(header.find("KWH"), std::string::npos) << table;
  EXPECT_NE(header.find("CO2-KG"), std::string::npos) << table;
  EXPECT_NE(a.find("12.50"), std::string::npos) << table;
  EXPECT_NE(a.find("3.25"), std::string::npos) << table;
  EXPECT_NE(a.find("6.50"), std::string::npos) << table;  // 2 x 2.0 + 12.5 x 0.2
  // team-b's energy and carbon are unknown: "-", not 0 (the rows differ only there).
  auto dashes = [](const std::string& line) {
    std::istringstream words(line);
    int n = 0;
    for (std::string w; words >> w;) n += w == "-" ? 1 : 0;
    return n;
  };
  EXPECT_EQ(dashes(b), dashes(a) + 2) << table;
  EXPECT_NE(b.find("2.00"), std::string::npos) << table;  // GPU-hours only
  EXPECT_NE(total.find("12.50"), std::string::npos) << table;
  const std::string csv = usage_csv(rows, nullptr, unpriced);
  EXPECT_NE(csv.find("cost,energy_kwh,carbon_kg,user\n"), std::string::npos) << csv;
  EXPECT_NE(csv.find(",,12.5000,3.2500,\n"), std::string::npos) << csv;
  EXPECT_TRUE(csv.ends_with("0,0,,,,\n")) << csv;  // team-b: no cost, energy unknown, no user
}

// Every count of finished jobs shows, however many states they ended in, and each header
// stands over its column.
TEST(ClientTables, UsageShowsEveryFinishedCountUnderAlignedHeaders) {
  const nlohmann::json rows = nlohmann::json::array(
      {{{"tenant", "team-a"},
        {"queue", "research/team-a"},
        {"gpu_hours", {{"V100", 2.0}}},
        {"cpu_hours", 123456.5},
        {"jobs", {{"cancelled", 1}, {"failed", 1}, {"succeeded", 13}, {"timeout", 1}}},
        {"started", 16},
        {"mean_wait_hours", 0.25},
        {"preempted", 3},
        {"preemptor", 1},
        {"energy_kwh", 1234567.5},
        {"carbon_kg", 1.25}}});
  PriceTable prices;
  prices.gpu_hour["V100"] = 2.0;
  const std::vector<const PriceTable*> price_tables = {nullptr, &prices};
  for (const PriceTable* p : price_tables) {
    std::vector<std::string> unpriced;
    const std::string table = usage_table(rows, p, unpriced);
    std::istringstream lines(table);
    std::string header, row;
    std::getline(lines, header);
    std::getline(lines, row);
    EXPECT_NE(row.find("1 cancelled, 1 failed, 13 ok, 1 timeout "), std::string::npos) << table;
    // Text columns start under their header; number columns end under it.
    const auto starts_under = [&](const std::string& title, const std::string& cell) {
      EXPECT_EQ(header.find(title), row.find(cell)) << title << "\n" << table;
    };
    const auto ends_under = [&](const std::string& title, const std::string& cell) {
      EXPECT_EQ(header.find(title) + title.size(), row.find(cell) + cell.size()) << title << "\n"
                                                                                 << table;
    };
    starts_under("QUEUE", "research/team-a");
    starts_under("GPU-HOURS", "V100 2.00");
    starts_under("FINISHED", "1 cancelled");
    ends_under("CPU-H", "123456.50");
    ends_under("STARTED", " 16");
    ends_under("MEAN-WAIT", "15m00s");
    ends_under("PREEMP", " 3");
    ends_under("KWH", "1234567.50");
    ends_under("CO2-KG", "1.25");
    if (p != nullptr) ends_under("COST", "4.00");
  }
}

}  // namespace
}  // namespace tessera
