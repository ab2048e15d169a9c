#include "insight/recommender.h"

#include <algorithm>
#include <vector>

#include "insight/kmeans.h"

namespace tessera {

const char* packing_name(Packing p) {
  switch (p) {
    case Packing::kNone:
      return "none";
    case Packing::kGpuUtil:
      return "gpu-util";
    case Packing::kMemory:
      return "memory";
  }
  return "?";
}

bool fits(std::span<const Candidate> residents, const Candidate& c, Packing p) {
  if (p == Packing::kNone) return true;
  double sum = p == Packing::kGpuUtil ? c.features.gpu_util : c.features.mem_alloc;
  for (const Candidate& r : residents) {
    sum += p == Packing::kGpuUtil ? r.features.gpu_util : r.features.mem_alloc;
  }
  return sum <= 100.0 + 1e-9;
}

double pair_score(std::span<const Candidate> residents, const Candidate& c,
                  const InterferenceModel& model, const RecommendOptions& opt) {
  if (residents.empty()) return 0;
  double s = 0;
  for (const Candidate& r : residents) {
    s += model.score(c.cluster, r.cluster, opt.objective, opt.balance_weight);
  }
  return s / static_cast<double>(residents.size());
}

std::optional<Recommendation> recommend(std::span<const Candidate> residents,
                                        std::span<const Candidate> queue,
                                        const InterferenceModel& model, const RecommendOptions& opt,
                                        std::mt19937_64& rng) {
  const bool explore = opt.epsilon > 0 && uniform01(rng) < opt.epsilon;
  if (explore) {
    std::vector<size_t> feasible;
    for (size_t i = 0; i < queue.size(); ++i) {
      if (fits(residents, queue[i], opt.packing)) feasible.push_back(i);
    }
    if (feasible.empty() && !opt.strict_packing) {
      for (size_t i = 0; i < queue.size(); ++i) feasible.push_back(i);
    }
    if (feasible.empty()) return std::nullopt;
    const size_t i = feasible[uniform_below(rng, feasible.size())];
    return Recommendation{i, pair_score(residents, queue[i], model, opt), true};
  }
  // Opportunity cost: a candidate's mean score against the other queued jobs, from the queue's
  // cluster counts (O(k^2) per call, not O(queue^2)). (Counting only the jobs that would fit
  // beside the candidate under bin-packing was tried and did no better: it ignores that the
  // few jobs that fit beside a heavy one are contested.)
  std::vector<double> expected;
  if (opt.opportunity_cost && queue.size() > 1) {
    const size_t k = model.clusters();
    std::vector<double> count(k, 0);
    for (const Candidate& c : queue) count[c.cluster] += 1;
    expected.assign(k, 0);
    for (uint32_t a = 0; a < k; ++a) {
      if (count[a] == 0) continue;
      double s = 0;
      for (uint32_t b = 0; b < k; ++b) {
        const double n = count[b] - (a == b ? 1 : 0);
        if (n > 0) s += n * model.score(a, b, opt.objective, opt.balance_weight);
      }
      expected[a] = s / static_cast<double>(queue.size() - 1);
    }
  }
  std::optional<Recommendation> best;
  double best_unc = 0;
  constexpr double kTie = 1e-9;
  bool any_fits = opt.strict_packing || opt.packing == Packing::kNone;
  for (size_t i = 0; i < queue.size() && !any_fits; ++i) {
    any_fits = fits(residents, queue[i], opt.packing);
  }
  for (size_t i = 0; i < queue.size(); ++i) {
    const Candidate& c = queue[i];
    if (any_fits && !fits(residents, c, opt.packing)) continue;
    double s = pair_score(residents, c, model, opt);
    if (!expected.empty()) s -= expected[c.cluster];
    const bool better =
        !best || s > best->score + kTie || (s >= best->score - kTie && c.uncertainty < best_unc);
    if (better) {
      best = Recommendation{i, s, false};
      best_unc = c.uncertainty;
    }
  }
  return best;
}

}  // namespace tessera
