// Dropout's mask straight from its definition, on a Philox4x32-10 written out round by round.
#include "support/reference_dropout.hpp"

#include <cmath>

#include "scaletrain/core/error.hpp"

namespace scaletrain::test {

namespace {

// The high and low 32 bits of a * b.
void mulhilo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  const uint64_t product = static_cast<uint64_t>(a) * static_cast<uint64_t>(b);
  hi = static_cast<uint32_t>(product >> 32);
  lo = static_cast<uint32_t>(product & 0xFFFFFFFFull);
}

std::array<uint32_t, 4> philox_round(const std::array<uint32_t, 4>& x, const std::array<uint32_t, 2>& k) {
  uint32_t hi0, lo0, hi1, lo1;
  mulhilo(0xD2511F53u, x[0], hi0, lo0);
  mulhilo(0xCD9E8D57u, x[2], hi1, lo1);
  return {hi1 ^ x[1] ^ k[0], lo1, hi0 ^ x[3] ^ k[1], lo0};
}

}  // namespace

std::array<uint32_t, 4> reference_philox4x32_10(const std::array<uint32_t, 4>& counter,
                                                const std::array<uint32_t, 2>& key) {
  // Round r uses the key plus r times the Weyl increments.
  std::array<uint32_t, 4> x = counter;
  for (uint32_t r = 0; r < 10; ++r) {
    const std::array<uint32_t, 2> k{key[0] + r * 0x9E3779B9u, key[1] + r * 0xBB67AE85u};
    x = philox_round(x, k);
  }
  return x;
}

std::vector<bool> reference_dropout_mask(int64_t n, double p, const std::array<uint32_t, 2>& key, uint64_t position) {
  ST_CHECK(p >= 0.0 && p < 1.0, "reference dropout: p " << p);
  std::vector<bool> keep(static_cast<std::size_t>(n), true);
  if (p == 0.0) return keep;
  const double t = std::round((1.0 - p) * 4294967296.0);
  const uint64_t threshold = t > 4294967295.0 ? 4294967295ull : static_cast<uint64_t>(t);
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t block = static_cast<uint64_t>(i) / 4;
    const std::array<uint32_t, 4> w =
        reference_philox4x32_10({static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
                                 static_cast<uint32_t>(position), static_cast<uint32_t>(position >> 32)},
                                key);
    keep[static_cast<std::size_t>(i)] = w[i % 4] < threshold;
  }
  return keep;
}

std::vector<double> reference_dropout(const std::vector<double>& x, double p, const std::array<uint32_t, 2>& key,
                                      uint64_t position) {
  const std::vector<bool> keep = reference_dropout_mask(static_cast<int64_t>(x.size()), p, key, position);
  const double scale = static_cast<float>(1.0 / (1.0 - p));
  std::vector<double> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = keep[i] ? x[i] * scale : 0.0;
  return y;
}

}  // namespace scaletrain::test
