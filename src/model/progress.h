// How far a long computation is, for a progress line on a terminal: simulations,
// experiments and evaluations report to a callback, and the CLI decides whether and how to
// show it. Reporting is cheap; callers report every so many steps, not every step.
#pragma once

#include <functional>
#include <string>

namespace tessera {

struct Progress {
  double done = 0;     // units finished (jobs, runs, seeds)
  double total = 0;    // units in all; 0 when unknown
  std::string detail;  // what else a reader wants to know ("simulated 12.3 h")
};
using ProgressFn = std::function<void(const Progress&)>;

}  // namespace tessera
