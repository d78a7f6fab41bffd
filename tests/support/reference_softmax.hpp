// Test support: naive float64 masked softmax over the last dimension of (N, H, Lq, Lk) scores,
// the definition of include/scaletrain/ops/softmax.hpp.
#pragma once

#include <cstdint>
#include <vector>

namespace scaletrain::test {

struct RefScores {
  int64_t n, heads, lq, lk;
};

// y: softmax over the valid keys of each row (min(length, i + 1) with causal), 0 elsewhere.
std::vector<double> reference_masked_softmax(const RefScores& s, const std::vector<double>& x,
                                             const std::vector<int32_t>& key_lengths, bool causal);
// d<dy, y>/dx for y = reference_masked_softmax(x): y * (dy - sum(dy * y)) per row.
std::vector<double> reference_masked_softmax_backward(const RefScores& s, const std::vector<double>& y,
                                                      const std::vector<double>& dy);

}  // namespace scaletrain::test
