// Naive float64 softmax cross-entropy, straight from the definition: p = softmax(x) through
// log-sum-exp, target q = (1 - eps) onehot(y) + eps / K, loss = -sum q log p, gradient p - q.
#include "support/reference_loss.hpp"

#include <algorithm>
#include <cmath>

namespace scaletrain::test {

double reference_softmax_cross_entropy(int64_t n, int64_t k, const std::vector<double>& logits,
                                       const std::vector<int32_t>& labels, double label_smoothing,
                                       std::vector<double>* dlogits) {
  if (dlogits) dlogits->assign(n * k, 0.0);
  double total = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double* x = logits.data() + i * k;
    const double m = *std::max_element(x, x + k);
    double s = 0.0;
    for (int64_t j = 0; j < k; ++j) s += std::exp(x[j] - m);
    const double lse = m + std::log(s);
    for (int64_t j = 0; j < k; ++j) {
      const double q = (j == labels[i] ? 1.0 - label_smoothing : 0.0) + label_smoothing / k;
      const double log_p = x[j] - lse;
      total -= q * log_p;
      if (dlogits) (*dlogits)[i * k + j] = (std::exp(log_p) - q) / n;
    }
  }
  return total / n;
}

}  // namespace scaletrain::test
