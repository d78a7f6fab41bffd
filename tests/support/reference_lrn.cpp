// Naive float64 local response normalisation across channels, element by element.
#include "support/reference_lrn.hpp"

#include <algorithm>
#include <cmath>

namespace scaletrain::test {
namespace {

// s_c = k + alpha / size * sum of x_j^2 over c's window, for every element.
std::vector<double> scales(const RefLrnParams& p, int64_t channels, const std::vector<double>& x) {
  const int64_t rows = static_cast<int64_t>(x.size()) / channels, half = (p.size - 1) / 2;
  std::vector<double> s(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    const double* row = x.data() + r * channels;
    for (int64_t c = 0; c < channels; ++c) {
      double sum = 0.0;
      for (int64_t j = std::max<int64_t>(0, c - half); j <= std::min(channels - 1, c + half); ++j)
        sum += row[j] * row[j];
      s[r * channels + c] = p.k + p.alpha / static_cast<double>(p.size) * sum;
    }
  }
  return s;
}

}  // namespace

std::vector<double> reference_lrn_forward(const RefLrnParams& p, int64_t channels, const std::vector<double>& x) {
  const std::vector<double> s = scales(p, channels, x);
  std::vector<double> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = x[i] * std::pow(s[i], -p.beta);
  return y;
}

// y_j = x_j s_j^-beta with s_j depending on x_c for c in win(j): dy_j/dx_c = [j == c] s_c^-beta -
// beta x_j s_j^(-beta-1) * 2 alpha / size * x_c.
std::vector<double> reference_lrn_backward(const RefLrnParams& p, int64_t channels, const std::vector<double>& x,
                                           const std::vector<double>& dy) {
  const std::vector<double> s = scales(p, channels, x);
  const int64_t rows = static_cast<int64_t>(x.size()) / channels, half = (p.size - 1) / 2;
  std::vector<double> dx(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t base = r * channels;
    for (int64_t c = 0; c < channels; ++c) {
      double g = dy[base + c] * std::pow(s[base + c], -p.beta);
      for (int64_t j = 0; j < channels; ++j) {
        if (c < j - half || c > j + half) continue;  // c outside j's window
        g -= 2.0 * p.alpha * p.beta / static_cast<double>(p.size) * x[base + c] * dy[base + j] * x[base + j] *
             std::pow(s[base + j], -p.beta - 1.0);
      }
      dx[base + c] = g;
    }
  }
  return dx;
}

}  // namespace scaletrain::test
