#include "engine/goodput_allocation.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace tessera {

namespace {

struct Step {
  int to = 0;        // GPUs after the step
  double ratio = 0;  // weighted value gained per GPU added
};

}  // namespace

std::vector<int> allocate_goodput(std::span<const GoodputDemand> jobs, int gpus,
                                  const GoodputAllocationOptions& o, const GoodputGroups* groups) {
  if (!(o.service_scale > 0) || o.service_exponent < 0 || o.restart_seconds < 0 ||
      !(o.max_restart_penalty >= 0) || !(o.max_restart_penalty < 1) ||
      !(o.min_restart_penalty >= 0)) {
    throw std::invalid_argument(
        "goodput allocation: service_scale must be > 0, "
        "service_exponent and restart_seconds >= 0 and "
        "max_restart_penalty in [0, 1)");
  }
  // What a restart costs job j by its run time alone (it is expected to run about as long
  // again as it has run).
  const auto run_penalty = [&](size_t j) {
    return jobs[j].run_seconds > 0
               ? std::min(o.max_restart_penalty, o.restart_seconds / jobs[j].run_seconds)
               : o.max_restart_penalty;
  };
  std::vector<int> n(jobs.size(), 0);
  std::vector<double> weight(jobs.size()), penalty(jobs.size());
  for (size_t j = 0; j < jobs.size(); ++j) {
    penalty[j] = std::max(run_penalty(j), std::min(o.min_restart_penalty, o.max_restart_penalty));
    // Levels, as Tiresias's queues: a job's weight changes only when its attained service
    // doubles, so that two jobs with nearly the same service do not swap GPUs every round.
    const double level =
        std::floor(std::log2(1.0 + std::max(0.0, jobs[j].attained_gpu_seconds) / o.service_scale));
    weight[j] = std::pow(2.0, -level * o.service_exponent);
    if (o.priority == GoodputPriority::kShortestRemaining && jobs[j].remaining_gpu_seconds >= 0) {
      weight[j] =
          std::pow(1.0 + jobs[j].remaining_gpu_seconds / o.service_scale, -o.service_exponent);
    }
  }
  // value(j, k): what k GPUs are worth to job j. Any count but the one it holds means a
  // restart, which costs it the fraction penalty[j] of its speedup.
  const auto value = [&](size_t j, int k) {
    const GoodputDemand& d = jobs[j];
    if (k <= 0) return 0.0;
    const double s = d.speedup[static_cast<size_t>(k)];
    return weight[j] * s * (k == d.current ? 1.0 : 1.0 - penalty[j]);
  };
  // The best next step of job j with `free` GPUs left: to any larger size (looking past sizes
  // worth less, such as a curve that dips when a job first spans two nodes), by value per GPU.
  const auto best_step = [&](size_t j, int free) {
    const GoodputDemand& d = jobs[j];
    const int max = static_cast<int>(d.speedup.size()) - 1;
    Step best;
    const double here = value(j, n[j]);
    const int lo = d.rigid ? (n[j] == 0 ? max : max + 1) : n[j] + 1;
    for (int k = lo; k <= max && k - n[j] <= free; ++k) {
      const double r = (value(j, k) - here) / (k - n[j]);
      if (r > best.ratio + 1e-12) best = Step{k, r};
    }
    return best;
  };
  int free = gpus;
  // With groups, GPUs given so far per group, and whether a fill keeps groups to their
  // entitlements.
  std::vector<int> used(groups ? groups->entitled.size() : 0, 0);
  bool capped = false;
  // What job j may still take: the free GPUs, and while capped its groups' room.
  const auto room = [&](size_t j) {
    int r = free;
    if (capped) {
      for (const int g : groups->groups_of[j]) r = std::min(r, groups->entitled[g] - used[g]);
    }
    return std::max(0, r);
  };
  std::vector<Step> next(jobs.size());
  const auto fill = [&] {
    for (size_t j = 0; j < jobs.size(); ++j) next[j] = best_step(j, room(j));
    while (free > 0) {
      size_t pick = jobs.size();
      for (size_t j = 0; j < jobs.size(); ++j) {
        if (next[j].to > n[j] && next[j].to - n[j] > room(j)) next[j] = best_step(j, room(j));
        if (next[j].to <= n[j]) continue;
        if (pick == jobs.size() || next[j].ratio > next[pick].ratio + 1e-12) pick = j;
      }
      if (pick == jobs.size()) break;
      const int step = next[pick].to - n[pick];
      free -= step;
      if (groups) {
        for (const int g : groups->groups_of[pick]) used[g] += step;
      }
      n[pick] = next[pick].to;
      next[pick] = best_step(pick, room(pick));
    }
  };
  if (groups) {
    capped = true;  // each group's entitlement first ...
    fill();
    capped = false;  // ... then what is left, to whoever gains most
  }
  fill();
  // GPUs nobody wanted at the floor's penalty would idle: jobs may still grow into them when
  // the gain pays for the restart by their run time alone (the floor guards against arrivals
  // taking GPUs back, and nobody wants these now).
  if (free > 0 && o.min_restart_penalty > 0) {
    for (size_t j = 0; j < jobs.size(); ++j) penalty[j] = run_penalty(j);
    fill();
  }
  return n;
}

}  // namespace tessera
