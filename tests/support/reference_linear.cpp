// Naive float64 linear layer: triple loops, written for clarity only.
#include "support/reference_linear.hpp"

namespace scaletrain::test {

std::vector<double> reference_linear_forward(int64_t n, int64_t in, int64_t out, const std::vector<double>& x,
                                             const std::vector<double>& w, const std::vector<double>& b) {
  std::vector<double> y(n * out);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t o = 0; o < out; ++o) {
      double s = b[o];
      for (int64_t k = 0; k < in; ++k) s += x[i * in + k] * w[o * in + k];
      y[i * out + o] = s;
    }
  return y;
}

RefLinearGrads reference_linear_backward(int64_t n, int64_t in, int64_t out, const std::vector<double>& x,
                                         const std::vector<double>& w, const std::vector<double>& dy) {
  RefLinearGrads g{std::vector<double>(n * in, 0.0), std::vector<double>(out * in, 0.0), std::vector<double>(out, 0.0)};
  for (int64_t i = 0; i < n; ++i)
    for (int64_t o = 0; o < out; ++o) {
      const double d = dy[i * out + o];
      g.db[o] += d;
      for (int64_t k = 0; k < in; ++k) {
        g.dx[i * in + k] += d * w[o * in + k];
        g.dw[o * in + k] += d * x[i * in + k];
      }
    }
  return g;
}

}  // namespace scaletrain::test
