#include "insight/recommender.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
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

namespace {

bool duration_aware(Objective o) {
  return o == Objective::kMaxPacSavDuration || o == Objective::kMinIndSDDuration;
}

// PacSav of the pair (remaining work wa, wb at speeds sa, sb) when the survivor's leftover is
// charged left / follow_a (a survives) or left / follow_b of GPU time.
double pacsav_followed(double wa, double wb, double sa, double sb, double follow_a,
                       double follow_b) {
  if (wa + wb <= 0) return 0;
  sa = std::clamp(sa, 1e-6, 1.0);
  sb = std::clamp(sb, 1e-6, 1.0);
  const double ta = wa / sa, tb = wb / sb;
  const double t1 = std::min(ta, tb);
  const double left =
      ta <= tb ? std::max(wb - sb * t1, 0.0) / follow_b : std::max(wa - sa * t1, 0.0) / follow_a;
  return (wa + wb - t1 - left) / (wa + wb);
}

// The duration-aware value at given pair speeds (s_r of the resident, s_c of the candidate);
// follow_*: the expected pair throughput the survivor gets next (1: it runs alone).
double duration_value(const Candidate& r, const Candidate& c, double s_r, double s_c, Objective o,
                      double follow_r = 1, double follow_c = 1) {
  if (o == Objective::kMaxPacSavDuration) {
    return pacsav_followed(r.remaining, c.remaining, s_r, s_c, follow_r, follow_c);
  }
  return -InterferenceModel::indsd_per_work(r.estimate, c.estimate, s_r, s_c);
}

bool has_durations(const Candidate& r, const Candidate& c, Objective o) {
  if (o == Objective::kMaxPacSavDuration) return r.remaining > 0 && c.remaining > 0;
  return r.estimate > 0 && c.estimate > 0;
}

// Standard error of pair_value (delta method on the pair means the value is made of).
double value_stderr(const Candidate& r, const Candidate& c, const InterferenceModel& m,
                    const RecommendOptions& opt) {
  const uint32_t a = c.cluster, b = r.cluster;
  const double se_ab = m.indsd_stderr(a, b), se_ba = m.indsd_stderr(b, a);
  switch (opt.objective) {
    case Objective::kMinIndSD:
      return std::sqrt(se_ab * se_ab + se_ba * se_ba) / 2;
    case Objective::kMaxPacSav:
      return m.pacsav_stderr(a, b);
    case Objective::kBalance:
      return opt.balance_weight * m.pacsav_stderr(a, b) +
             (1 - opt.balance_weight) * std::sqrt(se_ab * se_ab + se_ba * se_ba) / 2;
    case Objective::kMaxPacSavDuration:
    case Objective::kMinIndSDDuration:
      break;
  }
  if (!std::isfinite(se_ab) || !std::isfinite(se_ba))
    return std::numeric_limits<double>::infinity();
  if (!has_durations(r, c, opt.objective)) {
    return opt.objective == Objective::kMaxPacSavDuration
               ? m.pacsav_stderr(a, b)
               : std::sqrt(se_ab * se_ab + se_ba * se_ba) / 2;
  }
  // Both jobs one standard error slower than the pair means (the survivor taken to run alone
  // also for the queue-aware PacSav: a band, not a score).
  const double v = duration_value(r, c, m.pair_speed(b, a), m.pair_speed(a, b), opt.objective);
  const double slow = duration_value(r, c, 1.0 / (1.0 + m.indsd(b, a) + se_ba),
                                     1.0 / (1.0 + m.indsd(a, b) + se_ab), opt.objective);
  return std::abs(v - slow);
}

}  // namespace

double pair_value(const Candidate& r, const Candidate& c, const InterferenceModel& model,
                  const RecommendOptions& opt) {
  if (duration_aware(opt.objective) && has_durations(r, c, opt.objective)) {
    return duration_value(r, c, model.pair_speed(r.cluster, c.cluster),
                          model.pair_speed(c.cluster, r.cluster), opt.objective);
  }
  return model.score(c.cluster, r.cluster, opt.objective, opt.balance_weight);
}

double pair_score(std::span<const Candidate> residents, const Candidate& c,
                  const InterferenceModel& model, const RecommendOptions& opt) {
  if (residents.empty()) return 0;
  double s = 0;
  for (const Candidate& r : residents) s += pair_value(r, c, model, opt);
  return s / static_cast<double>(residents.size());
}

std::optional<Recommendation> recommend(std::span<const Candidate> residents,
                                        std::span<const Candidate> queue,
                                        const InterferenceModel& model, const RecommendOptions& opt,
                                        std::mt19937_64& rng) {
  const bool explore = opt.epsilon > 0 && uniform01(rng) < opt.epsilon;
  if (explore && !opt.directed_exploration) {
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
  // Queue-aware PacSav: the expected pair throughput of a survivor of each cluster beside the
  // queue (from the queue's cluster counts; 1 when nothing else waits).
  std::vector<double> follow;
  if (opt.queue_aware && opt.objective == Objective::kMaxPacSavDuration) {
    const size_t k = model.clusters();
    follow.assign(k, 1.0);
    if (queue.size() > 1) {
      std::vector<double> count(k, 0);
      for (const Candidate& c : queue) count[c.cluster] += 1;
      for (uint32_t a = 0; a < k; ++a) {
        double s = 0;
        for (uint32_t b = 0; b < k; ++b) {
          s += count[b] * (model.pair_speed(a, b) + model.pair_speed(b, a));
        }
        follow[a] = s / static_cast<double>(queue.size());
      }
    }
  }
  const bool durations = duration_aware(opt.objective);
  const auto value = [&](const Candidate& r, const Candidate& c) {
    if (!durations) return model.score(c.cluster, r.cluster, opt.objective, opt.balance_weight);
    if (follow.empty() || !has_durations(r, c, opt.objective)) {
      return pair_value(r, c, model, opt);
    }
    return duration_value(r, c, model.pair_speed(r.cluster, c.cluster),
                          model.pair_speed(c.cluster, r.cluster), opt.objective, follow[r.cluster],
                          follow[c.cluster]);
  };
  const auto score_of = [&](const Candidate& c) {
    if (residents.empty()) return 0.0;
    double s = 0;
    for (const Candidate& r : residents) s += value(r, c);
    return s / static_cast<double>(residents.size());
  };
  // Opportunity cost: a candidate's mean score against the other queued jobs. For the
  // cluster-pair objectives from the queue's cluster counts (O(k^2) per call, not O(queue^2)).
  // (Counting only the jobs that would fit beside the candidate under bin-packing was tried and
  // did no better: it ignores that the few jobs that fit beside a heavy one are contested.) For
  // the duration-aware ones, whose scores depend on each job's durations, against up to 32
  // other queued jobs, evenly spaced in the queue.
  std::vector<double> expected;         // by cluster
  std::vector<double> expected_by_job;  // duration-aware: by queue index
  if (opt.opportunity_cost && queue.size() > 1 && duration_aware(opt.objective)) {
    constexpr size_t kMaxPartners = 32;
    const size_t n = queue.size();
    const size_t step = (n - 1 + kMaxPartners - 1) / kMaxPartners;
    expected_by_job.assign(n, 0);
    for (size_t i = 0; i < n; ++i) {
      double s = 0, cnt = 0;
      for (size_t j = (i + 1) % n, seen = 0; seen < n - 1; j = (j + step) % n, seen += step) {
        if (j == i) continue;
        s += value(queue[j], queue[i]);
        cnt += 1;
      }
      expected_by_job[i] = cnt > 0 ? s / cnt : 0;
    }
  } else if (opt.opportunity_cost && queue.size() > 1) {
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
  // Directed exploration needs every feasible candidate's score.
  std::vector<std::pair<size_t, double>> scored;
  for (size_t i = 0; i < queue.size(); ++i) {
    const Candidate& c = queue[i];
    if (any_fits && !fits(residents, c, opt.packing)) continue;
    double s = score_of(c);
    if (!expected.empty()) s -= expected[c.cluster];
    if (!expected_by_job.empty()) s -= expected_by_job[i];
    if (explore) scored.emplace_back(i, s);
    const bool better =
        !best || s > best->score + kTie || (s >= best->score - kTie && c.uncertainty < best_unc);
    if (better) {
      best = Recommendation{i, s, false};
      best_unc = c.uncertainty;
    }
  }
  if (!explore || !best) return best;
  // Directed: among the candidates within the confidence band of the best, the least-observed
  // cluster pair (summed over residents), then the better score, then queue order.
  const auto stderr_of = [&](size_t i) {
    if (residents.empty()) return 0.0;
    double se = 0;
    for (const Candidate& r : residents) se += value_stderr(r, queue[i], model, opt);
    return se / static_cast<double>(residents.size());
  };
  const auto runs_of = [&](size_t i) {
    double n = 0;
    for (const Candidate& r : residents) n += model.runs(queue[i].cluster, r.cluster);
    return n;
  };
  const double best_se = stderr_of(best->index);
  std::optional<Recommendation> pick;
  double pick_runs = 0;
  for (const auto& [i, s] : scored) {
    const double band = opt.explore_z * (best_se + stderr_of(i));
    if (!(best->score - s <= band)) continue;  // NaN-safe: an infinite band admits everyone
    const double n = runs_of(i);
    if (!pick || n < pick_runs || (n == pick_runs && s > pick->score + kTie)) {
      pick = Recommendation{i, s, i != best->index};
      pick_runs = n;
    }
  }
  return pick ? pick : best;
}

}  // namespace tessera
