// The Adam update on the CPU: one vectorised OpenMP loop over the flat buffers.
#include <cmath>

#include "scaletrain/ops/adam.hpp"

namespace scaletrain::ops::cpu {

void adam_update(Context&, const AdamUpdateParams& p, Tensor& w_t, const Tensor& grad_t, Tensor& m_t, Tensor& v_t) {
  float* w = w_t.data<float>();
  const float* grad = grad_t.data<float>();
  float* m = m_t.data<float>();
  float* v = v_t.data<float>();
  const int64_t n = w_t.numel();
  const float b1 = p.beta1, one_minus_b1 = p.one_minus_beta1, b2 = p.beta2, one_minus_b2 = p.one_minus_beta2;
  const float eps = p.epsilon, bc2_sqrt = p.bias_correction2_sqrt, neg_step_size = p.neg_step_size;
#pragma omp parallel for simd schedule(static) if (n > (int64_t{1} << 15))
  for (int64_t i = 0; i < n; ++i) {
    const float g = grad[i];
    const float mi = m[i] * b1 + one_minus_b1 * g;
    const float vi = v[i] * b2 + one_minus_b2 * (g * g);
    m[i] = mi;
    v[i] = vi;
    const float denom = std::sqrt(vi) / bc2_sqrt + eps;
    w[i] = w[i] + neg_step_size * (mi / denom);
  }
}

}  // namespace scaletrain::ops::cpu
