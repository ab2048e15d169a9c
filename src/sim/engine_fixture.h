// A synthetic large cluster and queue for measuring the engine (tessera bench and
// bench/engine_bench.cc share it so they measure the same thing).
#pragma once

#include <memory>
#include <vector>

#include "engine/pending_queue.h"
#include "engine/running_set.h"
#include "engine/snapshot.h"
#include "model/cluster.h"
#include "model/cluster_state.h"
#include "model/job.h"

namespace tessera {

struct EngineFixtureSpec {
  int nodes = 5000;
  int gpus_per_node = 8;
  int nodes_per_rack = 32;
  int pending = 10000;
  int gang = 1;       // members per job, one GPU each
  double fill = 0.0;  // fraction of GPUs already allocated (by single-GPU jobs) before the cycle
  int tenants = 1;    // jobs (pending and running) go to tenants round-robin
  // After the fill, this many GPUs of node 0 free again (a job ended there).
  int freed_gpus = 0;
  // When set, the pending jobs are kept in a PendingQueue of this order with their reasons
  // already known (PendingJob::wants_reason false), the running ones in a RunningSet, and the
  // cycle tries placements on the fixture's own ledger, as the simulator keeps them between
  // cycles: the cycle after a change then costs what the change can start.
  const QueueOrder* order = nullptr;
};

class EngineFixture {
 public:
  explicit EngineFixture(const EngineFixtureSpec& spec);
  Snapshot snapshot() const;
  const Cluster& cluster() const { return *cluster_; }

 private:
  std::unique_ptr<Cluster> cluster_;
  std::unique_ptr<ClusterState> state_;
  Workload workload_;
  std::vector<PendingJob> pending_;
  std::vector<Allocation> fill_allocs_;
  std::vector<RunningJob> running_;
  std::unique_ptr<PendingQueue> queue_;
  std::unique_ptr<RunningSet> running_set_;
};

}  // namespace tessera
