// Naive float64 batch norm: two-pass statistics (mean, then the centred sum of squares) and the
// textbook backward formula, written for clarity, not speed.
#include "support/reference_batch_norm.hpp"

#include <cmath>

#include "scaletrain/core/error.hpp"

namespace scaletrain::test {
namespace {

struct Moments {
  std::vector<double> mean, biased_var;
};

Moments moments(const std::vector<double>& x, int64_t c) {
  ST_CHECK(c > 0 && x.size() % c == 0, "reference batch norm: " << x.size() << " values are not rows of " << c);
  const int64_t m = static_cast<int64_t>(x.size()) / c;
  Moments s{std::vector<double>(c, 0.0), std::vector<double>(c, 0.0)};
  for (int64_t r = 0; r < m; ++r)
    for (int64_t j = 0; j < c; ++j) s.mean[j] += x[r * c + j];
  for (int64_t j = 0; j < c; ++j) s.mean[j] /= m;
  for (int64_t r = 0; r < m; ++r)
    for (int64_t j = 0; j < c; ++j) {
      const double d = x[r * c + j] - s.mean[j];
      s.biased_var[j] += d * d;
    }
  for (int64_t j = 0; j < c; ++j) s.biased_var[j] /= m;
  return s;
}

}  // namespace

BatchNormTrainingRef reference_batch_norm_forward_training(
    const std::vector<double>& x, int64_t channels, const std::vector<double>& gamma, const std::vector<double>& beta,
    const std::vector<double>& running_mean, const std::vector<double>& running_var, double eps, double momentum) {
  const int64_t c = channels;
  const Moments s = moments(x, c);
  const int64_t m = static_cast<int64_t>(x.size()) / c;
  BatchNormTrainingRef out;
  out.mean = s.mean;
  out.inv_std.resize(c);
  out.running_mean.resize(c);
  out.running_var.resize(c);
  for (int64_t j = 0; j < c; ++j) {
    out.inv_std[j] = 1.0 / std::sqrt(s.biased_var[j] + eps);
    const double unbiased = s.biased_var[j] * m / (m - 1);
    out.running_mean[j] = (1 - momentum) * running_mean[j] + momentum * s.mean[j];
    out.running_var[j] = (1 - momentum) * running_var[j] + momentum * unbiased;
  }
  out.y.resize(x.size());
  for (int64_t r = 0; r < m; ++r)
    for (int64_t j = 0; j < c; ++j) out.y[r * c + j] = (x[r * c + j] - s.mean[j]) * out.inv_std[j] * gamma[j] + beta[j];
  return out;
}

std::vector<double> reference_batch_norm_forward_inference(const std::vector<double>& x, int64_t channels,
                                                           const std::vector<double>& gamma,
                                                           const std::vector<double>& beta,
                                                           const std::vector<double>& running_mean,
                                                           const std::vector<double>& running_var, double eps) {
  const int64_t c = channels;
  std::vector<double> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const int64_t j = static_cast<int64_t>(i) % c;
    y[i] = (x[i] - running_mean[j]) / std::sqrt(running_var[j] + eps) * gamma[j] + beta[j];
  }
  return y;
}

BatchNormBackwardRef reference_batch_norm_backward(const std::vector<double>& x, const std::vector<double>& dy,
                                                   int64_t channels, const std::vector<double>& gamma, double eps) {
  const int64_t c = channels;
  const Moments s = moments(x, c);
  const int64_t m = static_cast<int64_t>(x.size()) / c;
  BatchNormBackwardRef out{std::vector<double>(x.size()), std::vector<double>(c, 0.0), std::vector<double>(c, 0.0)};
  std::vector<double> inv_std(c);
  for (int64_t j = 0; j < c; ++j) inv_std[j] = 1.0 / std::sqrt(s.biased_var[j] + eps);
  // dbeta = sum dy; dgamma = sum dy * xhat.
  for (int64_t r = 0; r < m; ++r)
    for (int64_t j = 0; j < c; ++j) {
      const double xhat = (x[r * c + j] - s.mean[j]) * inv_std[j];
      out.dbeta[j] += dy[r * c + j];
      out.dgamma[j] += dy[r * c + j] * xhat;
    }
  // dx = gamma * inv_std / M * (M * dy - sum dy - xhat * sum(dy * xhat)).
  for (int64_t r = 0; r < m; ++r)
    for (int64_t j = 0; j < c; ++j) {
      const double xhat = (x[r * c + j] - s.mean[j]) * inv_std[j];
      out.dx[r * c + j] = gamma[j] * inv_std[j] / m * (m * dy[r * c + j] - out.dbeta[j] - xhat * out.dgamma[j]);
    }
  return out;
}

}  // namespace scaletrain::test
