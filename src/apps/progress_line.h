// A progress line on stderr for long commands: "simulate: 41% (33,912/82,247)
// simulated 310.2 h, 1,204 waiting · 5,120/s · ETA 0:09", redrawn at most 4 times a second and
// cleared at the end. Only when stderr is a terminal: piped or redirected, nothing is written.
#pragma once

#include <chrono>
#include <string>

#include "model/progress.h"

namespace tessera {

class ProgressLine {
 public:
  // `label` starts the line. `enabled`: normally whether stderr is a terminal.
  explicit ProgressLine(std::string label, bool enabled = stderr_is_terminal());
  ~ProgressLine();
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  void update(const Progress& p);
  // A callback for SimOptions::progress and the like (null when disabled, so callers skip
  // even the formatting of details).
  ProgressFn callback();
  static bool stderr_is_terminal();

 private:
  std::string label_;
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_, last_;
};

}  // namespace tessera
