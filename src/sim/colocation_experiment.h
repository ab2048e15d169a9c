// A discrete-event co-location experiment (docs/colocation.md): measured jobs arrive, GPUs host
// up to `slots` jobs each, and co-located jobs progress at their measured pair speeds (Lucid,
// Gavel, the seed study's table; pairs never measured run at the cluster-pair mean). Policies:
// kube-scheduler co-locating in FCFS or random order, and the job recommendation service under
// each objective, with exploration and with bin-packing by peak utilisation or memory.
// Metrics: mean individual slowdown IndSD over jobs and the packing saving PacSav of the whole
// run, (sum J_a - GPU busy time) / sum J_a, which is the seed study's (sum J_a - max J_c) /
// sum J_a for a single pair started together.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "insight/interference_model.h"
#include "insight/knowledge_base.h"
#include "insight/recommender.h"
#include "sim/interference_data.h"

namespace tessera {

enum class ColocScheduler { kFcfs, kRandom, kRecommend };

struct ColocPolicy {
  std::string name;
  ColocScheduler kind = ColocScheduler::kFcfs;
  RecommendOptions rec;
};

// fcfs, random, balance, min-indsd, min-indsd-eps, max-pacsav (bin-packing by peak GPU
// utilisation), max-pacsav-mem (by peak memory), max-pacsav-eps.
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
};

struct ColocJob {
  uint32_t catalog = 0;
  double work = 0;  // seconds alone
  double submit = 0;
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
  double makespan = 0, mean_jct = 0;
  double measured_share = 0;  // of co-located job-time, the share at measured pair speeds
  size_t colocated_jobs = 0, explored = 0;
  std::vector<ColocJobResult> jobs;
};

// Runs one policy on one workload; `seed` drives the policy's random choices.
ColocRun run_colocation(const ColocWorld& world, std::span<const ColocJob> jobs,
                        const ColocPolicy& policy, const ColocOptions& opt, uint64_t seed);

struct ColocSummary {
  std::string policy;
  double indsd = 0, indsd_colocated = 0, pacsav = 0, makespan = 0, mean_jct = 0, measured_share = 0;
  std::vector<double> indsd_per_seed, pacsav_per_seed;
};
// Every policy on the same workloads, seeds seed .. seed + seeds - 1; means over seeds.
std::vector<ColocSummary> run_colocation_experiment(const ColocWorld& world,
                                                    std::span<const ColocPolicy> policies,
                                                    const ColocOptions& opt, uint64_t seed,
                                                    size_t seeds);

}  // namespace tessera
