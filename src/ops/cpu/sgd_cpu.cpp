// The SGD update on the CPU: one vectorised OpenMP loop over the flat buffers.
#include "scaletrain/ops/sgd.hpp"

namespace scaletrain::ops::cpu {

void sgd_update(Context&, const SgdUpdateParams& p, Tensor& w_t, const Tensor& grad_t, Tensor& momentum_t) {
  float* w = w_t.data<float>();
  const float* grad = grad_t.data<float>();
  float* v = momentum_t.data<float>();
  const int64_t n = w_t.numel();
  const float wd = p.weight_decay, mu = p.momentum, neg_lr = -p.lr;
  const bool nesterov = p.nesterov;
#pragma omp parallel for simd schedule(static) if (n > (int64_t{1} << 15))
  for (int64_t i = 0; i < n; ++i) {
    const float g = grad[i] + wd * w[i];
    const float vi = mu * v[i] + g;
    v[i] = vi;
    const float d = nesterov ? g + mu * vi : vi;
    w[i] = w[i] + neg_lr * d;
  }
}

}  // namespace scaletrain::ops::cpu
