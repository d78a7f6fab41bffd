// Test support: naive float64 max, average, adaptive average and global average pooling on
// channels-last data, forward and backward, with PyTorch's semantics (padding never wins, floor or
// ceil output size, the gradient of a window goes to its first maximum in row-major order, the
// average's divisor as aten's AvgPoolKernel computes it).
#pragma once

#include <cstdint>
#include <vector>

namespace scaletrain::test {

struct PoolGeometry {
  int64_t n, h, w, c;  // input (N, H, W, C)
  int64_t kernel, stride, padding;
  bool ceil_mode = false;
  bool count_include_pad = true;  // average pooling only
  int64_t oh() const { return out_size(h); }
  int64_t ow() const { return out_size(w); }
  // PyTorch's pooling_output_shape: floor or ceil, and with ceil no window may start beyond the
  // input and its left padding.
  int64_t out_size(int64_t in) const {
    const int64_t span = in + 2 * padding - kernel;
    int64_t out = (ceil_mode ? (span + stride - 1) / stride : span / stride) + 1;
    if (ceil_mode && (out - 1) * stride >= in + padding) --out;
    return out;
  }
};

// x: (N, H, W, C). Returns y: (N, OH, OW, C).
std::vector<double> reference_max_pool2d_forward(const PoolGeometry& g, const std::vector<double>& x);
// dy: (N, OH, OW, C). Returns dx: (N, H, W, C).
std::vector<double> reference_max_pool2d_backward(const PoolGeometry& g, const std::vector<double>& x,
                                                  const std::vector<double>& dy);

// Average pooling with g's ceil_mode and count_include_pad. x: (N, H, W, C). Returns y: (N, OH, OW, C).
std::vector<double> reference_avg_pool2d_forward(const PoolGeometry& g, const std::vector<double>& x);
// dy: (N, OH, OW, C). Returns dx: (N, H, W, C).
std::vector<double> reference_avg_pool2d_backward(const PoolGeometry& g, const std::vector<double>& dy);

// Adaptive average pooling of (N, H, W, C) to (N, OH, OW, C).
struct AdaptiveGeometry {
  int64_t n, h, w, c;
  int64_t oh, ow;
};
std::vector<double> reference_adaptive_avg_pool2d_forward(const AdaptiveGeometry& g, const std::vector<double>& x);
std::vector<double> reference_adaptive_avg_pool2d_backward(const AdaptiveGeometry& g, const std::vector<double>& dy);

// x: (N, H, W, C). Returns y: (N, C), the mean over H and W.
std::vector<double> reference_global_avg_pool_forward(const std::vector<double>& x, int64_t n, int64_t h, int64_t w,
                                                      int64_t c);
// dy: (N, C). Returns dx: (N, H, W, C).
std::vector<double> reference_global_avg_pool_backward(const std::vector<double>& dy, int64_t n, int64_t h, int64_t w,
                                                       int64_t c);

}  // namespace scaletrain::test
