// Test support: dropout's mask from its definition (ops/dropout.hpp), with a Philox4x32-10 of
// its own written from the published algorithm rather than core/philox.hpp, so that a mistake in
// the header shows as a difference; and the float64 forward and backward on that mask.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace scaletrain::test {

// Random123's philox4x32(counter, key) with 10 rounds.
std::array<uint32_t, 4> reference_philox4x32_10(const std::array<uint32_t, 4>& counter,
                                                const std::array<uint32_t, 2>& key);

// The keep bit of each of n elements: word i % 4 of philox(counter = (i/4 low, i/4 high,
// position low, position high), key) < round((1 - p) * 2^32) clamped to 2^32 - 1; all kept for p = 0.
std::vector<bool> reference_dropout_mask(int64_t n, double p, const std::array<uint32_t, 2>& key, uint64_t position);

// y = keep ? x * scale : 0 with scale = float(1 / (1 - p)) (the kernels' scale, so that the
// float64 product is the one they round); the backward is the same map on dy.
std::vector<double> reference_dropout(const std::vector<double>& x, double p, const std::array<uint32_t, 2>& key,
                                      uint64_t position);

}  // namespace scaletrain::test
