#include "sim/generator.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
#include <string>

namespace tessera {

namespace {

// Uniform in (0, 1), never 0 or 1: the 53 high bits of one draw, centred in their interval,
// so that log(u) and the normal quantile stay finite.
double uniform_open(std::mt19937_64& rng) {
  const uint64_t bits = rng() >> 11;
  return (static_cast<double>(bits) + 0.5) * 0x1.0p-53;
}

// Standard normal quantile: Acklam's rational approximation (relative error < 1.2e-9), ample
// for durations rounded to seconds.
double normal_quantile(double p) {
  static constexpr double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,
                                 -2.759285104469687e+02, 1.383577518672690e+02,
                                 -3.066479806614716e+01, 2.506628277459239e+00};
  static constexpr double b[] = {-5.447609879822406e+01, 1.615858368580409e+02,
                                 -1.556989798598866e+02, 6.680131188771972e+01,
                                 -1.328068155288572e+01};
  static constexpr double c[] = {-7.784894002430293e-03, -3.223964580411365e-01,
                                 -2.400758277161838e+00, -2.549732539343734e+00,
                                 4.374664141464968e+00,  2.938163982698783e+00};
  static constexpr double d[] = {7.784695709041462e-03, 3.224671290700398e-01,
                                 2.445134137142996e+00, 3.754408661907416e+00};
  constexpr double kLow = 0.02425;
  if (p < kLow) {
    const double q = std::sqrt(-2 * std::log(p));
    return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
           ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  }
  if (p > 1 - kLow) {
    const double q = std::sqrt(-2 * std::log(1 - p));
    return -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
           ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  }
  const double q = p - 0.5;
  const double r = q * q;
  return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
         (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
}

// Index drawn with probability proportional to weights[i].
template <size_t N>
size_t pick_weighted(std::mt19937_64& rng, const std::array<double, N>& weights, double total) {
  double u = uniform_open(rng) * total;
  for (size_t i = 0; i + 1 < N; ++i) {
    if (u < weights[i]) return i;
    u -= weights[i];
  }
  return N - 1;
}

size_t pick_uniform(std::mt19937_64& rng, size_t n) {
  return std::min(n - 1, static_cast<size_t>(uniform_open(rng) * static_cast<double>(n)));
}

struct PolluxApp {
  const char* name;
  int32_t batch_size;  // the most common initial batch size in Pollux's workloads/
};
constexpr PolluxApp kPolluxApps[] = {{"bert", 384},      {"cifar10", 2048}, {"deepspeech2", 320},
                                     {"imagenet", 6400}, {"ncf", 32768},    {"yolov3", 64}};

}  // namespace

Workload generate_workload(const GeneratorOptions& opt) {
  double total_weight = 0;
  for (double x : opt.gang_weights) {
    if (!(x >= 0) || !std::isfinite(x)) throw std::invalid_argument("gang weights must be >= 0");
    total_weight += x;
  }
  if (opt.jobs < 0 || opt.tenants < 1 || !(opt.mean_interarrival_s >= 0) || !(total_weight > 0) ||
      !(opt.duration_median_s > 0) || !(opt.duration_sigma >= 0) || !(opt.min_duration_s > 0) ||
      !(opt.max_duration_s >= opt.min_duration_s) || opt.fraction_share_pct < 0 ||
      opt.fraction_share_pct > 100 || !(opt.restart_cost_s >= 0)) {
    throw std::invalid_argument("generate_workload: invalid options");
  }
  std::mt19937_64 rng(opt.seed);
  Workload w;
  for (int t = 0; t < opt.tenants; ++t) w.tenants.intern("tenant-" + std::to_string(t));
  static constexpr int32_t kGangSizes[] = {1, 2, 4, 8, 16};
  static constexpr int32_t kShares[] = {250, 500, 750};
  const double mu = std::log(opt.duration_median_s);
  double clock = 0;
  w.jobs.reserve(static_cast<size_t>(opt.jobs));
  for (int i = 0; i < opt.jobs; ++i) {
    // Every draw happens for every job, in a fixed order, so that changing one option (say
    // fraction_share_pct) does not shift the random stream of the others.
    const double u_gap = uniform_open(rng);
    const double u_tenant = uniform_open(rng);
    const size_t gang = pick_weighted(rng, opt.gang_weights, total_weight);
    const double u_duration = uniform_open(rng);
    const double u_fraction = uniform_open(rng);
    const size_t share = pick_uniform(rng, std::size(kShares));
    const size_t app = pick_uniform(rng, std::size(kPolluxApps));

    if (i > 0) clock += -opt.mean_interarrival_s * std::log(u_gap);
    JobSpec j;
    j.name = "job-" + std::to_string(i);
    j.tenant = static_cast<TenantId>(std::min<size_t>(static_cast<size_t>(opt.tenants) - 1,
                                                      static_cast<size_t>(u_tenant * opt.tenants)));
    j.submit_time = std::round(clock);
    j.min_members = j.max_members = kGangSizes[gang];
    if (kGangSizes[gang] == 1 && u_fraction * 100 < opt.fraction_share_pct) {
      j.demand.gpu_milli = kShares[share];
    }
    j.restart_cost = opt.restart_cost_s;
    if (opt.pollux_models) {
      j.model = w.models.intern(kPolluxApps[app].name);
      j.batch_size = kPolluxApps[app].batch_size;
      j.work_seconds = kUnknown;
      j.duration_estimate = kUnknown;
    } else {
      const double raw = std::exp(mu + opt.duration_sigma * normal_quantile(u_duration));
      j.work_seconds = std::clamp(std::round(raw), opt.min_duration_s, opt.max_duration_s);
      j.duration_estimate = j.work_seconds;
    }
    j.source = "generator:" + std::to_string(i);
    w.jobs.push_back(std::move(j));
  }
  sort_by_submit(w);  // already in order; keeps the Workload invariant explicit
  return w;
}

}  // namespace tessera
