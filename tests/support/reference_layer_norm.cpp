// Naive float64 layer normalisation, row by row; the backward by its textbook derivation:
// with xhat = (x - mean) * rstd and g = dy * gamma over a row of D values,
//   dx = rstd / D * (D g - sum(g) - xhat sum(g xhat)).
#include "support/reference_layer_norm.hpp"

#include <cmath>

namespace scaletrain::test {
namespace {

struct RowStats {
  double mean, rstd;
};

RowStats row_stats(const double* row, int64_t d, double eps) {
  double sum = 0.0;
  for (int64_t j = 0; j < d; ++j) sum += row[j];
  const double mean = sum / static_cast<double>(d);
  double squares = 0.0;
  for (int64_t j = 0; j < d; ++j) squares += (row[j] - mean) * (row[j] - mean);
  return {mean, 1.0 / std::sqrt(squares / static_cast<double>(d) + eps)};
}

}  // namespace

LayerNormForwardRef reference_layer_norm_forward(const std::vector<double>& x, int64_t d,
                                                 const std::vector<double>& gamma, const std::vector<double>& beta,
                                                 double eps) {
  const int64_t m = static_cast<int64_t>(x.size()) / d;
  LayerNormForwardRef out{std::vector<double>(x.size()), std::vector<double>(m), std::vector<double>(m)};
  for (int64_t r = 0; r < m; ++r) {
    const RowStats s = row_stats(x.data() + r * d, d, eps);
    out.mean[r] = s.mean;
    out.rstd[r] = s.rstd;
    for (int64_t j = 0; j < d; ++j) out.y[r * d + j] = (x[r * d + j] - s.mean) * s.rstd * gamma[j] + beta[j];
  }
  return out;
}

LayerNormBackwardRef reference_layer_norm_backward(const std::vector<double>& x, const std::vector<double>& dy,
                                                   int64_t d, const std::vector<double>& gamma, double eps) {
  const int64_t m = static_cast<int64_t>(x.size()) / d;
  LayerNormBackwardRef out{std::vector<double>(x.size()), std::vector<double>(d, 0.0), std::vector<double>(d, 0.0)};
  std::vector<double> xhat(d);
  for (int64_t r = 0; r < m; ++r) {
    const RowStats s = row_stats(x.data() + r * d, d, eps);
    double sum_g = 0.0, sum_gx = 0.0;
    for (int64_t j = 0; j < d; ++j) {
      xhat[j] = (x[r * d + j] - s.mean) * s.rstd;
      const double g = dy[r * d + j] * gamma[j];
      sum_g += g;
      sum_gx += g * xhat[j];
      out.dgamma[j] += dy[r * d + j] * xhat[j];
      out.dbeta[j] += dy[r * d + j];
    }
    for (int64_t j = 0; j < d; ++j)
      out.dx[r * d + j] = s.rstd / static_cast<double>(d) *
                          (static_cast<double>(d) * dy[r * d + j] * gamma[j] - sum_g - xhat[j] * sum_gx);
  }
  return out;
}

}  // namespace scaletrain::test
