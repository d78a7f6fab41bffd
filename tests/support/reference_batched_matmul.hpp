// Test support: naive float64 batched matrix products, the definition of
// include/scaletrain/ops/batched_matmul.hpp.
#pragma once

#include <cstdint>
#include <vector>

namespace scaletrain::test {

struct RefMatmulDims {
  int64_t batch, m, k, n;
  bool trans_a, trans_b;
};

// c[i] = alpha * op(a[i]) . op(b[i]), (B, M, N).
std::vector<double> reference_batched_matmul(const RefMatmulDims& d, double alpha, const std::vector<double>& a,
                                             const std::vector<double>& b);
// The gradients of <dc, c> with respect to a and b, in a's and b's stored layouts.
std::vector<double> reference_batched_matmul_da(const RefMatmulDims& d, double alpha, const std::vector<double>& b,
                                                const std::vector<double>& dc);
std::vector<double> reference_batched_matmul_db(const RefMatmulDims& d, double alpha, const std::vector<double>& a,
                                                const std::vector<double>& dc);

}  // namespace scaletrain::test
