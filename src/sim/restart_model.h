// What restarting a preempted job costs in the simulator, beyond what its trace says
// (JobSpec::restart_cost, paid at every start): the restart re-initialises the job (processes,
// collective communication, data loader, warm-up: a fixed time) and reads its checkpoint back
// (its size over the restore bandwidth of the nodes it restarts on). docs/fairness.md,
// "What a preemption costs", gives the published figures these defaults can be set from.
#pragma once

#include <algorithm>

#include "model/job.h"

namespace tessera {

struct RestartModel {
  double overhead_seconds = 0;  // fixed re-initialisation at every restart after a preemption
  // The checkpoint: JobSpec::model_params x bytes_per_param where the trace gives the model's
  // size (weights, master weights and optimizer state: 14 bytes with mixed-precision Adam),
  // else default_checkpoint_gb (0: none).
  double bytes_per_param = 14;
  double default_checkpoint_gb = 0;
  double restore_gbps_per_node = 1;  // read back from shared storage, per node it restarts on

  bool on() const { return overhead_seconds > 0 || default_checkpoint_gb > 0; }
  double checkpoint_gb(const JobSpec& job) const {
    return job.model_params > 0 ? job.model_params * bytes_per_param / 1e9 : default_checkpoint_gb;
  }
  // Seconds of no progress at a restart of `job` on `nodes` nodes.
  double seconds(const JobSpec& job, int nodes) const {
    if (!on()) return 0;
    const double bandwidth = restore_gbps_per_node * std::max(1, nodes);
    return overhead_seconds + (bandwidth > 0 ? checkpoint_gb(job) / bandwidth : 0);
  }
};

}  // namespace tessera
