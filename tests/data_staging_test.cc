// Datasets and storage tiers (docs/data.md): what staging a dataset costs on each tier, how
// caches evict, and what locality-aware placement and pre-staging change in a simulation.
#include <gtest/gtest.h>

#include <string>

#include "engine/policy.h"
#include "model/cluster_spec.h"
#include "model/input_error.h"
#include "sim/data_staging.h"
#include "sim/simulator.h"
#include "sim/trace_readers.h"
#include "sim_test_util.h"

namespace tessera {
namespace {

using testing::UnitSpeed;

// `racks` racks of `nodes` nodes of 4 GPUs; object store 1 GB/s in all, 0.5 per transfer; a
// rack cache of 300 GB at 10 GB/s; NVMe of `nvme_gb` at 3 GB/s.
Cluster storage_cluster(int racks, int nodes, double nvme_gb = 200) {
  const std::string yaml = "racks: " + std::to_string(racks) +
                           "\nnodes_per_rack: " + std::to_string(nodes) +
                           "\nnode: {gpus: 4, gpu_type: V100}\n"
                           "storage:\n"
                           "  object_store: {bandwidth_gbs: 1, per_job_gbs: 0.5}\n"
                           "  cache: {per: rack, capacity_gb: 300, bandwidth_gbs: 10}\n"
                           "  nvme: {capacity_gb: " +
                           std::to_string(nvme_gb) + ", bandwidth_gbs: 3}\n";
  return parse_cluster_yaml(yaml, "test.yaml");
}

Allocation on_node(NodeId n, const Cluster& c) {
  Allocation a;
  a.gpus_per_member = 1;
  a.member_node = {n};
  a.shares = {GpuShare{c.node(n).first_gpu, 1000}};
  return a;
}

const Dataset kImagenet{"imagenet", 100, 100};
const Dataset kCoco{"coco", 20, 50};

TEST(DataStaging, EachTierCostsItsTransferAndALocalCopyNothing) {
  const Cluster c = storage_cluster(2, 2);
  DataStaging d(c, CacheEviction::kLru);
  // Node 0: from the object store at 0.5 GB/s: 200 s; it fills rack 0's cache on the way.
  EXPECT_DOUBLE_EQ(d.start(0, kImagenet, on_node(0, c), 0, 1), 200);
  d.release(0, on_node(0, c));
  // Node 0 again: on its NVMe.
  EXPECT_DOUBLE_EQ(d.start(0, kImagenet, on_node(0, c), 300, 1), 0);
  d.release(0, on_node(0, c));
  // Node 1, same rack: from the rack's cache at 10 GB/s.
  EXPECT_DOUBLE_EQ(d.start(0, kImagenet, on_node(1, c), 400, 1), 10);
  // Node 2, the other rack: the object store again.
  EXPECT_DOUBLE_EQ(d.start(0, kImagenet, on_node(2, c), 500, 1), 200);
  const DataStats& s = d.stats();
  EXPECT_EQ(s.node_reads, 4);
  EXPECT_EQ(s.nvme_hits, 1);
  EXPECT_EQ(s.cache_hits, 1);
  EXPECT_EQ(s.object_reads, 2);
  EXPECT_DOUBLE_EQ(s.object_gb, 200);
  EXPECT_DOUBLE_EQ(s.cache_gb, 100);
  EXPECT_DOUBLE_EQ(s.staging_seconds, 410);
  // Nodes holding it: 0, 1 and 2.
  ASSERT_NE(d.nodes_with(0), nullptr);
  EXPECT_EQ(d.nodes_with(0)->size(), 3u);
  EXPECT_EQ(d.nodes_with(1), nullptr);
}

TEST(DataStaging, TheObjectStoreIsSharedByItsTransfers) {
  const Cluster c = storage_cluster(4, 1);  // four racks: four object-store transfers
  DataStaging d(c, CacheEviction::kLru);
  // 1 GB/s in all: the first gets 0.5 (its cap), the second 0.5, the third 1/3, the fourth 1/4.
  EXPECT_DOUBLE_EQ(d.start(0, kCoco, on_node(0, c), 0, 1), 40);
  EXPECT_DOUBLE_EQ(d.start(0, kCoco, on_node(1, c), 0, 1), 40);
  EXPECT_DOUBLE_EQ(d.start(0, kCoco, on_node(2, c), 0, 1), 60);
  EXPECT_DOUBLE_EQ(d.start(0, kCoco, on_node(3, c), 0, 1), 80);
  // Once they are done, a transfer has the store to itself again.
  EXPECT_DOUBLE_EQ(d.start(1, kImagenet, on_node(0, c), 100, 1), 200);
}

TEST(DataStaging, CachesEvictByTheirPolicyAndNeverWhatIsInUse) {
  const Cluster c = storage_cluster(1, 1, /*nvme_gb=*/120);  // one ImageNet or COCO at a time
  for (const CacheEviction e : {CacheEviction::kLru, CacheEviction::kQueueAware}) {
    DataStaging d(c, e);
    const Dataset other{"other", 20, 10};
    d.start(0, kCoco, on_node(0, c), 0, 1);
    d.release(0, on_node(0, c));
    d.start(2, other, on_node(0, c), 100, 1);
    d.release(2, on_node(0, c));
    // COCO was used first, `other` last; only `other` is still wanted.
    d.set_wanted({0, 1, 1});
    d.start(1, kImagenet, on_node(0, c), 200, 1);  // 100 GB: one of them must go
    EXPECT_EQ(d.on_node(0, 0), false) << "coco is the least recently used and unwanted";
    EXPECT_TRUE(d.on_node(2, 0));
    // ImageNet is in use: a new dataset that needs its room is not kept on the node.
    EXPECT_DOUBLE_EQ(d.start(3, Dataset{"big", 110, 1}, on_node(0, c), 300, 1), 220);
    EXPECT_TRUE(d.on_node(1, 0));
    EXPECT_FALSE(d.on_node(3, 0));
  }
  // Where the policies differ: COCO recently used but unwanted, `other` older and wanted.
  for (const CacheEviction e : {CacheEviction::kLru, CacheEviction::kQueueAware}) {
    DataStaging d(c, e);
    const Dataset other{"other", 20, 10};
    d.start(2, other, on_node(0, c), 0, 1);
    d.release(2, on_node(0, c));
    d.start(0, kCoco, on_node(0, c), 100, 1);
    d.release(0, on_node(0, c));
    d.set_wanted({0, 1, 1});
    d.start(1, kImagenet, on_node(0, c), 200, 1);
    EXPECT_EQ(d.on_node(2, 0), e == CacheEviction::kQueueAware);
    EXPECT_EQ(d.on_node(0, 0), e == CacheEviction::kLru);
  }
}

TEST(DataStaging, ADatasetLargerThanNvmeIsStreamedAtWhatItsSourceDelivers) {
  const Cluster c = storage_cluster(1, 1, /*nvme_gb=*/50);
  DataStaging d(c, CacheEviction::kLru);
  EXPECT_DOUBLE_EQ(d.start(0, kImagenet, on_node(0, c), 0, 4), 0);
  EXPECT_EQ(d.stats().streamed, 1);
  // From the rack cache (ImageNet fits its 300 GB) at 10 GB/s: 4 GPUs read 0.4 GB/s, unslowed.
  EXPECT_EQ(d.read_source(kImagenet), DataStaging::Source::kCache);
  EXPECT_DOUBLE_EQ(d.stream_factor(kImagenet, 4), 1);
  // 200 GPUs' worth would need 20 GB/s: half speed.
  EXPECT_DOUBLE_EQ(d.stream_factor(kImagenet, 200), 0.5);
  // Streams from the object store (1 GB/s, 0.5 each at most) share it, water-filled by need.
  const auto near = [](const std::vector<double>& got, const std::vector<double>& want) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << i;
  };
  near(d.object_shares({0.1, 0.8, 0.8}), {0.1, 0.45, 0.45});
  near(d.object_shares({2, 2, 2, 2}), {0.25, 0.25, 0.25, 0.25});
  near(d.object_shares({2}), {0.5});
}

TEST(DataStaging, PrestagingCopiesAheadWithinItsBandwidth) {
  const Cluster c = storage_cluster(2, 2);
  DataStaging d(c, CacheEviction::kLru);
  EXPECT_TRUE(d.prestage(0, kImagenet, 3, 0, 0.25));   // at 0.25 GB/s: ready at 400 s
  EXPECT_FALSE(d.prestage(0, kImagenet, 3, 0, 0.25));  // already on its way
  EXPECT_EQ(d.prestaging(10), 1);
  EXPECT_TRUE(d.on_node(0, 3));
  // A run starting there at 100 s waits for the rest only.
  EXPECT_DOUBLE_EQ(d.start(0, kImagenet, on_node(3, c), 100, 1), 300);
  EXPECT_DOUBLE_EQ(d.stats().prestaged_gb, 100);
  EXPECT_EQ(d.prestaging(500), 0);
}

// ---- the cluster file and the trace ----

TEST(DataStaging, StorageTiersAreReadFromTheClusterFileAndBadOnesNamed) {
  const Cluster c = storage_cluster(2, 2);
  EXPECT_TRUE(c.storage().present);
  EXPECT_DOUBLE_EQ(c.storage().per_job_gbs, 0.5);
  EXPECT_TRUE(c.storage().cache_per_rack);
  const auto fails = [](const std::string& storage, const std::string& field) {
    try {
      parse_cluster_yaml("racks: 1\nnodes_per_rack: 1\nnode: {gpus: 1}\nstorage:\n" + storage,
                         "c.yaml");
      ADD_FAILURE() << "accepted " << storage;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  };
  fails("  cache: {capacity_gb: 1, bandwidth_gbs: 1}\n", "storage.object_store");
  fails("  object_store: {bandwidth_gbs: 0}\n", "storage.object_store.bandwidth_gbs");
  fails(
      "  object_store: {bandwidth_gbs: 1}\n  cache: {per: node, capacity_gb: 1, "
      "bandwidth_gbs: 1}\n",
      "storage.cache.per");
  fails("  object_store: {bandwidth_gbs: 1}\n  nvme: {capacity_gb: 1}\n",
        "storage.nvme.bandwidth_gbs");
  fails("  object_store: {bandwidth_gbs: 1}\n  tape: {}\n", "storage.tape");
}

TEST(DataStaging, JobsNameDatasetsInTheTrace) {
  const std::string trace =
      R"({"name": "a", "submit": 0, "gpus": 1, "work": 10, "dataset": "imagenet"}
{"name": "b", "submit": 0, "gpus": 1, "work": 10, "dataset": {"name": "mine", "size_gb": 5, "read_mbs_per_gpu": 20}}
{"name": "c", "submit": 0, "gpus": 1, "work": 10, "dataset": "imagenet"}
)";
  ReaderOptions ro;
  const Workload w = parse_workload(trace, "t.jsonl", TraceFormat::kJsonl, ro);
  ASSERT_EQ(w.datasets.size(), 2u);
  EXPECT_EQ(w.jobs[0].dataset, w.jobs[2].dataset);
  EXPECT_DOUBLE_EQ(w.datasets[w.jobs[0].dataset].size_gb, known_dataset("imagenet")->size_gb);
  EXPECT_DOUBLE_EQ(w.datasets[w.jobs[1].dataset].size_gb, 5);
  const auto fails = [&](const std::string& line, const std::string& field) {
    try {
      parse_workload(line, "t.jsonl", TraceFormat::kJsonl, ro);
      ADD_FAILURE() << "accepted " << line;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  };
  fails(R"({"name": "a", "submit": 0, "gpus": 1, "work": 1, "dataset": "mnist"})", "dataset");
  fails(R"({"name": "a", "submit": 0, "gpus": 1, "work": 1, "dataset": {"name": "x"}})",
        "dataset.size_gb");
  fails(
      R"({"name": "a", "submit": 0, "gpus": 1, "work": 1, "dataset": {"name": "x", "size_gb": 1, "speed": 1}})",
      "dataset.speed");
}

// ---- in a simulation ----

// Jobs of one GPU each reading `dataset`, one every `gap` seconds, each running `work` s.
Workload sweep(int jobs, double gap, double work, const Dataset& ds) {
  Workload w;
  w.tenants.intern("t");
  const uint32_t d = w.add_dataset(ds);
  for (int i = 0; i < jobs; ++i) {
    JobSpec j;
    j.name = "trial-" + std::to_string(i);
    j.submit_time = gap * i;
    j.work_seconds = work;
    j.duration_estimate = work;
    j.dataset = d;
    w.jobs.push_back(j);
  }
  return w;
}

TEST(DataStagingSim, LocalityKeepsAJobWhereItsDataIsAndTheWaitIsBounded) {
  // Two nodes; the first job's dataset lands on the node bestfit picks; a second job arriving
  // later, while a third holds one GPU of the other node, goes to the data, not to bestfit's
  // fuller node, with --data-locality.
  const Cluster c = storage_cluster(1, 2);
  Workload w = sweep(2, 1000, 100, kCoco);  // trial-0 at 0 s, trial-1 at 1000 s
  w.jobs[0].submit_time = 10;
  // A whole-node job fills node 0 first, so trial-0 and its data go to node 1; a one-GPU job
  // then takes node 0 (both empty by then), so bestfit puts trial-1 next to it, away from its
  // data.
  JobSpec full;
  full.name = "full";
  full.demand.gpus = 4;
  full.work_seconds = 200;
  JobSpec one;
  one.name = "one";
  one.submit_time = 300;
  one.work_seconds = 5000;
  w.jobs.insert(w.jobs.begin(), full);
  w.jobs.insert(w.jobs.begin() + 2, one);
  const UnitSpeed model;
  const auto run = [&](bool locality) {
    SimOptions o;
    o.data_locality = locality;
    return simulate(w, c, make_policy("fifo", 1), model, o);
  };
  const SimResult blind = run(false), local = run(true);
  // Blind: bestfit packs the second trial next to the filler, on the node without COCO.
  EXPECT_EQ(blind.data.nvme_hits, 0);
  EXPECT_EQ(local.data.nvme_hits, 1);
  EXPECT_LT(local.data.staging_gpu_seconds, blind.data.staging_gpu_seconds);

  // Delay scheduling: the data's node is full for 300 s; the job waits for it up to its
  // locality wait, then starts elsewhere.
  Workload busy = sweep(2, 10, 400, kCoco);  // trial-1 arrives while trial-0 holds node 0
  for (JobSpec& j : busy.jobs) j.demand.gpus = 4;
  for (const double wait : {0.0, 600.0, 100.0}) {
    SimOptions o;
    o.data_locality = true;
    o.locality_wait = wait;
    const SimResult r = simulate(busy, c, make_policy("fifo", 1), model, o);
    const double started = r.jobs[1].first_start;
    if (wait == 0) {
      EXPECT_NEAR(started, 10, 1e-6);  // at once, on node 1 (its data staged there)
    } else if (wait == 600) {
      EXPECT_GT(started, 400);  // after trial-0, on node 0 (its data)
    } else {
      EXPECT_NEAR(started, 110, 1e-6);  // its wait ran out first
    }
  }
}

TEST(DataStagingSim, RunsStreamingFromTheObjectStoreShareItsBandwidth) {
  // No NVMe, no cache: every run streams. 4 GPUs x 250 MB/s = 1 GB/s each, the store's whole
  // bandwidth: alone a run is not slowed; two at once run at half speed until one ends.
  const Cluster c = parse_cluster_yaml(
      "racks: 1\nnodes_per_rack: 2\nnode: {gpus: 4}\nstorage:\n"
      "  object_store: {bandwidth_gbs: 1}\n",
      "stream.yaml");
  Workload w;
  w.tenants.intern("t");
  const uint32_t d = w.add_dataset(Dataset{"big", 500, 250});
  for (const double work : {100.0, 150.0}) {
    JobSpec j;
    j.name = "s" + std::to_string(w.jobs.size());
    j.demand.gpus = 4;
    j.work_seconds = work;
    j.dataset = d;
    w.jobs.push_back(j);
  }
  const UnitSpeed model;
  const SimResult r = simulate(w, c, make_policy("fifo", 1), model, SimOptions{});
  EXPECT_EQ(r.data.streamed, 2);
  EXPECT_DOUBLE_EQ(r.data.staging_gpu_seconds, 0);
  // Both at half speed until s0 ends at 200 s (100 s of work); s1 has 50 s left at full speed.
  EXPECT_NEAR(r.jobs[0].finish, 200, 1e-6);
  EXPECT_NEAR(r.jobs[1].finish, 250, 1e-6);
}

TEST(DataStagingSim, PrestagingHidesStagingForWaitingJobs) {
  // Four nodes, twelve whole-node jobs: they run in three waves; pre-staging copies the next
  // wave's data ahead to the nodes expected to free first.
  const Cluster c = storage_cluster(2, 2);
  Workload w;
  w.tenants.intern("t");
  for (int i = 0; i < 12; ++i) {
    JobSpec j;
    j.name = "job-" + std::to_string(i);
    j.demand.gpus = 4;
    j.work_seconds = 600;
    j.duration_estimate = 600;
    // Each its own 20 GB dataset: every run reads the object store unless pre-staged.
    j.dataset = w.add_dataset(Dataset{"data-" + std::to_string(i), 20, 10});
    w.jobs.push_back(j);
  }
  const UnitSpeed model;
  SimOptions o;
  o.data_locality = true;
  const SimResult plain = simulate(w, c, make_policy("fifo", 1), model, o);
  o.prestage = true;
  o.prestage_gbs = 0.5;
  const SimResult pre = simulate(w, c, make_policy("fifo", 1), model, o);
  EXPECT_GT(pre.data.prestaged_gb, 0);
  EXPECT_LT(pre.data.staging_gpu_seconds, plain.data.staging_gpu_seconds);
  EXPECT_LE(pre.last_finish, plain.last_finish);
  // The first wave starts as it arrives: its staging is what no pre-staging could hide (4 GPUs
  // each, 20 GB at the store's share when each transfer starts: 0.5, 0.5, 1/3 and 0.25 GB/s, so
  // 40 + 40 + 60 + 80 s); the later waves waited in the queue.
  EXPECT_DOUBLE_EQ(plain.data.unqueued_staging_gpu_seconds, 4 * (40 + 40 + 60 + 80.0));
  EXPECT_DOUBLE_EQ(pre.data.unqueued_staging_gpu_seconds, 4 * (40 + 40 + 60 + 80.0));
  EXPECT_GT(plain.data.staging_gpu_seconds, plain.data.unqueued_staging_gpu_seconds);
  // Each of the first wave's datasets was read for the first time: all of it is a cold start.
  EXPECT_DOUBLE_EQ(plain.data.cold_staging_gpu_seconds, plain.data.unqueued_staging_gpu_seconds);
}

TEST(DataStaging, ANodeKeepsItsHomeDatasetAgainstEviction) {
  // NVMe of 110 GB holds imagenet (100 GB) or coco (20 GB) and little else.
  const Cluster c = storage_cluster(1, 1, 110);
  for (const bool home : {false, true}) {
    DataStaging d(c, CacheEviction::kLru);
    if (home) d.set_home(0, 0);
    d.start(0, kImagenet, on_node(0, c), 0, 1);
    d.release(0, on_node(0, c));
    // coco needs room: without a home, imagenet goes; with it, coco is read but not kept.
    EXPECT_GT(d.start(1, kCoco, on_node(0, c), 1000, 1), 0);
    d.release(1, on_node(0, c));
    EXPECT_EQ(d.on_node(0, 0), home);
    EXPECT_EQ(d.on_node(1, 0), !home);
  }
}

TEST(DataStagingSim, ResidencyGivesIdleNodesTheDatasetsInDemandAndKeepsThem) {
  // Four nodes whose NVMe holds one of two 100 GB datasets. Two jobs of each run first (one node
  // each); later, two more of each arrive. Residency gives each dataset two home nodes and
  // pre-stages the idle ones: the later jobs find their data on their nodes.
  const Cluster c = storage_cluster(2, 2, 150);
  Workload w;
  w.tenants.intern("t");
  const uint32_t x = w.add_dataset(Dataset{"x", 100, 10});
  const uint32_t y = w.add_dataset(Dataset{"y", 100, 10});
  for (int i = 0; i < 6; ++i) {
    JobSpec j;
    j.name = "job-" + std::to_string(i);
    j.demand.gpus = 4;
    j.work_seconds = 2000;
    j.duration_estimate = 2000;
    j.submit_time = i < 2 ? 0 : 5000;
    j.dataset = i % 2 == 0 ? x : y;
    w.jobs.push_back(j);
  }
  const UnitSpeed model;
  SimOptions o;
  o.data_locality = true;
  o.prestage = true;
  o.prestage_gbs = 0.5;
  const SimResult pre = simulate(w, c, make_policy("fifo", 1), model, o);
  o.residency = true;
  const SimResult res = simulate(w, c, make_policy("fifo", 1), model, o);
  // The first two runs' reads are cold in both; with residency the four later runs wait for
  // nothing.
  EXPECT_DOUBLE_EQ(res.data.staging_gpu_seconds, res.data.cold_staging_gpu_seconds);
  EXPECT_LT(res.data.staging_gpu_seconds, pre.data.staging_gpu_seconds);
  EXPECT_EQ(res.data.nvme_hits, 4);
}

}  // namespace
}  // namespace tessera
