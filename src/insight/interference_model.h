// What co-locating two jobs on one GPU costs, per pair of knowledge-base clusters: each job's
// individual slowdown IndSD(j) = (J_c(j) - J_a(j)) / J_a(j) and the pair's packing saving
// PacSav = (sum J_a - max J_c) / sum J_a (DESIGN.md; Ray et al. 2023), where J_a is a job's
// completion time alone and J_c co-located. Seeded from measured runs and updated after every
// co-located run finishes; pairs never observed fall back to the mean over all observations.
//
// The pair-speed model lives here too, so the main simulator's execution model can use it: a
// job's speed beside a partner is measured where the pair was measured (PairSpeedTable), else
// the cluster-pair mean 1 / (1 + IndSD).
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

namespace tessera {

// What the recommender optimises when it picks a competitor job for a GPU.
enum class Objective {
  kBalance,    // weighted PacSav minus mean IndSD
  kMinIndSD,   // lowest mean individual slowdown of the pair
  kMaxPacSav,  // highest packing saving
  // Duration-aware (need each job's estimated time alone; without estimates they fall back to
  // kMaxPacSav / kMinIndSD). The pair speeds still come from the cluster-pair model.
  kMaxPacSavDuration,  // expected PacSav of the pair from the estimated remaining times
  kMinIndSDDuration,   // lowest IndSD accrued per second of work the pair does
};
const char* objective_name(Objective o);

class InterferenceModel {
 public:
  explicit InterferenceModel(size_t clusters = 0);
  size_t clusters() const { return k_; }

  // A measured co-located run: each job's IndSD (fractions, 0.075 = 7.5 %) and the pair's
  // PacSav (fraction). `weight` counts it as that many runs.
  void observe(uint32_t a, uint32_t b, double indsd_a, double indsd_b, double pacsav,
               double weight = 1);
  // A run where the two jobs progressed at `speed_a` and `speed_b` of their speed alone (0, 1]:
  // IndSD = 1/speed - 1; PacSav as for two jobs of equal work started together (the faster one
  // finishes first, the other continues alone).
  void observe_speeds(uint32_t a, uint32_t b, double speed_a, double speed_b, double weight = 1);
  static double pacsav_of_speeds(double speed_a, double speed_b);
  // PacSav of two jobs with `work_a` and `work_b` seconds of work (alone) left, started together
  // at `speed_a` and `speed_b`; the one left over runs the rest alone: (sum J_a - max J_c) /
  // sum J_a. Equal work gives pacsav_of_speeds. 0 when both works are 0.
  static double pacsav_of_work(double work_a, double work_b, double speed_a, double speed_b);
  // Slowdown the pair accrues per second of work it does: each job's IndSD grows by
  // (1 - speed) / work_total per second co-located, and the pair does speed_a + speed_b seconds
  // of work per second; `total_*` are the jobs' whole times alone (the IndSD denominators).
  static double indsd_per_work(double total_a, double total_b, double speed_a, double speed_b);

  // Expected IndSD of a cluster-a job beside a cluster-b job (fraction).
  double indsd(uint32_t a, uint32_t b) const;
  // Mean of both jobs' IndSD.
  double pair_indsd(uint32_t a, uint32_t b) const { return (indsd(a, b) + indsd(b, a)) / 2; }
  double pacsav(uint32_t a, uint32_t b) const;
  // Speed of a cluster-a job beside a cluster-b job relative to alone: 1 / (1 + IndSD).
  double pair_speed(uint32_t a, uint32_t b) const { return 1.0 / (1.0 + indsd(a, b)); }
  // Runs observed for the (unordered) pair.
  double runs(uint32_t a, uint32_t b) const;
  // Standard error of indsd(a, b) (the spread of the observations over sqrt(runs)); infinite
  // with fewer than 2 observations of the directed pair.
  double indsd_stderr(uint32_t a, uint32_t b) const;
  // Standard error of pacsav(a, b), likewise.
  double pacsav_stderr(uint32_t a, uint32_t b) const;
  // The score an objective gives the pair (higher is better); `balance_weight` w gives
  // w * PacSav - (1 - w) * pair IndSD.
  // The duration-aware objectives score here as their cluster-level fallbacks.
  double score(uint32_t a, uint32_t b, Objective o, double balance_weight = 0.5) const;

  struct RankedPair {
    uint32_t a = 0, b = 0;  // a <= b
    double indsd = 0, pacsav = 0, score = 0, runs = 0;
  };
  // Every unordered cluster pair, best first under `o`.
  std::vector<RankedPair> ranking(Objective o, double balance_weight = 0.5) const;

 private:
  size_t idx(uint32_t a, uint32_t b) const { return static_cast<size_t>(a) * k_ + b; }
  size_t k_;
  std::vector<double> indsd_sum_, indsd_sq_, indsd_w_;     // directed: [a][b] = a beside b
  std::vector<double> pacsav_sum_, pacsav_sq_, pacsav_w_;  // symmetric, stored at [min][max]
  double all_indsd_sum_ = 0, all_indsd_w_ = 0, all_pacsav_sum_ = 0, all_pacsav_w_ = 0;
};

// Measured speeds of individual job pairs (ids of a job catalogue), the ground truth a
// co-location simulator runs at. Repeated measurements of a pair are averaged.
class PairSpeedTable {
 public:
  // Speeds relative to alone: `speed_a` of job a beside job b, `speed_b` of b beside a.
  void set(uint32_t a, uint32_t b, double speed_a, double speed_b);
  std::optional<double> measured(uint32_t job, uint32_t partner) const;
  size_t pairs() const { return speed_.size(); }
  // Measured speed of `job` beside `partner`, else the cluster-pair mean of `fallback`.
  double speed(uint32_t job, uint32_t partner, uint32_t job_cluster, uint32_t partner_cluster,
               const InterferenceModel& fallback) const;

 private:
  static uint64_t key(uint32_t a, uint32_t b) { return (static_cast<uint64_t>(a) << 32) | b; }
  std::unordered_map<uint64_t, std::pair<double, double>> speed_;  // directed: (sum, count)
};

}  // namespace tessera
