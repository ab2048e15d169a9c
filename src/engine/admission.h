// Admission: whether a job could ever run on this cluster. A job that could not run even on
// the empty cluster is "infeasible forever" and is rejected up front with a reason; everything
// the cycle reports later is "not now" (PendingReason).
#pragma once

#include <optional>
#include <string>

#include "model/cluster.h"
#include "model/job.h"

namespace tessera {

// nullopt if the job fits the empty cluster at its minimum size (on its eligible nodes, when it
// is restricted to a node set: JobSpec::eligible_nodes), else why not.
std::optional<std::string> infeasible_reason(const Cluster& cluster, const JobSpec& job);

}  // namespace tessera
