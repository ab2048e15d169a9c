// A scheduling policy: queue order + placement + how blocked jobs are handled.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "engine/placement.h"
#include "engine/queue_order.h"

namespace tessera {

enum class Backfill : uint8_t {
  kNone,    // strict order: nothing starts behind a job that cannot start
  kEasy,    // EASY: the first blocked job gets a reservation; later jobs start only if they
            // end before it (by their duration estimate) or use capacity it does not need
  kGreedy,  // any job that fits starts (Tiresias); large gangs may wait indefinitely
};
std::string_view to_string(Backfill b);

struct Policy {
  std::unique_ptr<QueueOrder> order;
  std::unique_ptr<PlacementScorer> scorer;
  Backfill backfill = Backfill::kEasy;
  bool preemption = true;  // pending jobs may preempt running jobs of lower rank
  // Queue-aware preemption (the fair policy): priority preemption stays within a queue (except
  // that inference-critical jobs may preempt lower classes anywhere and best-effort jobs give
  // way to anyone), and a queue under its fair share reclaims GPUs from queues over theirs.
  bool reclaim = false;
  // Elastic gangs: running jobs with min_members < max_members shrink (never below their
  // minimum) before anything is preempted whole, and grow into the GPUs left after the waiting
  // jobs were placed, at most once per `resize_interval` seconds of a run (each resize costs a
  // restart); any waiting job may take back what a gang grew beyond its minimum.
  bool elastic = false;
  // Heterogeneity-aware placement (Gavel's idea, greedily): a job whose speed-up from the
  // fastest GPU type over the slowest is at least the median of the jobs waiting in this cycle
  // tries the fastest types first; the others try the slowest first, leaving fast GPUs to the
  // jobs that gain most from them. Either falls back to any allowed type. Needs
  // JobSpec::type_speed.
  bool heterogeneity = false;
  // Under a power cap (Snapshot::power): lower running and starting jobs' GPU power limits to
  // fit more work under it, instead of only holding jobs until power frees
  // (engine/power_budget.h). Elastic resizing does not account for power: callers must not
  // combine the two.
  bool power_shifting = false;
  // Goodput-aware elastic scheduling (docs/goodput.md; Pollux's idea): each round every
  // training job that reports its step times and gradient statistics gets the GPU count and
  // batch size that maximise the cluster's goodput, weighted towards the jobs that have had the
  // least GPU time (engine/goodput_allocation.h); jobs that do not adapt run as rigid gangs.
  // The queue order still ranks what the rounds do not decide.
  bool goodput = false;
  double resize_interval = 300;
  uint64_t seed = 0;

  std::string name() const;  // "order+scorer"
};

// Parses "ORDER" or "ORDER+SCORER" (e.g. "las+topology"). A bare order gets its default
// placement and backfill: fifo/drf/sjf -> bestfit + EASY; las -> spread + greedy (as Tiresias);
// fair -> bestfit + EASY + reclaim; goodput -> las order, bestfit, goodput rounds.
// Throws std::invalid_argument naming the unknown part and listing the known names.
Policy make_policy(std::string_view spec, uint64_t seed);

}  // namespace tessera
