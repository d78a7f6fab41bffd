// Naive float64 masked softmax, row by row.
#include "support/reference_softmax.hpp"

#include <algorithm>
#include <cmath>

namespace scaletrain::test {

std::vector<double> reference_masked_softmax(const RefScores& s, const std::vector<double>& x,
                                             const std::vector<int32_t>& key_lengths, bool causal) {
  std::vector<double> y(x.size(), 0.0);
  for (int64_t b = 0; b < s.n; ++b)
    for (int64_t h = 0; h < s.heads; ++h)
      for (int64_t i = 0; i < s.lq; ++i) {
        const int64_t row = ((b * s.heads + h) * s.lq + i) * s.lk;
        const int64_t valid = causal ? std::min<int64_t>(key_lengths[b], i + 1) : key_lengths[b];
        double top = x[row];
        for (int64_t j = 1; j < valid; ++j) top = std::max(top, x[row + j]);
        double sum = 0.0;
        for (int64_t j = 0; j < valid; ++j) sum += std::exp(x[row + j] - top);
        for (int64_t j = 0; j < valid; ++j) y[row + j] = std::exp(x[row + j] - top) / sum;
      }
  return y;
}

std::vector<double> reference_masked_softmax_backward(const RefScores& s, const std::vector<double>& y,
                                                      const std::vector<double>& dy) {
  std::vector<double> dx(y.size());
  for (int64_t row = 0; row < s.n * s.heads * s.lq; ++row) {
    double dot = 0.0;
    for (int64_t j = 0; j < s.lk; ++j) dot += dy[row * s.lk + j] * y[row * s.lk + j];
    for (int64_t j = 0; j < s.lk; ++j) dx[row * s.lk + j] = y[row * s.lk + j] * (dy[row * s.lk + j] - dot);
  }
  return dx;
}

}  // namespace scaletrain::test
