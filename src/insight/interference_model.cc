#include "insight/interference_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace tessera {

const char* objective_name(Objective o) {
  switch (o) {
    case Objective::kBalance:
      return "balance";
    case Objective::kMinIndSD:
      return "min-indsd";
    case Objective::kMaxPacSav:
      return "max-pacsav";
    case Objective::kMaxPacSavDuration:
      return "max-pacsav-dur";
    case Objective::kMinIndSDDuration:
      return "min-indsd-dur";
  }
  return "?";
}

InterferenceModel::InterferenceModel(size_t clusters)
    : k_(clusters),
      indsd_sum_(clusters * clusters, 0),
      indsd_sq_(clusters * clusters, 0),
      indsd_w_(clusters * clusters, 0),
      pacsav_sum_(clusters * clusters, 0),
      pacsav_sq_(clusters * clusters, 0),
      pacsav_w_(clusters * clusters, 0) {}

void InterferenceModel::observe(uint32_t a, uint32_t b, double indsd_a, double indsd_b,
                                double pacsav, double weight) {
  if (a >= k_ || b >= k_) throw std::out_of_range("interference model: cluster out of range");
  if (weight <= 0) return;
  indsd_sum_[idx(a, b)] += weight * indsd_a;
  indsd_sq_[idx(a, b)] += weight * indsd_a * indsd_a;
  indsd_w_[idx(a, b)] += weight;
  indsd_sum_[idx(b, a)] += weight * indsd_b;
  indsd_sq_[idx(b, a)] += weight * indsd_b * indsd_b;
  indsd_w_[idx(b, a)] += weight;
  const size_t s = idx(std::min(a, b), std::max(a, b));
  pacsav_sum_[s] += weight * pacsav;
  pacsav_sq_[s] += weight * pacsav * pacsav;
  pacsav_w_[s] += weight;
  all_indsd_sum_ += weight * (indsd_a + indsd_b);
  all_indsd_w_ += 2 * weight;
  all_pacsav_sum_ += weight * pacsav;
  all_pacsav_w_ += weight;
}

double InterferenceModel::pacsav_of_speeds(double sa, double sb) {
  sa = std::clamp(sa, 1e-6, 1.0);
  sb = std::clamp(sb, 1e-6, 1.0);
  // Both have work 1. The faster finishes at t1 = 1/s_fast; the slower has done s_slow * t1
  // and runs the rest alone at speed 1.
  const double fast = std::max(sa, sb), slow = std::min(sa, sb);
  const double t1 = 1.0 / fast;
  const double max_jc = t1 + (1.0 - slow * t1);
  return (2.0 - max_jc) / 2.0;
}

double InterferenceModel::pacsav_of_work(double wa, double wb, double sa, double sb) {
  wa = std::max(wa, 0.0);
  wb = std::max(wb, 0.0);
  if (wa + wb <= 0) return 0;
  sa = std::clamp(sa, 1e-6, 1.0);
  sb = std::clamp(sb, 1e-6, 1.0);
  // Co-located until the first finishes at t1; the other's work left then runs alone.
  const double ta = wa / sa, tb = wb / sb;
  const double t1 = std::min(ta, tb);
  const double left = ta <= tb ? wb - sb * t1 : wa - sa * t1;
  return (wa + wb - (t1 + std::max(left, 0.0))) / (wa + wb);
}

double InterferenceModel::indsd_per_work(double total_a, double total_b, double sa, double sb) {
  sa = std::clamp(sa, 1e-6, 1.0);
  sb = std::clamp(sb, 1e-6, 1.0);
  const double ra = total_a > 0 ? (1.0 - sa) / total_a : 0.0;
  const double rb = total_b > 0 ? (1.0 - sb) / total_b : 0.0;
  return (ra + rb) / (sa + sb);
}

void InterferenceModel::observe_speeds(uint32_t a, uint32_t b, double speed_a, double speed_b,
                                       double weight) {
  const double sa = std::clamp(speed_a, 1e-6, 1.0), sb = std::clamp(speed_b, 1e-6, 1.0);
  observe(a, b, 1.0 / sa - 1.0, 1.0 / sb - 1.0, pacsav_of_speeds(sa, sb), weight);
}

double InterferenceModel::indsd(uint32_t a, uint32_t b) const {
  const size_t i = idx(a, b);
  if (indsd_w_[i] > 0) return indsd_sum_[i] / indsd_w_[i];
  return all_indsd_w_ > 0 ? all_indsd_sum_ / all_indsd_w_ : 0.0;
}

double InterferenceModel::pacsav(uint32_t a, uint32_t b) const {
  const size_t s = idx(std::min(a, b), std::max(a, b));
  if (pacsav_w_[s] > 0) return pacsav_sum_[s] / pacsav_w_[s];
  return all_pacsav_w_ > 0 ? all_pacsav_sum_ / all_pacsav_w_ : 0.0;
}

double InterferenceModel::runs(uint32_t a, uint32_t b) const {
  return pacsav_w_[idx(std::min(a, b), std::max(a, b))];
}

namespace {
double stderr_of(double sum, double sq, double n) {
  if (n < 2) return std::numeric_limits<double>::infinity();
  const double mean = sum / n;
  const double var = std::max(0.0, sq / n - mean * mean) * n / (n - 1);
  return std::sqrt(var / n);
}
}  // namespace

double InterferenceModel::indsd_stderr(uint32_t a, uint32_t b) const {
  const size_t i = idx(a, b);
  return stderr_of(indsd_sum_[i], indsd_sq_[i], indsd_w_[i]);
}

double InterferenceModel::pacsav_stderr(uint32_t a, uint32_t b) const {
  const size_t s = idx(std::min(a, b), std::max(a, b));
  return stderr_of(pacsav_sum_[s], pacsav_sq_[s], pacsav_w_[s]);
}

double InterferenceModel::score(uint32_t a, uint32_t b, Objective o, double w) const {
  switch (o) {
    case Objective::kMinIndSD:
    case Objective::kMinIndSDDuration:
      return -pair_indsd(a, b);
    case Objective::kMaxPacSav:
    case Objective::kMaxPacSavDuration:
      return pacsav(a, b);
    case Objective::kBalance:
      break;
  }
  return w * pacsav(a, b) - (1.0 - w) * pair_indsd(a, b);
}

std::vector<InterferenceModel::RankedPair> InterferenceModel::ranking(Objective o, double w) const {
  std::vector<RankedPair> out;
  for (uint32_t a = 0; a < k_; ++a) {
    for (uint32_t b = a; b < k_; ++b) {
      out.push_back({a, b, pair_indsd(a, b), pacsav(a, b), score(a, b, o, w), runs(a, b)});
    }
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const RankedPair& x, const RankedPair& y) { return x.score > y.score; });
  return out;
}

void PairSpeedTable::set(uint32_t a, uint32_t b, double speed_a, double speed_b) {
  auto& x = speed_[key(a, b)];
  x.first += speed_a;
  x.second += 1;
  auto& y = speed_[key(b, a)];
  y.first += speed_b;
  y.second += 1;
}

std::optional<double> PairSpeedTable::measured(uint32_t job, uint32_t partner) const {
  auto it = speed_.find(key(job, partner));
  if (it == speed_.end()) return std::nullopt;
  return it->second.first / it->second.second;
}

double PairSpeedTable::speed(uint32_t job, uint32_t partner, uint32_t jc, uint32_t pc,
                             const InterferenceModel& fallback) const {
  if (auto s = measured(job, partner)) return *s;
  return fallback.pair_speed(jc, pc);
}

}  // namespace tessera
