// Datasets in `tessera serve` (docs/data.md, "In tessera serve"): a job naming a dataset starts
// once the server's cache holds it, staged by the operator's command (a real shell here, gated
// by files the test creates), and the datasets of waiting jobs are staged ahead.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>

#include "cli_util.h"
#include "model/dataset_name.h"
#include "service_fixture.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

class ServiceDatasets : public ServiceTest {
 protected:
  // A staging command that waits for GATE/NAME.go, fails with 3 if GATE/NAME.fail exists, and
  // else writes 1 MB into the dataset's directory.
  std::unique_ptr<Service> make_cached(int gpus, double capacity_gb = 0, int prestage = 1) {
    fs::create_directories(gate_);
    ServiceOptions o = options(gpus);
    o.dataset_dir = cache_;
    o.stage_command = "while [ ! -e '" + gate_ +
                      "'/\"$TESSERA_DATASET.go\" ]; do sleep 0.01; done; "
                      "if [ -e '" +
                      gate_ +
                      "'/\"$TESSERA_DATASET.fail\" ]; then echo no; exit 3; fi; "
                      "head -c 1000000 /dev/zero > \"$TESSERA_DATASET_DIR/data\"";
    o.dataset_cache_gb = capacity_gb;
    o.prestage_datasets = prestage;
    auto b = std::make_unique<FakeBackend>();
    backend_ = b.get();
    return std::make_unique<Service>(o, std::move(b));
  }
  void open_gate(const std::string& name) { std::ofstream(gate_ + "/" + name + ".go") << "\n"; }
  void fail_gate(const std::string& name) {
    std::ofstream(gate_ + "/" + name + ".fail") << "\n";
    open_gate(name);
  }
  int64_t submit(Service& s, const std::string& name, const std::string& dataset, int gpus = 1) {
    const std::string spec = "name: " + name + "\nresources: {gpus: " + std::to_string(gpus) +
                             "}\ndataset: " + dataset + "\ncommand: [x]\n";
    return s.submit(as("team-a"), job(spec), "", nullptr).row.id;
  }
  // Ticks (a second of service time each) until `done` holds; the staging shells run for real,
  // so this also waits a little wall time between ticks (a bound only against a hang).
  template <class Pred>
  bool tick_until(Service& s, Pred done) {
    for (int i = 0; i < 2000; ++i) {
      now_ += 1;
      s.tick();
      if (done()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
  std::map<std::string, std::string> env_of(int64_t id) const {
    for (auto it = backend_->launches.rbegin(); it != backend_->launches.rend(); ++it) {
      if (it->job == static_cast<uint64_t>(id)) return {it->env.begin(), it->env.end()};
    }
    return {};
  }
  static const DatasetCache::Entry* entry(const Service& s, const std::string& name,
                                          std::vector<DatasetCache::Entry>& keep) {
    keep = s.datasets();
    for (const DatasetCache::Entry& e : keep) {
      if (e.name == name) return &e;
    }
    return nullptr;
  }
  std::string reason(Service& s, int64_t id) { return s.job(Caller{true, ""}, id).reason_code; }

  std::string gate_ = dir_.file("gate");
  std::string cache_ = dir_.file("datasets");
};

TEST_F(ServiceDatasets, AJobWaitsPlacedWhileItsDatasetIsStagedThenStartsWithItsDirectory) {
  auto s = make_cached(8);
  const int64_t id = submit(*s, "train", "cifar10", 2);
  now_ += 1;
  s->tick();
  s->tick();
  // Placed (its GPUs held) but not started: the dataset is being staged.
  EXPECT_EQ(state(*s, id), JobState::kPending);
  EXPECT_EQ(reason(*s, id), "Staging");
  EXPECT_NE(s->job(Caller{true, ""}, id).pending_reason.find("dataset cifar10"), std::string::npos);
  EXPECT_DOUBLE_EQ(free_gpus(*s), 6);
  EXPECT_TRUE(backend_->launches.empty());
  std::vector<DatasetCache::Entry> keep;
  ASSERT_NE(entry(*s, "cifar10", keep), nullptr);
  EXPECT_EQ(entry(*s, "cifar10", keep)->state, DatasetCache::State::kStaging);
  open_gate("cifar10");
  ASSERT_TRUE(tick_until(*s, [&] { return state(*s, id) == JobState::kRunning; }));
  const auto env = env_of(id);
  EXPECT_EQ(env.at("TESSERA_DATASET"), "cifar10");
  EXPECT_EQ(env.at("TESSERA_DATASET_DIR"), cache_ + "/cifar10");
  EXPECT_EQ(fs::file_size(cache_ + "/cifar10/data"), 1000000u);
  EXPECT_TRUE(fs::exists(cache_ + "/cifar10/.tessera-dataset"));
  const DatasetCache::Entry* e = entry(*s, "cifar10", keep);
  EXPECT_EQ(e->state, DatasetCache::State::kReady);
  EXPECT_NEAR(e->size_gb, 0.001, 1e-6);  // measured on disk, not the declared 0.163
  EXPECT_EQ(e->holders, 1);
  // Another job on the same dataset starts at its first cycle.
  const int64_t again = submit(*s, "again", "cifar10");
  now_ += 1;
  s->tick();
  EXPECT_EQ(state(*s, again), JobState::kRunning);
  EXPECT_EQ(s->metrics().stagings_ok, 1u);
}

TEST_F(ServiceDatasets, AWaitingJobsDatasetIsStagedAheadSoItStartsAtOnce) {
  auto s = make_cached(1);
  const int64_t first = submit_and_tick(*s, "team-a", "first", 1);
  ASSERT_EQ(state(*s, first), JobState::kRunning);
  const int64_t next = submit(*s, "next", "imagenet");
  now_ += 1;
  s->tick();
  // It waits for the GPU, and its dataset is already being staged (ahead of any placement).
  EXPECT_EQ(state(*s, next), JobState::kPending);
  EXPECT_NE(reason(*s, next), "Staging");
  std::vector<DatasetCache::Entry> keep;
  ASSERT_NE(entry(*s, "imagenet", keep), nullptr);
  EXPECT_EQ(entry(*s, "imagenet", keep)->state, DatasetCache::State::kStaging);
  EXPECT_TRUE(entry(*s, "imagenet", keep)->speculative);
  open_gate("imagenet");
  ASSERT_TRUE(tick_until(*s, [&] {
    const DatasetCache::Entry* e = entry(*s, "imagenet", keep);
    return e != nullptr && e->state == DatasetCache::State::kReady;
  }));
  // When the GPU frees, it starts in that cycle.
  backend_->exit(first, 0, 0);
  now_ += 1;
  s->tick();
  s->tick();
  EXPECT_EQ(state(*s, next), JobState::kRunning);
}

TEST_F(ServiceDatasets, AFailedStagingFailsTheJobSayingWhyAndALaterJobTriesAgain) {
  auto s = make_cached(4);
  const int64_t id = submit(*s, "train", "coco");
  fail_gate("coco");
  ASSERT_TRUE(tick_until(*s, [&] { return state(*s, id) == JobState::kFailed; }));
  const JobView v = s->job(Caller{true, ""}, id);
  EXPECT_NE(v.row.message.find("staging dataset coco failed: the staging command exited with 3"),
            std::string::npos)
      << v.row.message;
  EXPECT_DOUBLE_EQ(free_gpus(*s), 4);  // its GPU is back
  EXPECT_EQ(s->metrics().stagings_failed, 1u);
  // The operator fixes the source; the next job on it stages it again and runs.
  fs::remove(gate_ + "/coco.fail");
  const int64_t retry = submit(*s, "retry", "coco");
  ASSERT_TRUE(tick_until(*s, [&] { return state(*s, retry) == JobState::kRunning; }));
}

TEST_F(ServiceDatasets, AFullCacheEvictsTheLeastRecentlyUsedDatasetNoJobHolds) {
  // Room for two 1 MB datasets (declared 0.001 GB each).
  auto s = make_cached(4, 0.0025, 0);
  for (const char* d : {"d1", "d2", "d3"}) open_gate(d);
  const auto run = [&](const std::string& d) {
    const std::string spec =
        "name: j-" + d + "\ndataset: {name: " + d + ", size_gb: 0.001}\ncommand: [x]\n";
    const int64_t id = s->submit(as("team-a"), job(spec), "", nullptr).row.id;
    EXPECT_TRUE(tick_until(*s, [&] { return state(*s, id) == JobState::kRunning; })) << d;
    return id;
  };
  const int64_t j1 = run("d1");
  const int64_t j2 = run("d2");
  backend_->exit(j1, 0, 0);  // d1 no longer held, and used before d2
  backend_->exit(j2, 0, 0);
  now_ += 1;
  s->tick();
  s->tick();
  run("d3");
  EXPECT_FALSE(fs::exists(cache_ + "/d1"));
  EXPECT_TRUE(fs::exists(cache_ + "/d2/data"));
  EXPECT_TRUE(fs::exists(cache_ + "/d3/data"));
  EXPECT_EQ(s->metrics().dataset_evictions, 1u);
}

TEST_F(ServiceDatasets, ARestartedServerFindsWhatIsStagedOnDisk) {
  {
    auto s = make_cached(2);
    const int64_t id = submit(*s, "train", "squad");
    open_gate("squad");
    ASSERT_TRUE(tick_until(*s, [&] { return state(*s, id) == JobState::kRunning; }));
    backend_->exit(id, 0, 0);
    now_ += 1;
    s->tick();
    s->stop();
  }
  fs::remove(gate_ + "/squad.go");  // a new staging would now hang
  auto s = make_cached(2);
  std::vector<DatasetCache::Entry> keep;
  ASSERT_NE(entry(*s, "squad", keep), nullptr);
  EXPECT_EQ(entry(*s, "squad", keep)->state, DatasetCache::State::kReady);
  const int64_t id = submit(*s, "again", "squad");
  now_ += 1;
  s->tick();
  EXPECT_EQ(state(*s, id), JobState::kRunning);
}

TEST_F(ServiceDatasets, ACopyDeletedBehindTheServersBackIsStagedAgain) {
  auto s = make_cached(2);
  open_gate("movielens");
  const int64_t first = submit(*s, "first", "movielens");
  ASSERT_TRUE(tick_until(*s, [&] { return state(*s, first) == JobState::kRunning; }));
  backend_->exit(first, 0, 0);
  now_ += 1;
  s->tick();
  // An operator cleans the cache; the next job must not start on a missing directory.
  fs::remove_all(cache_ + "/movielens");
  const int64_t next = submit(*s, "next", "movielens");
  ASSERT_TRUE(tick_until(*s, [&] { return state(*s, next) == JobState::kRunning; }));
  EXPECT_TRUE(fs::exists(cache_ + "/movielens/data"));
  EXPECT_EQ(s->metrics().stagings_ok, 2u);
}

TEST_F(ServiceDatasets, WithoutACacheAJobIsToldItsDatasetAndTheOptionsGoTogether) {
  auto s = make(2);
  const int64_t id = submit(*s, "train", "imagenet");
  now_ += 1;
  s->tick();
  ASSERT_EQ(state(*s, id), JobState::kRunning);
  EXPECT_EQ(env_of(id).at("TESSERA_DATASET"), "imagenet");
  EXPECT_EQ(env_of(id).count("TESSERA_DATASET_DIR"), 0u);
  ServiceOptions o = options(2);
  o.db_path = dir_.file("other.db");
  o.dataset_dir = cache_;
  try {
    Service bad(o, std::make_unique<FakeBackend>());
    FAIL() << "accepted --dataset-dir without --stage-command";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--stage-command"), std::string::npos);
  }
}

TEST(ServeDatasetOptions, CacheOptionsWithoutACacheAreRefused) {
  for (const char* flag : {"--prestage-datasets 2", "--dataset-cache-gb 10"}) {
    const auto r = testing::run_tessera(std::string("serve --db /nonexistent/x.db ") + flag);
    EXPECT_NE(r.status, 0) << flag;
    EXPECT_NE(r.output.find("need --dataset-dir"), std::string::npos) << r.output;
  }
}

TEST_F(ServiceDatasets, APrivateDatasetLivesApartAndIsFoundAgainAfterARestart) {
  {
    auto s = make_cached(2);
    const int64_t id = submit(*s, "train", "team-a/corpus");
    fs::create_directories(gate_ + "/team-a");
    open_gate("team-a/corpus");
    ASSERT_TRUE(tick_until(*s, [&] { return state(*s, id) == JobState::kRunning; }));
    EXPECT_EQ(env_of(id)["TESSERA_DATASET_DIR"], cache_ + "/.private/team-a/corpus");
    EXPECT_TRUE(fs::exists(cache_ + "/.private/team-a/corpus/data"));
    backend_->exit(id, 0, 0);
    now_ += 1;
    s->tick();
    s->stop();
  }
  fs::remove(gate_ + "/team-a/corpus.go");  // a new staging would now hang
  auto s = make_cached(2);
  std::vector<DatasetCache::Entry> keep;
  ASSERT_NE(entry(*s, "team-a/corpus", keep), nullptr);
  EXPECT_EQ(entry(*s, "team-a/corpus", keep)->state, DatasetCache::State::kReady);
  // Another tenant may not name it.
  EXPECT_THROW(
      s->submit(as("team-b"), job("name: x\ndataset: team-a/corpus\ncommand: [x]\n"), "", nullptr),
      ServiceError);
}

TEST(DatasetName, OneRuleForServeAndKube) {
  for (const char* ok : {"imagenet", "corpus-v2", "a", "x.y_z-1", "ImageNet1k"}) {
    EXPECT_EQ(dataset_name_problem(ok, false), "") << ok;
  }
  for (const char* bad :
       {"", ".", "..", ".hidden", "trailing.", "a b", "a/b", "x;id", "-a", "a\nb", "$(id)"}) {
    EXPECT_NE(dataset_name_problem(bad, false), "") << bad;
  }
  EXPECT_EQ(dataset_name_problem("team-a/imagenet", true), "");
  EXPECT_EQ(dataset_name_problem("research/nlp/corpus", true), "");
  for (const char* bad : {"team-a/..", "../x", "a//b", "/abs", "a/", "a/./b"}) {
    EXPECT_NE(dataset_name_problem(bad, true), "") << bad;
  }
  EXPECT_EQ(dataset_owner("research/nlp/corpus"), "research/nlp");
  EXPECT_EQ(dataset_owner("corpus"), "");
  EXPECT_NE(dataset_component_problem(std::string(64, 'a')), "");
  EXPECT_LT(dataset_name_problem(std::string(200000, 'a'), true).size(), 200u);
}

TEST(JobRequestDataset, ReadsANameOrANameAndSizeAndRefusesBadOnes) {
  JobRequest r = parse_job_request("name: a\ndataset: imagenet\ncommand: [x]\n");
  EXPECT_EQ(r.dataset, "imagenet");
  EXPECT_EQ(r.dataset_gb, -1);
  r = parse_job_request("name: a\ndataset: {name: corpus-v2, size_gb: 12.5}\ncommand: [x]\n");
  EXPECT_EQ(r.dataset, "corpus-v2");
  EXPECT_DOUBLE_EQ(r.dataset_gb, 12.5);
  EXPECT_EQ(job_request_from_json(to_json(r)), r);
  const auto field_of = [](const std::string& yaml) {
    try {
      parse_job_request(yaml);
    } catch (const FieldError& e) {
      return e.field();
    }
    return std::string("accepted");
  };
  EXPECT_EQ(field_of("name: a\ndataset: ../etc\ncommand: [x]\n"), "dataset");
  EXPECT_EQ(field_of("name: a\ndataset: {name: x, size_gb: -1}\ncommand: [x]\n"),
            "dataset.size_gb");
  EXPECT_EQ(field_of("name: a\ndataset: {name: x, where: s3}\ncommand: [x]\n"), "dataset.where");
}

}  // namespace
}  // namespace tessera
