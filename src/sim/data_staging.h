// Where datasets are, and what moving them costs, in the simulator (docs/data.md): the storage
// tiers of the cluster (ClusterStorage) hold copies of jobs' datasets, and a job that starts on
// nodes whose local NVMe lacks its dataset waits, holding its GPUs, while it is staged there:
// from the shared cache of the node's rack (or the cluster's) when it holds it, else from the
// object store, through the cache. A dataset larger than a node's NVMe is streamed instead: no
// staging, but the job runs at most as fast as its source delivers (GPUs starve).
//
// Copies are whole datasets. A copy being written counts as present from its start and ready
// when written: a job starting on it waits for the rest. Caches evict least-recently-used
// copies first, or (queue-aware) first those no waiting or running job wants, never a copy a
// running job reads or one being written.
//
// Bandwidth: a transfer from the object store gets min(per-job bandwidth, the store's bandwidth
// / transfers in flight, itself included) for its whole length (the share at its start: later
// transfers do not slow it down, earlier ones ending do not speed it up).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "model/allocation.h"
#include "model/cluster.h"
#include "model/dataset.h"
#include "model/node_set.h"

namespace tessera {

enum class CacheEviction : uint8_t {
  kLru,         // least recently used first
  kQueueAware,  // copies no waiting or running job wants first, then least recently used
};

// What data cost a simulation (SimResult::data).
struct DataStats {
  int64_t starts = 0;              // runs of jobs with a dataset
  double staging_seconds = 0;      // summed over runs: the wait for data before running
  double staging_gpu_seconds = 0;  // the same x the run's GPUs: GPU time lost to staging
  int64_t node_reads = 0;          // a run's nodes, each needing the dataset once
  int64_t nvme_hits = 0;           // ... which held it on local NVMe (or were being given it)
  int64_t cache_hits = 0;          // ... whose shared cache held it
  int64_t object_reads = 0;        // ... that read it from the object store
  int64_t streamed = 0;            // ... too large for NVMe: streamed
  double object_gb = 0;            // moved out of the object store (pre-staging included)
  double cache_gb = 0;             // moved out of caches
  double prestaged_gb = 0;         // of object_gb + cache_gb, moved ahead by pre-staging
  // Of staging_gpu_seconds, that of runs that started in the event they were submitted or
  // requeued in: they never waited in the queue, so no pre-staging could have hidden it.
  double unqueued_staging_gpu_seconds = 0;
  // Of unqueued_staging_gpu_seconds, that of runs whose dataset was first read out of the
  // object store in the event they started in (a first wave's cold start): they never waited,
  // and nothing knew the dataset would be wanted before them, so no policy can hide it.
  double cold_staging_gpu_seconds = 0;
};

class DataStaging {
 public:
  DataStaging(const Cluster& c, CacheEviction eviction);

  // A run of `gpus` GPUs with dataset `d` starts on `a` at `t`: copies what its nodes lack and
  // returns the seconds until it can run; its copies are held in use until release().
  // `unqueued`: the run never waited (started in the event it was submitted or requeued in), so
  // no pre-staging could have hidden its staging (DataStats::unqueued_staging_gpu_seconds).
  double start(uint32_t d, const Dataset& ds, const Allocation& a, double t, double gpus,
               bool unqueued = false);
  // The run ended: its copies are no longer in use.
  void release(uint32_t d, const Allocation& a);
  // Where a run reads `ds` while it runs: a copy on its nodes' NVMe, or streamed (too large for
  // NVMe) from its rack's cache when it fits there, else from the object store.
  enum class Source : uint8_t { kLocal, kCache, kObject };
  Source read_source(const Dataset& ds) const;
  // What a run of `gpus` GPUs reading `ds` needs while it runs (GB/s).
  static double need_gbs(const Dataset& ds, int gpus) {
    return ds.read_mbs_per_gpu * gpus / 1000.0;
  }
  // Speed factor of a run of `gpus` GPUs reading `ds` from its cache or (alone) from the object
  // store: min(1, what the source gives one reader / what it needs); 1 for a local copy.
  double stream_factor(const Dataset& ds, int gpus) const;
  // What each of the object store's streams gets (GB/s), by index: its bandwidth water-filled
  // over what each needs, at most per_job_gbs each.
  std::vector<double> object_shares(const std::vector<double>& needs) const;
  // Nodes whose NVMe holds (or is being given) dataset d; null when none.
  std::shared_ptr<const NodeSet> nodes_with(uint32_t d) const;
  // Whether node n's NVMe holds (or is being given) d.
  bool on_node(uint32_t d, NodeId n) const;
  // Pre-staging: copies d to node n's NVMe in the background from `t`, with at most `gbs` of
  // the object store's bandwidth; false when it cannot (too large, no room without evicting
  // what is in use, or already there).
  bool prestage(uint32_t d, const Dataset& ds, NodeId n, double t, double gbs);
  // Pre-staging transfers from the object store still in flight at `t`, and when the first of
  // them ends (infinity when none).
  int prestaging(double t) const;
  double next_prestage_done(double t) const;
  // How many waiting or running jobs want each dataset (queue-aware eviction reads it).
  void set_wanted(std::vector<int32_t> wanted) { wanted_ = std::move(wanted); }
  const DataStats& stats() const { return stats_; }
  // Residency: node n keeps its copy of dataset `d` (its home; -1: none) against eviction.
  void set_home(NodeId n, int64_t d) { home_[n] = d; }
  int64_t home(NodeId n) const { return home_[n]; }

 private:
  struct Copy {
    uint32_t d = 0;
    double gb = 0;
    double ready_at = 0;   // written by then
    double last_used = 0;  // for LRU
    int32_t in_use = 0;    // running jobs reading it
    bool prestaged = false;
  };
  using Tier = std::vector<Copy>;
  Copy* find(Tier& tier, uint32_t d);
  const Copy* find(const Tier& tier, uint32_t d) const;
  // Makes room for `gb` in `tier` of `capacity` at `t`, evicting by the policy; false when the
  // copies that may not go leave too little.
  bool make_room(Tier& tier, double capacity, double gb, double t, int64_t keep = -1);
  // Notes d read out of the object store at t; when it was first read (infinity: never).
  void read_out(uint32_t d, double t);
  double first_read(uint32_t d) const;
  // Seconds to read `gb` out of the object store starting at `t` (recorded as in flight, a
  // pre-staging transfer or not), with at most `cap` GB/s.
  double object_transfer(double gb, double t, double cap, bool prestaging);
  size_t cache_of(NodeId n) const;

  const Cluster& c_;
  ClusterStorage s_;
  CacheEviction eviction_;
  std::vector<Tier> nvme_;              // by NodeId
  std::vector<Tier> cache_;             // by rack, or one
  std::vector<double> object_until_;    // when each object-store transfer in flight ends
  std::vector<double> prestage_until_;  // the same, for pre-staging transfers
  std::vector<int32_t> wanted_;         // by dataset
  std::vector<int64_t> home_;           // by NodeId: the dataset its NVMe keeps (-1: none)
  std::vector<double> first_read_;      // by dataset: first read out of the object store
  DataStats stats_;
};

}  // namespace tessera
