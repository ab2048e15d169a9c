// Gavel's round-based mechanism (Narayanan et al., OSDI'20, section 5): turning the
// time shares of engine/type_shares.h into who runs on which GPU type in the next round.
//
// Each round, job j's priority on type t is X[j][t] / received[j][t], where received is the
// fraction of its rounds so far that it spent on t: a job that got less of a type than its
// share says comes first there. Pairs (job, type) are taken in decreasing priority; a job is
// given the first type that still has GPUs for its whole gang, and at most one type. Over many
// rounds each job's received fractions approach its shares (the LP's time averages).
//
// Ties favour the type a job already runs on (no migration) and then the job's position in
// `jobs` (the caller's order: e.g. least attained service first), so that the plan is
// deterministic.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/type_shares.h"

namespace tessera {

struct RoundJob {
  double gpus = 1;               // its gang's GPUs
  int32_t running_on = -1;       // the type it runs on now, or -1
  std::vector<double> received;  // [type]: fraction of its rounds so far spent there
  std::vector<double> share;     // [type]: X[j][t] from the LP
};

// For each job, the type it runs on in the next round, or -1 (it waits, or is suspended).
// `capacity`: GPUs of each type available to these jobs.
// `stay_factor` (>= 1) multiplies a running job's priority on the type it runs on: moving or
// suspending it costs a checkpoint and a restart, so it gives way only to a clearly stronger
// claim (1: Gavel's rule as published).
std::vector<int32_t> plan_round(const std::vector<RoundJob>& jobs,
                                const std::vector<double>& capacity, double stay_factor = 1);

}  // namespace tessera
