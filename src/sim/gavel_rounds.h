// Gavel's round-based heterogeneity-aware scheduling in the simulator
// (docs/heterogeneity.md): at each round boundary the jobs that want to run (waiting and running)
// get time shares of every GPU type from the LP (engine/type_shares.h, max-min
// fairness), and the round's plan (engine/round_plan.h) says which job runs on which type until
// the next boundary. The simulator then suspends or migrates the running jobs the plan moves
// (a preemption: checkpoint grace, then a restart) and starts the ones it brings in.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "model/cluster.h"
#include "model/ids.h"
#include "model/job.h"

namespace tessera {

struct GavelCandidate {
  JobId id = 0;
  const JobSpec* spec = nullptr;
  GpuTypeId running_on = kNoGpuType;  // the type it runs on now (its first member's), or kNoGpuType
  double attained = 0;                // GPU-seconds so far (ties: least first, as LAS)
  std::span<const double> rounds_on;  // [GpuTypeId]: rounds it spent running on each type
  double rounds = 0;                  // rounds it has wanted to run in (waiting or running)
};

// Job `s`'s throughput on type t as the rounds weigh it: its measured type_speed there, the
// type table's relative speed where it has none.
double type_throughput(const Cluster& c, const JobSpec& s, GpuTypeId t);

// Plans rounds, remembering the last LP: its shares depend only on which jobs want to run (a
// job's throughputs and gang are fixed), so while no job arrives, finishes or leaves for a
// checkpoint they are reused rather than solved again.
class GavelPlanner {
 public:
  // The type each candidate runs on in the next round (kNoGpuType: it waits, or is suspended),
  // by index into `jobs`. Only GPU types present in `c` count; a job's throughput on a type is
  // its type_speed there (the type table's relative speed when it has none; 1 on every type
  // when not `aware`: Gavel's heterogeneity-agnostic baseline), 0 where its allowed_types
  // exclude the type. `stay_factor`: plan_round's (engine/round_plan.h). `max_jobs` > 0: at
  // most that many jobs enter the LP (every running job, then the waiting ones with the least
  // attained service); the others wait this round.
  std::vector<GpuTypeId> plan(const Cluster& c, const std::vector<GavelCandidate>& jobs, bool aware,
                              double stay_factor, size_t max_jobs = 0);
  uint64_t lp_solves() const { return solves_; }

 private:
  // Whether job `id`'s gang fits on type t's nodes at all (memoised per job).
  bool fits_type(const Cluster& c, JobId id, const JobSpec& s, GpuTypeId t);

  std::unordered_map<JobId, GpuTypeMask> fits_;
  std::vector<JobId> ids_;                  // the jobs of the last LP, ascending
  std::vector<std::vector<double>> share_;  // their shares, by position in ids_, per LP type
  uint64_t solves_ = 0;
};

}  // namespace tessera
