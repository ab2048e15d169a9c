// Recommends a competitor job for a GPU that already hosts some jobs (the residents): the
// queued job whose cluster pairs best with the residents' clusters under an objective
// (InterferenceModel::score). For "maximise PacSav" the candidates are first bin-packed: the
// residents' and the candidate's peak GPU utilisation (or peak memory) must sum to at most 100.
// Lower uncertainty (distance to the cluster centre) wins ties, then queue order; with
// probability epsilon the choice explores: a uniformly random feasible candidate, or (directed)
// the least-observed pair among the candidates the model cannot tell apart from the best.
// The duration-aware objectives also use each job's estimated (remaining) time alone, with the
// model's cluster-pair speeds: never a job's measured pair speeds.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <span>

#include "insight/interference_model.h"
#include "insight/job_profile.h"

namespace tessera {

enum class Packing {
  kNone,     // no capacity check
  kGpuUtil,  // sum of peak GPU utilisation <= 100
  kMemory,   // sum of peak GPU memory allocated <= 100
};
const char* packing_name(Packing p);

struct Candidate {
  uint32_t cluster = 0;
  double uncertainty = 0;
  JobFeatures features;
  // Duration estimates (seconds alone; 0: unknown), for the duration-aware objectives: the
  // job's estimated time alone (user-given or predicted) and its estimated time alone still to
  // run (a queued job: the estimate; a resident: the estimate less its estimated progress).
  double estimate = 0;
  double remaining = 0;
};

struct RecommendOptions {
  Objective objective = Objective::kBalance;
  Packing packing = Packing::kNone;
  double epsilon = 0;           // probability of exploring
  double balance_weight = 0.5;  // kBalance: weight of PacSav against IndSD
  // Rank a candidate by how much better it pairs with the residents than with the rest of the
  // queue (its expected partner otherwise), not by the pair score alone. A greedy pair ranking
  // keeps choosing light partners and leaves heavy jobs to be paired with each other; this
  // opportunity cost pairs complementary clusters instead (docs/colocation.md).
  bool opportunity_cost = false;
  // With strict packing a GPU gets no competitor when none fits; otherwise the fitting
  // candidates come first and, when none fits, every candidate is ranked.
  bool strict_packing = true;
  // Directed exploration: an exploring choice takes, among the candidates the model cannot tell
  // apart from the best (score within explore_z standard errors of the pair means, summed, of
  // the best's), the one whose cluster pair with the residents has been observed least (then
  // the better score, then queue order). Undirected: a uniformly random feasible candidate.
  bool directed_exploration = false;
  double explore_z = 2;
  // kMaxPacSavDuration in a queue: the job left over when the first of the pair finishes does
  // not run alone while other jobs wait, it gets a new partner. With this option the pair is
  // charged only its work-proportional share of the GPU for that leftover, left / S, where S
  // is the expected pair throughput (speed sum) of the survivor's cluster beside the queue's
  // clusters (S = 1, alone, when the candidate is the only queued job). Without it the
  // survivor runs alone, as in the seed study's pair runs.
  bool queue_aware = false;
};

struct Recommendation {
  size_t index = 0;  // into the queue
  double score = 0;
  bool explored = false;
};

// Whether `c` fits beside `residents` under `p`.
bool fits(std::span<const Candidate> residents, const Candidate& c, Packing p);

// The score of `c` beside one resident `r` under the objective: the cluster-pair score, or for
// the duration-aware objectives (when both jobs have estimates) the expected PacSav of the pair
// from r's estimated remaining time and c's, or minus the IndSD it accrues per second of work,
// at the model's cluster-pair speeds.
double pair_value(const Candidate& r, const Candidate& c, const InterferenceModel& model,
                  const RecommendOptions& opt);

// Mean over residents of the pair score (0 with no residents); without the opportunity cost.
double pair_score(std::span<const Candidate> residents, const Candidate& c,
                  const InterferenceModel& model, const RecommendOptions& opt);

// The recommended queue index, or nullopt when no candidate fits. Draws from `rng` only when
// 0 < epsilon (once per call, plus once more when exploring undirected). The opportunity cost
// of a duration-aware objective compares each candidate with up to 32 other queued jobs
// (evenly spaced in the queue), as their scores depend on durations, not only clusters.
std::optional<Recommendation> recommend(std::span<const Candidate> residents,
                                        std::span<const Candidate> queue,
                                        const InterferenceModel& model, const RecommendOptions& opt,
                                        std::mt19937_64& rng);

}  // namespace tessera
