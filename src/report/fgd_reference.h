// The FGD authors' published curves (../shared/data/fgd-reference, PROVENANCE.md): GPU
// allocation and fragmentation ratio against arrived GPU demand, per trace and policy, that a
// report of `tessera frag` draws beside its own curve.
#pragma once

#include <string>
#include <vector>

namespace tessera::report {

struct PublishedCurve {
  std::string policy;           // as the authors name it: "01-Random", ..., "06-FGD"
  std::vector<double> arrived;  // % of cluster GPU capacity: 0, 1, ..., 130
  std::vector<double> values;   // the mean over the seeds at each arrived %
};

// The mean over seeds per policy of one `analysis_*_discrete.csv` (workload, sc_policy, tune,
// seed, total_gpus, then one column per arrived %) for the rows of `workload` (the pod list's
// file stem, "openb_pod_list_default"). Empty when the trace is not there; throws
// std::runtime_error naming `name` on a malformed header.
std::vector<PublishedCurve> published_curves(const std::string& csv, const std::string& workload,
                                             const std::string& name);

}  // namespace tessera::report
