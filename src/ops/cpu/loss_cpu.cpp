// CPU softmax cross-entropy and top-1 counting: plain loops, since (N, K) is tiny next to the
// convolutions. Each row is accumulated in double through log-sum-exp so that large logits
// neither overflow nor lose the small terms.
// With q = (1 - eps) * onehot(y) + eps / K:  loss_i = -sum_k q_k log p_k, and
// d loss_i / d logit_k = p_k - q_k.
#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/op_checks.hpp"
#include "scaletrain/ops/loss.hpp"

namespace scaletrain::ops::cpu {
namespace {

// No label is ignored (softmax_cross_entropy), or labels equal to `value` are (token_cross_entropy).
struct Ignore {
  bool active = false;
  int32_t value = 0;
  bool operator()(int32_t label) const { return active && label == value; }
};

// Every label in [0, K) or ignored, before any is used as an index.
void check_labels(const Tensor& labels, int64_t k, const char* op, Ignore ignore = {}) {
  const int64_t n = labels.dim(0);
  const int32_t* y = labels.data<int32_t>();
  for (int64_t i = 0; i < n; ++i)
    if ((y[i] < 0 || y[i] >= k) && !ignore(y[i])) throw_label_out_of_range(op, i, y[i], k);
}

// The loss summed over the rows that are not ignored, and their count; dlogits (if given) gets
// (p - q) * g_scale per row, and zeros in ignored rows.
TokenLoss cross_entropy_rows(const Tensor& logits, const Tensor& labels, double eps, Ignore ignore, double g_scale,
                             Tensor& dlogits) {
  const int64_t n = logits.dim(0), k = logits.dim(1);
  const float* x = logits.data<float>();
  const int32_t* y = labels.data<int32_t>();
  float* dx = dlogits.defined() ? dlogits.data<float>() : nullptr;
  std::vector<double> e(k);
  TokenLoss out;
  for (int64_t i = 0; i < n; ++i) {
    if (ignore(y[i])) {
      if (dx) std::fill(dx + i * k, dx + (i + 1) * k, 0.0f);
      continue;
    }
    ++out.tokens;
    const float* row = x + i * k;
    double m = row[0], sum_x = 0.0;
    for (int64_t j = 0; j < k; ++j) m = std::max(m, static_cast<double>(row[j]));
    double sum_e = 0.0;
    for (int64_t j = 0; j < k; ++j) {
      e[j] = std::exp(row[j] - m);
      sum_e += e[j];
      sum_x += row[j];
    }
    const double lse = m + std::log(sum_e);  // -log p_j = lse - x_j
    out.sum += (1.0 - eps) * (lse - row[y[i]]) + eps * (lse - sum_x / k);
    if (dx) {
      float* g = dx + i * k;
      for (int64_t j = 0; j < k; ++j) g[j] = static_cast<float>((e[j] / sum_e - eps / k) * g_scale);
      g[y[i]] -= static_cast<float>((1.0 - eps) * g_scale);
    }
  }
  return out;
}

}  // namespace

double softmax_cross_entropy(Context& /*ctx*/, const Tensor& logits, const Tensor& labels, float label_smoothing,
                             Tensor& dlogits, double grad_scale) {
  const int64_t n = logits.dim(0), k = logits.dim(1);
  check_labels(labels, k, "softmax_cross_entropy");
  const double inv_n = 1.0 / static_cast<double>(n);
  // The smoothing in double, as every sum here; the gradient's scale exactly inv_n for a scale of 1.
  return cross_entropy_rows(logits, labels, label_smoothing, Ignore{}, grad_scale * inv_n, dlogits).sum * inv_n;
}

TokenLoss token_cross_entropy(Context& /*ctx*/, const Tensor& logits, const Tensor& labels, float label_smoothing,
                              int32_t ignore_index, double normaliser, Tensor& dlogits) {
  const Ignore ignore{true, ignore_index};
  check_labels(labels, logits.dim(1), "token_cross_entropy", ignore);
  return cross_entropy_rows(logits, labels, label_smoothing, ignore, 1.0 / normaliser, dlogits);
}

int64_t count_correct(Context& /*ctx*/, const Tensor& logits, const Tensor& labels) {
  const int64_t n = logits.dim(0), k = logits.dim(1);
  check_labels(labels, k, "count_correct");
  const float* x = logits.data<float>();
  const int32_t* y = labels.data<int32_t>();
  int64_t correct = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float* row = x + i * k;
    int64_t best = 0;
    for (int64_t j = 1; j < k; ++j)
      if (row[j] > row[best]) best = j;  // strict: the first maximum wins ties
    correct += (best == y[i]);
  }
  return correct;
}

}  // namespace scaletrain::ops::cpu
