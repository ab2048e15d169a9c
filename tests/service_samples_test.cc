// The dashboard's data: the history samples the server keeps (GET /v1/history) and the job
// filters its tables use.
#include <gtest/gtest.h>

#include "control/dashboard_samples.h"
#include "service_fixture.h"
#include "store/store.h"

namespace tessera {
namespace {

HistorySample sample(double t, double gpus, uint64_t starts,
                     std::vector<HistorySample::Tenant> ts) {
  HistorySample s;
  s.t = t;
  s.interval_s = 10;
  s.gpus_total = 8;
  s.gpus_allocated = gpus;
  s.starts = starts;
  s.tenants = std::move(ts);
  return s;
}

TEST(HistoryLog, KeepsItsWindowAndAveragesBucketsWithMissingEntriesAsZero) {
  HistoryLog log(100);
  log.append(sample(10, 2, 1, {{"a", 2, 0, 1}}));
  log.append(sample(20, 4, 3, {{"a", 2, 0, 1}, {"b", 2, 1, 1}}));
  log.append(sample(20, 8, 0, {}));  // not later than the last: ignored
  log.append(sample(30, 6, 0, {{"b", 6, 0, 2}}));
  ASSERT_EQ(log.size(), 3u);
  // Raw: a step no wider than a sample.
  const auto raw = log.query(0, 1000, 10);
  ASSERT_EQ(raw.size(), 3u);
  EXPECT_EQ(raw[1].gpus_allocated, 4);
  // Buckets of 40 s: [0, 40) holds all three.
  const auto wide = log.query(0, 1000, 40);
  ASSERT_EQ(wide.size(), 1u);
  EXPECT_DOUBLE_EQ(wide[0].gpus_allocated, 4);  // (2 + 4 + 6) / 3
  EXPECT_EQ(wide[0].starts, 4u);                // a counter adds up
  EXPECT_DOUBLE_EQ(wide[0].interval_s, 30);
  EXPECT_DOUBLE_EQ(wide[0].t, 30);
  EXPECT_NEAR(wide[0].decisions_per_s(), 4.0 / 30, 1e-12);
  ASSERT_EQ(wide[0].tenants.size(), 2u);
  EXPECT_DOUBLE_EQ(wide[0].tenants[0].gpus, 4.0 / 3);  // a: 2, 2, absent
  EXPECT_DOUBLE_EQ(wide[0].tenants[1].gpus, 8.0 / 3);  // b: absent, 2, 6
  // since/until bound what is read.
  EXPECT_EQ(log.query(15, 25, 10).size(), 1u);
  // A sample 200 s later pushes out everything older than the window.
  log.append(sample(230, 0, 0, {}));
  EXPECT_EQ(log.size(), 1u);
}

TEST(HistoryLog, ASampleHasAtMostTheCapOfEntriesAndTheRestIsAddedUp) {
  HistorySample s;
  double total = 0;
  for (size_t k = 0; k < kHistoryMaxEntries + 10; ++k) {
    s.tenants.push_back({"t" + std::to_string(k), static_cast<double>(k), 0, 0});
    total += static_cast<double>(k);
  }
  cap_entries(s);
  ASSERT_EQ(s.tenants.size(), kHistoryMaxEntries);
  EXPECT_EQ(s.tenants.back().name, "(other)");
  double sum = 0;
  for (const auto& t : s.tenants) sum += t.gpus;
  EXPECT_DOUBLE_EQ(sum, total);
  EXPECT_EQ(s.tenants.front().gpus, static_cast<double>(kHistoryMaxEntries + 9));  // largest kept
  // And a sample survives its JSON form unchanged.
  const HistorySample back = history_sample_from_json(to_json(s));
  EXPECT_EQ(to_json(back), to_json(s));
}

using ServiceHistory = ServiceTest;

TEST_F(ServiceHistory, SamplesEveryIntervalWhatEachTenantHoldsAndKeepsThemAcrossARestart) {
  auto s = make(8);
  submit_and_tick(*s, "team-a", "a", 3);
  submit_and_tick(*s, "team-b", "b", 2);
  for (int k = 0; k < 6; ++k) {
    now_ += 5;
    s->tick();
  }
  const Caller admin{true, ""};
  std::vector<HistorySample> got = s->history(admin, 0, now_, 1);
  // 32 s since the service started: a sample every 10 s of its clock.
  ASSERT_EQ(got.size(), 3u);
  for (size_t k = 1; k < got.size(); ++k) EXPECT_NEAR(got[k].t - got[k - 1].t, 10, 1e-9);
  const HistorySample& last = got.back();
  EXPECT_EQ(last.gpus_total, 8);
  EXPECT_EQ(last.gpus_allocated, 5);
  EXPECT_EQ(last.running_jobs, 2);
  ASSERT_EQ(last.tenants.size(), 2u);
  uint64_t starts = 0;
  for (const HistorySample& x : got) starts += x.starts;
  EXPECT_EQ(starts, 2u);  // each start counted once, in the interval it happened
  bool queue_seen = false;
  for (const auto& q : last.queues) queue_seen = queue_seen || q.path == "team-a";
  EXPECT_TRUE(queue_seen);

  // A tenant sees the totals, its own entry and its own queue only.
  const std::vector<HistorySample> mine = s->history(Caller{false, "team-b"}, 0, now_, 1);
  ASSERT_EQ(mine.size(), got.size());
  ASSERT_EQ(mine.back().tenants.size(), 1u);
  EXPECT_EQ(mine.back().tenants[0].name, "team-b");
  EXPECT_EQ(mine.back().tenants[0].gpus, 2);
  for (const auto& q : mine.back().queues) EXPECT_EQ(q.path, "team-b");
  EXPECT_EQ(mine.back().gpus_allocated, 5);

  // A restart reads the samples back; the next one follows them.
  s.reset();
  now_ += 60;
  s = make(8);
  std::vector<HistorySample> again = s->history(admin, 0, now_, 1);
  ASSERT_EQ(again.size(), got.size());
  EXPECT_EQ(to_json(again.back()), to_json(got.back()));
  now_ += 11;
  s->tick();
  EXPECT_EQ(s->history(admin, 0, now_, 1).size(), got.size() + 1);
}

TEST_F(ServiceHistory, TheDatabaseKeepsOnlyTheWindow) {
  ServiceOptions o = options(4);
  o.history_window_seconds = 60;
  auto s = std::make_unique<Service>(o, std::make_unique<FakeBackend>());
  for (int k = 0; k < 30; ++k) {
    now_ += 10;
    s->tick();
  }
  EXPECT_LE(s->history(Caller{true, ""}, 0, now_, 1).size(), 7u);
  s.reset();
  Store db(o.db_path);
  const auto rows = db.history(0);
  EXPECT_GE(rows.size(), 6u);
  EXPECT_LE(rows.size(), 7u);
  EXPECT_GE(rows.front().first, now_ - 60);
}

TEST_F(ServiceHistory, BeyondTheWindowHourlyAveragesAnswerAndSurviveARestart) {
  ServiceOptions o = options(8);
  o.history_interval_seconds = 60;
  o.history_window_seconds = 3600;  // fine samples for an hour; hourly ones for longer
  now_ = 7200;                      // on an hour: the first whole hour is [7200, 10800)
  auto s = std::make_unique<Service>(o, std::make_unique<FakeBackend>());
  s->submit(as("team-a"), job("name: a\nresources: {gpus: 3}\ncommand: [x]\n"), "", nullptr);
  for (int k = 0; k < 5 * 60 - 1; ++k) {  // five hours but a minute, a sample a minute
    now_ += 60;
    s->tick();
  }
  const Caller admin{true, ""};
  const auto check = [&](Service& svc) {
    const std::vector<HistorySample> got = svc.history(admin, 7200, now_, 3600);
    // Five hours: four before the fine window (hourly), the last from the fine samples.
    ASSERT_EQ(got.size(), 5u);
    uint64_t starts = 0;
    for (const HistorySample& h : got) {
      EXPECT_DOUBLE_EQ(h.gpus_allocated, 3) << h.t;  // a gauge is the hour's mean
      EXPECT_NEAR(h.interval_s, 3600, 60) << h.t;
      starts += h.starts;
      ASSERT_EQ(h.tenants.size(), 1u);
      EXPECT_EQ(h.tenants[0].name, "team-a");
    }
    EXPECT_EQ(starts, 1u);  // a counter is the hour's sum: the one start, once
    EXPECT_LT(got.front().t, now_ - 3600);
    // A tenant sees its own entries in them too, and not another's.
    for (const HistorySample& h : svc.history(Caller{false, "team-b"}, 7200, now_, 3600)) {
      EXPECT_TRUE(h.tenants.empty());
      EXPECT_DOUBLE_EQ(h.gpus_allocated, 3);
    }
  };
  check(*s);
  s.reset();
  s = std::make_unique<Service>(o, std::make_unique<FakeBackend>());
  check(*s);
}

TEST_F(ServiceHistory, NoSamplesWhenTheIntervalIsZero) {
  ServiceOptions o = options(4);
  o.history_interval_seconds = 0;
  auto s = std::make_unique<Service>(o, std::make_unique<FakeBackend>());
  now_ += 100;
  s->tick();
  EXPECT_TRUE(s->history(Caller{true, ""}, 0, now_, 1).empty());
}

TEST_F(ServiceTest, JobsFilterByQueueClassAndReason) {
  auto s = make_with_queues(4, R"(queues:
  - name: research
    queues:
      - name: nlp
      - name: vision
  - name: ops
)");
  const int64_t a = submit_and_tick(*s, "nlp", "a", 4);
  const int64_t b = s->submit(as("vision"),
                              job("name: b\npriority_class: best-effort\nresources: {gpus: 2}\n"
                                  "command: [x]\n"),
                              "", nullptr)
                        .row.id;
  const int64_t c = submit_and_tick(*s, "ops", "c", 1);
  const Caller admin{true, ""};
  const auto ids = [&](JobFilter f) {
    std::vector<int64_t> out;
    for (const JobView& v : s->jobs(admin, f)) out.push_back(v.row.id);
    return out;
  };
  JobFilter f;
  f.queue = "research";
  EXPECT_EQ(ids(f), (std::vector<int64_t>{a, b}));
  f.queue = "research/vision";
  EXPECT_EQ(ids(f), (std::vector<int64_t>{b}));
  f.queue = "research/vis";  // a prefix of a name is not its parent
  EXPECT_TRUE(ids(f).empty());
  f = {};
  f.priority_class = "best-effort";
  EXPECT_EQ(ids(f), (std::vector<int64_t>{b}));
  f = {};
  const std::string reason = s->job(admin, c).reason_code;
  ASSERT_FALSE(reason.empty());  // c waits (a holds every GPU)
  f.reason = reason;
  const std::vector<int64_t> waiting = ids(f);
  EXPECT_NE(std::find(waiting.begin(), waiting.end(), c), waiting.end());
  EXPECT_EQ(std::find(waiting.begin(), waiting.end(), a), waiting.end());
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

// A job retention moved to the database is found by the class it ran at, its queue's default
// when it named none, as it was while in memory.
TEST_F(ServiceTest, AClassFilterFindsAnEvictedJobByItsQueuesDefaultClass) {
  ServiceOptions o = options(4);
  o.retain_finished_seconds = 0;
  auto b = std::make_unique<FakeBackend>();
  backend_ = b.get();
  auto s = std::make_unique<Service>(o, std::move(b));
  const int64_t id = submit_and_tick(*s, "lab", "a", 1);
  const Caller admin{true, ""};
  JobFilter f;
  f.priority_class = s->job(admin, id).priority_class;
  ASSERT_FALSE(f.priority_class.empty());
  now_ += 10;
  backend_->exit(id, 0, 0);
  s->tick();
  now_ += 120;  // retention evicts at most once a minute
  s->tick();
  ASSERT_GE(s->metrics().jobs_evicted, 1u);
  const std::vector<JobView> found = s->jobs(admin, f);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].row.id, id);
}

}  // namespace
}  // namespace tessera
