// The Adam update on the CPU: one vectorised OpenMP loop over the flat buffers; the lazy form
// loops over rows and skips those whose gradient is all zeros.
#include <cmath>

#include "scaletrain/ops/adam.hpp"

namespace scaletrain::ops::cpu {
namespace {

// One element's update, shared by both kernels so that a touched row of lazy_adam_update gets
// the bits adam_update would give it.
inline void adam_element(const AdamUpdateParams& p, float& w, float g, float& m, float& v) {
  const float mi = m * p.beta1 + p.one_minus_beta1 * g;
  const float vi = v * p.beta2 + p.one_minus_beta2 * (g * g);
  m = mi;
  v = vi;
  const float denom = std::sqrt(vi) / p.bias_correction2_sqrt + p.epsilon;
  w = w + p.neg_step_size * (mi / denom);
}

bool row_touched(const float* grad, int64_t width) {
  for (int64_t j = 0; j < width; ++j)
    if (grad[j] != 0.0f) return true;
  return false;
}

}  // namespace

void adam_update(Context&, const AdamUpdateParams& p, Tensor& w_t, const Tensor& grad_t, Tensor& m_t, Tensor& v_t) {
  float* w = w_t.data<float>();
  const float* grad = grad_t.data<float>();
  float* m = m_t.data<float>();
  float* v = v_t.data<float>();
  const int64_t n = w_t.numel();
#pragma omp parallel for simd schedule(static) if (n > (int64_t{1} << 15))
  for (int64_t i = 0; i < n; ++i) adam_element(p, w[i], grad[i], m[i], v[i]);
}

void lazy_adam_update(Context&, const AdamUpdateParams& p, Tensor& w_t, const Tensor& grad_t, Tensor& m_t, Tensor& v_t,
                      int64_t row_width) {
  float* w = w_t.data<float>();
  const float* grad = grad_t.data<float>();
  float* m = m_t.data<float>();
  float* v = v_t.data<float>();
  const int64_t n = w_t.numel(), rows = n / row_width;
#pragma omp parallel for schedule(static) if (n > (int64_t{1} << 15))
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t first = r * row_width;
    if (!row_touched(grad + first, row_width)) continue;
#pragma omp simd
    for (int64_t i = first; i < first + row_width; ++i) adam_element(p, w[i], grad[i], m[i], v[i]);
  }
}

}  // namespace scaletrain::ops::cpu
