// A token bucket: at most `burst` events at once, refilled at `per_second`. Time is passed in
// (seconds, any epoch that only moves forward), so it works under a test clock and a
// simulated one alike.
#pragma once

#include <algorithm>

namespace tessera {

class TokenBucket {
 public:
  TokenBucket(double burst, double per_second)
      : burst_(burst), per_second_(per_second), tokens_(burst) {}

  // Takes one token at time `t` if there is one.
  // Takes `n` tokens at time `t` (all or none).
  bool take(double t, double n = 1) {
    if (last_ >= 0 && t > last_) tokens_ = std::min(burst_, tokens_ + (t - last_) * per_second_);
    if (last_ < 0 || t > last_) last_ = t;
    if (tokens_ < n) return false;
    tokens_ -= n;
    return true;
  }

 private:
  double burst_;
  double per_second_;
  double tokens_;
  double last_ = -1;
};

}  // namespace tessera
