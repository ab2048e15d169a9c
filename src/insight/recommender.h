// Recommends a competitor job for a GPU that already hosts some jobs (the residents): the
// queued job whose cluster pairs best with the residents' clusters under an objective
// (InterferenceModel::score). For "maximise PacSav" the candidates are first bin-packed: the
// residents' and the candidate's peak GPU utilisation (or peak memory) must sum to at most 100.
// Lower uncertainty (distance to the cluster centre) wins ties, then queue order; with
// probability epsilon the choice explores: a uniformly random feasible candidate.
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
};

struct Recommendation {
  size_t index = 0;  // into the queue
  double score = 0;
  bool explored = false;
};

// Whether `c` fits beside `residents` under `p`.
bool fits(std::span<const Candidate> residents, const Candidate& c, Packing p);

// Mean over residents of the pair score (0 with no residents); without the opportunity cost.
double pair_score(std::span<const Candidate> residents, const Candidate& c,
                  const InterferenceModel& model, const RecommendOptions& opt);

// The recommended queue index, or nullopt when no candidate fits. Draws from `rng` only when
// 0 < epsilon (once per call, plus once more when exploring).
std::optional<Recommendation> recommend(std::span<const Candidate> residents,
                                        std::span<const Candidate> queue,
                                        const InterferenceModel& model, const RecommendOptions& opt,
                                        std::mt19937_64& rng);

}  // namespace tessera
