// Naive float64 reference of conv2d (no bias, dilation 1, groups 1) for tests only, in the
// kernels' layouts: x (N, H, W, C), w (O, C, KH, KW), y (N, OH, OW, O).
#pragma once

#include <cstdint>
#include <vector>

namespace scaletrain::test {

struct RefConv2dDims {
  int64_t n, h, w, c;  // input
  int64_t o, kh, kw;   // weight
  int64_t stride = 1, padding = 0;
  int64_t oh() const { return (h + 2 * padding - kh) / stride + 1; }
  int64_t ow() const { return (w + 2 * padding - kw) / stride + 1; }
};

std::vector<double> reference_conv2d_forward(const RefConv2dDims& d, const std::vector<double>& x,
                                             const std::vector<double>& w);
// dx = d(sum(y * dy))/dx, shape (N, H, W, C).
std::vector<double> reference_conv2d_backward_data(const RefConv2dDims& d, const std::vector<double>& dy,
                                                   const std::vector<double>& w);
// dw = d(sum(y * dy))/dw, shape (O, C, KH, KW).
std::vector<double> reference_conv2d_backward_filter(const RefConv2dDims& d, const std::vector<double>& x,
                                                     const std::vector<double>& dy);

}  // namespace scaletrain::test
