// Test support: naive float64 flatten of channels-last (N, H, W, C) data in NCHW order,
// (N, C*H*W) with feature index c*H*W + h*W + w, and its inverse.
#pragma once

#include <cstdint>
#include <vector>

namespace scaletrain::test {

// x: (N, H, W, C). Returns (N, C*H*W).
std::vector<double> reference_flatten_chw_forward(int64_t n, int64_t h, int64_t w, int64_t c,
                                                  const std::vector<double>& x);
// dy: (N, C*H*W). Returns dx: (N, H, W, C).
std::vector<double> reference_flatten_chw_backward(int64_t n, int64_t h, int64_t w, int64_t c,
                                                   const std::vector<double>& dy);

}  // namespace scaletrain::test
