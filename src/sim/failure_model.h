// Node failures for the simulator: when nodes fail and how long they take to come back, from a
// seeded MTBF/MTTR model or from a list (e.g. a real cluster's failure log).
//
// A failed node loses every job with a member on it (synchronous gangs crash as a whole): the
// work since each job's last checkpoint is lost and the job is requeued at once. The node holds
// nothing and takes nothing until it recovers. DESIGN.md's fault recovery time (FRT) is, per
// failure, the time until every job it hit runs again.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/cluster.h"

namespace tessera {

struct NodeFailure {
  double time = 0;  // seconds, on the workload's clock
  NodeId node = 0;
  double repair_seconds = 0;  // down for this long
};

// Failures of every node over [start, end): each node fails after exponential times with mean
// `mtbf_seconds` (counted from its last recovery) and is repaired after exponential times with
// mean `mttr_seconds`. Deterministic for a seed; sorted by time, then node.
std::vector<NodeFailure> generate_failures(const Cluster& cluster, double start, double end,
                                           double mtbf_seconds, double mttr_seconds, uint64_t seed);

// A failure list: CSV with header `time,node,repair_seconds` (node by name). Throws InputError
// naming the file, line and field for a bad row or an unknown node. Sorted by time on return.
std::vector<NodeFailure> parse_failure_list(const std::string& text, const std::string& origin,
                                            const Cluster& cluster);
std::vector<NodeFailure> read_failure_list(const std::string& path, const Cluster& cluster);

}  // namespace tessera
