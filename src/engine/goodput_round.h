// One goodput round over live jobs (docs/goodput.md): how many members each goodput-adaptive
// gang should run with next, from what the gangs have reported. Pure, as the cycle is: `tessera
// serve` and `tessera kube` call it with their jobs and ledger, and apply the answer (stop and
// restart what changed size; start the rest at their size).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/goodput_allocation.h"
#include "engine/goodput_model.h"
#include "engine/placement.h"
#include "model/allocation.h"
#include "model/cluster_state.h"
#include "model/job.h"
#include "model/queue_tree.h"

namespace tessera {

struct GoodputRoundJob {
  const GoodputModel* model = nullptr;  // what the gang has reported
  // Its member shape and size range (min_members..max_members) and where it may run.
  const JobSpec* spec = nullptr;
  const Allocation* alloc = nullptr;  // what it runs on now; null or empty: waiting
  double attained_gpu_seconds = 0;    // GPU time it has had, this run included
  double run_seconds = 0;             // how long it has run, all its runs
};

// Members each job gets next (0: none), in `jobs` order. `ledger` holds every running job's
// allocation; the round plans on the whole GPUs free in it plus what the jobs hold. With a
// queue tree (bound to the jobs' tenants), each queue is first given up to its entitlement of
// those GPUs (the tree's weights and guarantees, water-filled over what its jobs could use),
// and only then may queues borrow what others leave. A job that keeps its size keeps its GPUs;
// the others are placed (shrinks first, then larger before smaller) at the size up to their
// share whose placement trains fastest. Deterministic for a seed.
std::vector<int32_t> plan_goodput_round(std::span<const GoodputRoundJob> jobs,
                                        const ClusterState& ledger, const PlacementScorer& scorer,
                                        const GoodputAllocationOptions& o, uint64_t seed,
                                        const QueueTree* tree = nullptr);

}  // namespace tessera
