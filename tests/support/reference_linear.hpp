// Naive float64 reference of the fully connected layer y = x w^T + b, for tests only:
// x (N, IN), w (OUT, IN), b (OUT), y (N, OUT), all row-major.
#pragma once

#include <cstdint>
#include <vector>

namespace scaletrain::test {

std::vector<double> reference_linear_forward(int64_t n, int64_t in, int64_t out, const std::vector<double>& x,
                                             const std::vector<double>& w, const std::vector<double>& b);

// Gradients of sum(y * dy): dx (N, IN), dw (OUT, IN), db (OUT).
struct RefLinearGrads {
  std::vector<double> dx, dw, db;
};
RefLinearGrads reference_linear_backward(int64_t n, int64_t in, int64_t out, const std::vector<double>& x,
                                         const std::vector<double>& w, const std::vector<double>& dy);

}  // namespace scaletrain::test
