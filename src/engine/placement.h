// Placement: where a gang's members go. Every scorer places all members or none; on failure
// the state is left exactly as it was. Implementations share one behaviour test suite
// (tests/placement_test.cc).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/rng.h"
#include "model/allocation.h"
#include "model/cluster_state.h"
#include "model/job.h"

namespace tessera {

class PlacementScorer {
 public:
  virtual ~PlacementScorer() = default;
  virtual std::string_view name() const = 0;
  // Places `members` members of `job` on `state`. On success allocates them on `state`, fills
  // `out` and returns true; on failure returns false and leaves `state` unchanged.
  virtual bool place(ClusterState& state, const JobSpec& job, int32_t members, Rng& rng,
                     Allocation& out) const = 0;
};

// Bin-pack: a gang goes to the tightest node that hosts all remaining members, else fills the
// node that hosts the most; fractional shares go to the fullest GPU that fits.
std::unique_ptr<PlacementScorer> make_bestfit_scorer();
// Least-allocated, like kube-scheduler's default: each member goes to the node with the most
// free GPUs.
std::unique_ptr<PlacementScorer> make_spread_scorer();
// Fewest NVLink domains / nodes / racks / spines spanned: the gang goes into the smallest
// subtree that can host it (one NVLink domain, else one node, rack, spine), best-fit among
// subtrees of that level, so small gangs fill partly used domains and nodes first and whole
// ones stay free for large gangs. The outermost level a ring crosses sets its all-reduce time
// (insight/comm_cost.h), so this minimises the gang's estimated step time level by level.
//
// Every scorer honours JobSpec::max_span (a hard constraint): the gang is placed inside one
// subtree of that level (tried tightest first; spread: emptiest first; random: in a seeded
// random order), with span kNvlDomain inside one NVLink domain; none fits: no placement.
// Every scorer honours JobSpec::eligible_nodes (a hard constraint): no member, whole-GPU,
// fractional or CPU-only, goes to a node outside the set; subtrees are ranked by what is free on
// their eligible nodes. A null set costs one branch per candidate node.
std::unique_ptr<PlacementScorer> make_topology_scorer();
// Each member on a uniformly random node that can host it (seeded).
std::unique_ptr<PlacementScorer> make_random_scorer();

std::unique_ptr<PlacementScorer> make_scorer(std::string_view name);  // nullptr if unknown
std::vector<std::string> scorer_names();

}  // namespace tessera
