#include "engine/goodput_model.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace tessera {

namespace {

constexpr double kEps = 1e-8;  // tolerance of the ceil() in batch splits (as Pollux's)

// Least-squares a + b x with a, b >= 0 (the times cannot fall with the batch or the replicas).
// One distinct x: the slope is not identifiable; `split` says how to divide the mean then
// (the share that goes to the constant).
std::pair<double, double> fit_line(const std::vector<double>& x, const std::vector<double>& y,
                                   double split) {
  const auto n = static_cast<double>(x.size());
  double mx = 0, my = 0;
  for (size_t i = 0; i < x.size(); ++i) mx += x[i] / n, my += y[i] / n;
  double sxx = 0, sxy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    sxx += (x[i] - mx) * (x[i] - mx);
    sxy += (x[i] - mx) * (y[i] - my);
  }
  if (sxx < 1e-12) {
    const double a = my * split;
    return {a, mx > 0 ? (my - a) / mx : 0.0};
  }
  double b = sxy / sxx;
  double a = my - b * mx;
  if (b < 0) return {my, 0.0};
  if (a < 0) {
    double sx2 = 0, sxy0 = 0;
    for (size_t i = 0; i < x.size(); ++i) sx2 += x[i] * x[i], sxy0 += x[i] * y[i];
    return {0.0, sx2 > 0 ? sxy0 / sx2 : 0.0};
  }
  return {a, b};
}

BatchSplit split_local(const BatchLimits& l, double local, int replicas) {
  BatchSplit s;
  s.accum_steps = std::max(0, static_cast<int>(std::ceil(local / l.max_local - kEps)) - 1);
  if (replicas == 1 && local > l.init_batch + kEps) s.accum_steps = std::max(1, s.accum_steps);
  s.atomic_bsz = static_cast<int>(std::ceil(local / (s.accum_steps + 1) - kEps));
  return s;
}

}  // namespace

std::vector<BatchSplit> candidate_splits(const BatchLimits& l, int replicas) {
  std::vector<BatchSplit> out;
  if (replicas < 1 || l.max_local < 1) return out;
  if (l.fixed_batch > 0) {
    out.push_back(fixed_split(l, l.fixed_batch, replicas));
    return out;
  }
  const double lo = std::max<double>(l.init_batch, static_cast<double>(l.min_local) * replicas);
  const double hi = l.max_batch;
  if (lo > hi + kEps) return out;
  constexpr int kPoints = 50;
  for (int i = 0; i < kPoints; ++i) {
    const double batch =
        hi > lo ? lo * std::pow(hi / lo, static_cast<double>(i) / (kPoints - 1)) : lo;
    const BatchSplit s = split_local(l, batch / replicas, replicas);
    if (s.atomic_bsz < l.min_local || s.atomic_bsz > l.max_local) continue;
    if (!out.empty() && out.back().atomic_bsz == s.atomic_bsz &&
        out.back().accum_steps == s.accum_steps) {
      continue;
    }
    out.push_back(s);
  }
  return out;
}

BatchSplit fixed_split(const BatchLimits& l, int batch, int replicas) {
  if (replicas < 1) throw std::invalid_argument("a batch split needs >= 1 replica");
  const double local = std::ceil(static_cast<double>(batch) / replicas - kEps);
  BatchSplit s = split_local(l, local, replicas);
  const int count = replicas * (s.accum_steps + 1);
  // As Pollux: the batch actually trained with never exceeds max_batch.
  if (l.max_batch > 0) s.atomic_bsz = std::min(s.atomic_bsz, l.max_batch / count);
  s.atomic_bsz = std::max(1, s.atomic_bsz);
  return s;
}

GoodputModel::GoodputModel(BatchLimits limits) : limits_(limits) {
  if (limits_.init_batch < 1 || limits_.max_local < 1 || limits_.min_local < 1 ||
      limits_.max_batch < limits_.init_batch) {
    throw std::invalid_argument(
        "goodput model: batch limits need 1 <= init_batch <= max_batch "
        "and 1 <= min_local <= max_local");
  }
}

void GoodputModel::report(const StepReport& r) {
  if (r.replicas < 1 || r.nodes < 1 || r.atomic_bsz < 1 || !(r.step_time > 0) || r.sync_time < 0 ||
      r.sync_time > r.step_time) {
    throw std::invalid_argument(
        "goodput model: a step report needs replicas, nodes and batch "
        ">= 1 and 0 <= sync_time <= step_time > 0");
  }
  const auto key = std::make_tuple(r.nodes, r.replicas, r.atomic_bsz);
  if (obs_.count(key) != 0) return;
  obs_[key] = {r.step_time, r.sync_time};
  max_replicas_ = std::max(max_replicas_, r.replicas);
  fit();
}

// The model, as Pollux's but with compute and network adding up (its overlap exponent fixed at
// 1): the reported step is exactly compute + sync. Parameters the reports cannot identify take
// Pollux's optimistic priors: no multi-GPU report, no network cost; no multi-node report, the
// network across nodes 10 % slower than within one.
void GoodputModel::fit() {
  std::vector<double> bsz, compute, xn, yn, xr, yr;
  double single = 0;
  int singles = 0;
  for (const auto& [k, v] : obs_) {
    const auto [nodes, replicas, atomic] = k;
    bsz.push_back(atomic);
    compute.push_back(std::max(kEps, v.first - v.second));
    const double x = std::max(0, replicas - 2);
    if (nodes > 1) {
      xn.push_back(x), yn.push_back(v.second);
    } else if (replicas > 1) {
      xr.push_back(x), yr.push_back(v.second);
    } else {
      single += v.second, ++singles;
    }
  }
  p_ = Params{};
  // A single GPU's "sync" (the optimizer step after the gradients are in) is a constant.
  p_.alpha_1 = singles > 0 ? single / singles : 0.0;
  std::tie(p_.alpha_c, p_.beta_c) = fit_line(bsz, compute, 0.5);
  if (!xr.empty()) std::tie(p_.alpha_r, p_.beta_r) = fit_line(xr, yr, 1.0);
  if (!xn.empty()) {
    std::tie(p_.alpha_n, p_.beta_n) = fit_line(xn, yn, 1.0);
  } else {
    p_.alpha_n = 1.1 * p_.alpha_r;
    p_.beta_n = 1.1 * p_.beta_r;
  }
}

double GoodputModel::efficiency(double batch) const {
  if (!has_grad_) return 1.0;
  const double scale = batch / limits_.init_batch;
  const double denom = grad_.var / scale + grad_.sqr;
  const double gain = denom > 0 ? (grad_.var + grad_.sqr) / denom : 1.0;
  return gain / scale;
}

double GoodputModel::iteration_time(int nodes, int replicas, const BatchSplit& s) const {
  const double compute = p_.alpha_c + p_.beta_c * s.atomic_bsz;
  const double x = std::max(0, replicas - 2);
  double network = 0;
  if (nodes > 1) {
    network = p_.alpha_n + p_.beta_n * x;
  } else if (replicas > 1) {
    network = p_.alpha_r + p_.beta_r * x;
  } else {
    network = p_.alpha_1;
  }
  return compute * (s.accum_steps + 1) + network;
}

GoodputChoice GoodputModel::best(int nodes, int replicas) const {
  GoodputChoice out;
  for (const BatchSplit& s : candidate_splits(limits_, replicas)) {
    const double t = iteration_time(nodes, replicas, s);
    if (!(t > 0)) continue;
    const auto batch = static_cast<double>(s.batch(replicas));
    const double g = batch / t * efficiency(batch);
    if (g > out.goodput) out = GoodputChoice{g, s};
  }
  return out;
}

void GoodputModel::report_progress(double done, double total) {
  if (!(done >= 0) || !(total > 0)) {
    throw std::invalid_argument("goodput model: progress needs 0 <= done and total > 0");
  }
  done_ = std::min(done, total);
  total_ = total;
}

double GoodputModel::remaining_gpu_seconds() const {
  if (total_ < 0 || !profiled()) return -1;
  const double rate = best(1, 1).goodput / limits_.init_batch;  // progress per second
  return rate > 0 ? (total_ - done_) / rate : -1;
}

double GoodputModel::speedup(int nodes, int replicas) const {
  if (!profiled()) return replicas;
  const double base = best(1, 1).goodput;
  return base > 0 ? best(nodes, replicas).goodput / base : replicas;
}

std::vector<double> GoodputModel::speedup_curve(int max_replicas, int gpus_per_node) const {
  std::vector<double> out(static_cast<size_t>(std::max(0, max_replicas)) + 1, 0.0);
  const int per_node = std::max(1, gpus_per_node);
  const double base = profiled() ? best(1, 1).goodput : 0.0;
  for (int n = 1; n <= max_replicas; ++n) {
    const int nodes = (n + per_node - 1) / per_node;
    out[static_cast<size_t>(n)] = base > 0 ? best(nodes, n).goodput / base : n;
  }
  return out;
}

}  // namespace tessera
