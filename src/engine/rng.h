// A small deterministic random generator (SplitMix64). The standard library's distributions
// differ across implementations, so policies draw from this and derive what they need
// themselves: the same seed gives the same decisions everywhere.
#pragma once

#include <cstdint>

namespace tessera {

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n), n > 0, by rejection so that every value is exactly equally likely.
  uint64_t below(uint64_t n) {
    const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do {
      x = next();
    } while (x >= limit);
    return x % n;
  }
  // Uniform in [0, 1) from the top 53 bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

 private:
  uint64_t state_;
};

// Mixes a seed with a stream number (e.g. the cycle), so every cycle draws independently.
inline uint64_t mix_seed(uint64_t seed, uint64_t stream) {
  Rng r(seed ^ (stream * 0xd1b54a32d192ed03ULL));
  return r.next();
}

}  // namespace tessera
