// Softmax cross-entropy with label smoothing (PyTorch's CrossEntropyLoss(label_smoothing=eps),
// mean over the batch) and top-1 counting. The CPU kernel is a plain loop: (N, K) is tiny next to
// the convolutions, and each row is accumulated in double through log-sum-exp so that large
// logits neither overflow nor lose the small terms.
// With q = (1 - eps) * onehot(y) + eps / K:  loss_i = -sum_k q_k log p_k, and
// d loss_i / d logit_k = p_k - q_k.
#include "scaletrain/ops/loss.hpp"

#include <cmath>
#include <vector>

#include "ops/op_checks.hpp"
#include "scaletrain/core/error.hpp"

namespace scaletrain::ops {
namespace {

// Checks logits (N, K) f32 and labels (N) i32 with every label in [0, K).
void check_logits_labels(const Tensor& logits, const Tensor& labels, const char* op) {
  ST_CHECK(logits.defined() && logits.ndim() == 2,
           op << ": logits must be (N, K), got " << (logits.defined() ? shape_string(logits.shape()) : "undefined"));
  ST_CHECK(logits.dtype() == DType::f32, op << ": logits must be float32, got " << dtype_name(logits.dtype()));
  ST_CHECK(labels.defined() && labels.ndim() == 1 && labels.dim(0) == logits.dim(0),
           op << ": labels must be (" << logits.dim(0) << ") to match logits " << shape_string(logits.shape())
              << ", got " << (labels.defined() ? shape_string(labels.shape()) : "undefined"));
  ST_CHECK(labels.dtype() == DType::i32, op << ": labels must be int32, got " << dtype_name(labels.dtype()));
  ST_CHECK(logits.device() == Device::cpu && labels.device() == Device::cpu,
           op << ": no kernel for device " << device_name(logits.device()));
  const int64_t n = logits.dim(0), k = logits.dim(1);
  ST_CHECK(k > 0, op << ": logits " << shape_string(logits.shape()) << " have no classes");
  const int32_t* y = labels.data<int32_t>();
  for (int64_t i = 0; i < n; ++i)
    ST_CHECK(y[i] >= 0 && y[i] < k,
             op << ": label " << y[i] << " of sample " << i << " is outside the " << k << " classes [0, " << k << ")");
}

double softmax_cross_entropy_cpu(const Tensor& logits, const Tensor& labels, double eps, Tensor& dlogits) {
  const int64_t n = logits.dim(0), k = logits.dim(1);
  const float* x = logits.data<float>();
  const int32_t* y = labels.data<int32_t>();
  float* dx = dlogits.defined() ? dlogits.data<float>() : nullptr;
  const double inv_n = 1.0 / static_cast<double>(n);
  std::vector<double> e(k);
  double total = 0.0;
  for (int64_t i = 0; i < n; ++i) {
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
    total += (1.0 - eps) * (lse - row[y[i]]) + eps * (lse - sum_x / k);
    if (dx) {
      float* g = dx + i * k;
      for (int64_t j = 0; j < k; ++j) g[j] = static_cast<float>((e[j] / sum_e - eps / k) * inv_n);
      g[y[i]] -= static_cast<float>((1.0 - eps) * inv_n);
    }
  }
  return total * inv_n;
}

}  // namespace

double softmax_cross_entropy(Context& ctx, const Tensor& logits, const Tensor& labels, float label_smoothing,
                             Tensor& dlogits) {
  const char* op = "softmax_cross_entropy";
  check_logits_labels(logits, labels, op);
  ST_CHECK(logits.dim(0) > 0, op << ": empty batch (the mean over no samples is undefined)");
  ST_CHECK(label_smoothing >= 0.0f && label_smoothing <= 1.0f,
           op << ": label smoothing must be in [0, 1], got " << label_smoothing);
  ST_CHECK(logits.device() == ctx.device(), op << ": logits are on " << device_name(logits.device())
                                               << " but the context runs on " << device_name(ctx.device()));
  if (dlogits.defined()) {
    ST_CHECK(dlogits.dtype() == DType::f32 && dlogits.shape() == logits.shape() && dlogits.device() == logits.device(),
             op << ": dlogits must be float32 " << shape_string(logits.shape()) << " like the logits, got "
                << dtype_name(dlogits.dtype()) << shape_string(dlogits.shape()));
  }
  switch (ctx.device()) {
    case Device::cpu:
      return softmax_cross_entropy_cpu(logits, labels, label_smoothing, dlogits);
    case Device::cuda:
      break;  // no kernel yet
  }
  no_kernel(op, ctx.device());
}

int64_t count_correct(const Tensor& logits, const Tensor& labels) {
  check_logits_labels(logits, labels, "count_correct");
  const int64_t n = logits.dim(0), k = logits.dim(1);
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

}  // namespace scaletrain::ops
