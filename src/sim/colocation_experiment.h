// A discrete-event co-location experiment (docs/colocation.md): measured jobs arrive, GPUs host
// up to `slots` jobs each, and co-located jobs progress at their measured pair speeds (Lucid,
// Gavel, the seed study's table; pairs never measured run at the cluster-pair mean). Policies:
// kube-scheduler co-locating in FCFS or random order, and the job recommendation service under
// each objective, with exploration and with bin-packing by peak utilisation or memory.
// Metrics: mean individual slowdown IndSD over jobs; the packing saving PacSav of the whole
// run, (sum J_a - GPU busy time) / sum J_a, which is the seed study's (sum J_a - max J_c) /
// sum J_a for a single pair started together; and the mean over co-location episodes (a pair
// from the moment it forms until the first of the two finishes) of the seed study's per-pair
// PacSav, with J_a each job's time alone left when the pair formed and the survivor's leftover
// counted as run alone, as in the study's pair runs.
//
// Every job has a duration estimate (its time alone times a lognormal error factor), which the
// duration-aware objectives use; the simulator runs at the true work and measured speeds.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "insight/interference_model.h"
#include "insight/knowledge_base.h"
#include "insight/recommender.h"
#include "model/progress.h"
#include "sim/interference_data.h"

namespace tessera {

enum class ColocScheduler { kFcfs, kRandom, kRecommend };

struct ColocPolicy {
  std::string name;
  ColocScheduler kind = ColocScheduler::kFcfs;
  RecommendOptions rec;
};

// fcfs, random, balance, min-indsd, min-indsd-eps, max-pacsav (bin-packing by peak GPU
// utilisation), max-pacsav-mem (by peak memory), max-pacsav-eps; min-indsd-eps-dir (directed
// exploration); the duration-aware max-pacsav-dur, max-pacsav-dur-mem, min-indsd-dur,
// min-indsd-dur-eps (directed). Each recommender policy also as `<name>-greedy` (no
// opportunity cost).
std::vector<ColocPolicy> standard_colocation_policies(double epsilon);
// One of the standard names; nullopt when unknown.
std::optional<ColocPolicy> find_colocation_policy(const std::string& name, double epsilon);

// What is fixed across policies: each catalogue job as the recommender sees it (cluster,
// uncertainty, features), its measured time alone (0: unknown), the measured pair speeds, and
// the cluster-pair model seeded from them.
struct ColocWorld {
  std::vector<Candidate> jobs;
  std::vector<double> alone_seconds;
  PairSpeedTable truth;
  InterferenceModel seeded;
};
ColocWorld make_colocation_world(const InterferenceData& data, const KnowledgeBase& kb);

struct ColocOptions {
  size_t gpus = 8;
  size_t slots = 2;  // jobs per GPU
  size_t jobs = 200;
  double mean_interarrival = 30;           // seconds, exponential
  double min_work = 120, max_work = 1200;  // time alone where the catalogue has none
  bool learn = true;                       // update the model after each co-located run
  // The recommender starts knowing nothing about pairs (every pair scores alike) and learns
  // only from the runs it sees; the ground truth is unchanged.
  bool cold_start = false;
  // Duration estimates: time alone x exp(estimate_error x z), z standard normal (a lognormal
  // factor with median 1; sigma 0.3 puts 68 % of the estimates within -26 % .. +35 %). 0: exact.
  // The errors come from their own stream, so the workload is the same for every sigma.
  double estimate_error = 0.3;
  // An estimated remaining time never drops below this share of the estimate (a job that
  // overran its estimate is expected to end soon, not to have ended).
  double min_remaining_share = 0.05;
  ProgressFn progress;  // run_colocation_experiment: the seeds done, before each (null: never)
};

struct ColocJob {
  uint32_t catalog = 0;
  double work = 0;  // seconds alone
  double submit = 0;
  double estimate = 0;  // estimated seconds alone (what the scheduler is told)
};
// `opt.jobs` jobs drawn uniformly from the catalogue, Poisson arrivals.
std::vector<ColocJob> make_colocation_workload(const ColocWorld& world, const ColocOptions& opt,
                                               uint64_t seed);

struct ColocJobResult {
  double start = -1, finish = -1;
  bool colocated = false;
};

struct ColocRun {
  double indsd_mean = 0;            // over all jobs (fraction)
  double indsd_colocated_mean = 0;  // over jobs that shared a GPU at some point
  double pacsav = 0;                // fraction
  // Mean over co-location episodes of the per-pair PacSav (fraction); 0 without episodes, and
  // only with 2 slots per GPU.
  double pacsav_pairs = 0;
  size_t episodes = 0;
  double makespan = 0, mean_jct = 0;
  double measured_share = 0;  // of co-located job-time, the share at measured pair speeds
  double alone_share = 0;     // of GPU busy time, the share with a single job on the GPU
  size_t colocated_jobs = 0, explored = 0;
  std::vector<ColocJobResult> jobs;
};

// Runs one policy on one workload; `seed` drives the policy's random choices.
ColocRun run_colocation(const ColocWorld& world, std::span<const ColocJob> jobs,
                        const ColocPolicy& policy, const ColocOptions& opt, uint64_t seed);

struct ColocSummary {
  std::string policy;
  double indsd = 0, indsd_colocated = 0, pacsav = 0, pacsav_pairs = 0, makespan = 0, mean_jct = 0,
         measured_share = 0, alone_share = 0, explored = 0;
  std::vector<double> indsd_per_seed, pacsav_per_seed, pacsav_pairs_per_seed;
};
// Every policy on the same workloads, seeds seed .. seed + seeds - 1; means over seeds.
std::vector<ColocSummary> run_colocation_experiment(const ColocWorld& world,
                                                    std::span<const ColocPolicy> policies,
                                                    const ColocOptions& opt, uint64_t seed,
                                                    size_t seeds);

}  // namespace tessera
