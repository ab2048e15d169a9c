// Heterogeneity-aware time shares (Gavel, Narayanan et al., OSDI'20, section 4): how
// much of its time each job should spend on each GPU type, from a linear program over the jobs'
// throughputs on every type, solved with GLPK.
//
// Variables X[j][t] >= 0: the fraction of time job j runs on type t (on `gpus[j]` GPUs of it).
// Constraints:
//   sum_t X[j][t] <= 1                         a job runs on one type at a time;
//   sum_j gpus[j] * X[j][t] <= capacity[t]      a type's GPUs are not over-committed (in time
//                                              average: the rounds of a time-sliced schedule
//                                              realise it);
//   X[j][t] = 0 where throughput[j][t] = 0     types a job cannot run on.
// A job's effective throughput is sum_t throughput[j][t] * X[j][t].
//
// kMaxMinFairness (Gavel's heterogeneity-aware LAS): maximise the least weighted normalised
// effective throughput, min_j eff_j / (weight[j] * equal_j), where equal_j is the job's
// throughput under an equal share of the cluster (each job the same fraction of every type's
// GPU-time, at most all of it), so 1 means "as well off as with an equal share". A second LP
// then keeps every job at that level and maximises the sum of normalised throughputs, so that
// what the least-off job cannot use goes to the others instead of idling.
// kMaxThroughput: maximise sum_j eff_j / best_j (best_j: its throughput on its fastest type),
// the cluster's total normalised throughput, with no fairness floor.
#pragma once

#include <string>
#include <vector>

namespace tessera {

struct TypeShareInput {
  std::vector<std::vector<double>> throughput;  // [job][type], work per second; 0: cannot run
  std::vector<double> gpus;                     // [job]: GPUs it holds while it runs (> 0)
  std::vector<double> capacity;                 // [type]: GPUs of that type (>= 0)
  std::vector<double> weight;                   // [job]: > 0 (empty: every job 1)
};

enum class TypeShareObjective { kMaxMinFairness, kMaxThroughput };

struct TypeShares {
  std::vector<std::vector<double>> x;  // [job][type], each row summing to at most 1
  // kMaxMinFairness: the least weighted normalised throughput reached; kMaxThroughput: the sum
  // of normalised throughputs.
  double objective = 0;
};

// Throws std::invalid_argument naming what is malformed (ragged rows, a job with no type it can
// run on, a non-positive GPU count or weight) and std::runtime_error when GLPK fails.
TypeShares solve_type_shares(const TypeShareInput& in, TypeShareObjective objective);

// A job's effective throughput under `x` (sum over types of throughput x share).
double effective_throughput(const TypeShareInput& in, const TypeShares& s, size_t job);

}  // namespace tessera
