// Naive float64 reference of conv2d (dilation 1; rectangular kernels, a stride per dimension,
// padding per side, groups, an optional bias) for tests only, in the kernels' layouts:
// x (N, H, W, C), w (O, C / groups, KH, KW), b (O), y (N, OH, OW, O).
#pragma once

#include <cstdint>
#include <vector>

namespace scaletrain::test {

struct RefConv2dDims {
  int64_t n, h, w, c;  // input
  int64_t o, kh, kw;   // weight (O, C / groups, KH, KW)
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
  int64_t groups = 1;

  // A square stride and the same padding on every side.
  static RefConv2dDims square(int64_t n, int64_t h, int64_t w, int64_t c, int64_t o, int64_t kh, int64_t kw,
                              int64_t stride, int64_t padding, int64_t groups = 1) {
    return {n, h, w, c, o, kh, kw, stride, stride, padding, padding, padding, padding, groups};
  }
  int64_t oh() const { return (h + pad_top + pad_bottom - kh) / stride_h + 1; }
  int64_t ow() const { return (w + pad_left + pad_right - kw) / stride_w + 1; }
  int64_t group_channels() const { return c / groups; }
};

// b: (O), or empty for no bias.
std::vector<double> reference_conv2d_forward(const RefConv2dDims& d, const std::vector<double>& x,
                                             const std::vector<double>& w, const std::vector<double>& b = {});
// dx = d(sum(y * dy))/dx, shape (N, H, W, C).
std::vector<double> reference_conv2d_backward_data(const RefConv2dDims& d, const std::vector<double>& dy,
                                                   const std::vector<double>& w);
// dw = d(sum(y * dy))/dw, shape (O, C / groups, KH, KW).
std::vector<double> reference_conv2d_backward_filter(const RefConv2dDims& d, const std::vector<double>& x,
                                                     const std::vector<double>& dy);
// db = d(sum(y * dy))/db = the sum of dy over N, OH and OW, shape (O).
std::vector<double> reference_conv2d_backward_bias(const RefConv2dDims& d, const std::vector<double>& dy);

}  // namespace scaletrain::test
