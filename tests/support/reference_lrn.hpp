// Test support: naive float64 local response normalisation across channels on (M, C) channels-last
// data, with PyTorch's and Caffe's definition for odd sizes (include/scaletrain/ops/lrn.hpp): the
// window [c - (size-1)/2, c + (size-1)/2] clipped to [0, C), alpha divided by size.
#pragma once

#include <cstdint>
#include <vector>

namespace scaletrain::test {

struct RefLrnParams {
  int64_t size;
  double alpha, beta, k;
};

// x: (M, C). Returns y: (M, C).
std::vector<double> reference_lrn_forward(const RefLrnParams& p, int64_t channels, const std::vector<double>& x);
// dy: (M, C). Returns dx: (M, C), d<dy, y>/dx.
std::vector<double> reference_lrn_backward(const RefLrnParams& p, int64_t channels, const std::vector<double>& x,
                                           const std::vector<double>& dy);

}  // namespace scaletrain::test
