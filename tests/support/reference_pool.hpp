// Test support: naive float64 max pooling and global average pooling on channels-last data,
// forward and backward, with PyTorch's semantics (padding never wins, floor output size, the
// gradient of a window goes to its first maximum in row-major order).
#pragma once

#include <cstdint>
#include <vector>

namespace scaletrain::test {

struct PoolGeometry {
  int64_t n, h, w, c;  // input (N, H, W, C)
  int64_t kernel, stride, padding;
  int64_t oh() const { return (h + 2 * padding - kernel) / stride + 1; }
  int64_t ow() const { return (w + 2 * padding - kernel) / stride + 1; }
};

// x: (N, H, W, C). Returns y: (N, OH, OW, C).
std::vector<double> reference_max_pool2d_forward(const PoolGeometry& g, const std::vector<double>& x);
// dy: (N, OH, OW, C). Returns dx: (N, H, W, C).
std::vector<double> reference_max_pool2d_backward(const PoolGeometry& g, const std::vector<double>& x,
                                                  const std::vector<double>& dy);

// x: (N, H, W, C). Returns y: (N, C), the mean over H and W.
std::vector<double> reference_global_avg_pool_forward(const std::vector<double>& x, int64_t n, int64_t h, int64_t w,
                                                      int64_t c);
// dy: (N, C). Returns dx: (N, H, W, C).
std::vector<double> reference_global_avg_pool_backward(const std::vector<double>& dy, int64_t n, int64_t h, int64_t w,
                                                       int64_t c);

}  // namespace scaletrain::test
