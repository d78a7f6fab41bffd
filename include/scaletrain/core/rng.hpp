// Seeded random numbers: xoshiro256** seeded through splitmix64, with our own uniform and normal
// transforms so that streams are identical across compilers and standard libraries.
#pragma once

#include <cstdint>

namespace scaletrain {

class Rng {
 public:
  explicit Rng(uint64_t seed);
  // Independent stream derived from (seed, a, b), e.g. (seed, epoch, rank).
  static Rng derive(uint64_t seed, uint64_t a, uint64_t b = 0);
  uint64_t next_u64();
  // Uniform integer in [0, n).
  uint64_t below(uint64_t n);
  // Uniform in [0, 1).
  double uniform();
  // Uniform in [lo, hi).
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  // Standard normal (Box-Muller).
  double normal();

 private:
  uint64_t s_[4];
  bool has_spare_ = false;
  double spare_ = 0.0;
};

}  // namespace scaletrain
