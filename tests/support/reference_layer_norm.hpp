// Test support: naive float64 layer normalisation over the last dimension of (M, D) data, the
// definition of include/scaletrain/ops/layer_norm.hpp with the statistics in float64.
#pragma once

#include <cstdint>
#include <vector>

namespace scaletrain::test {

struct LayerNormForwardRef {
  std::vector<double> y, mean, rstd;  // (M, D), (M), (M)
};
struct LayerNormBackwardRef {
  std::vector<double> dx, dgamma, dbeta;  // (M, D), (D), (D)
};

LayerNormForwardRef reference_layer_norm_forward(const std::vector<double>& x, int64_t d,
                                                 const std::vector<double>& gamma, const std::vector<double>& beta,
                                                 double eps);
// d<dy, y>/d(x, gamma, beta), differentiating through the row statistics.
LayerNormBackwardRef reference_layer_norm_backward(const std::vector<double>& x, const std::vector<double>& dy,
                                                   int64_t d, const std::vector<double>& gamma, double eps);

}  // namespace scaletrain::test
