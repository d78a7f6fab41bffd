// The Adam update on the GPU: one grid-stride kernel, the CPU kernel's arithmetic in the same
// order with IEEE-rounded intrinsics (no FMA contraction; sqrt and division correctly rounded, as
// on the CPU), so that both backends give the same update from the same inputs.
#include "backend/cuda/cuda_context.hpp"
#include "ops/cuda/grid_stride.cuh"
#include "scaletrain/ops/adam.hpp"

namespace scaletrain::ops::cuda {
namespace {
__global__ void adam_update_kernel(float* w, const float* grad, float* m, float* v, int64_t n, AdamUpdateParams p) {
  for (int64_t i = grid_first(); i < n; i += grid_stride()) {
    const float g = grad[i];
    const float mi = __fadd_rn(__fmul_rn(m[i], p.beta1), __fmul_rn(p.one_minus_beta1, g));
    const float vi = __fadd_rn(__fmul_rn(v[i], p.beta2), __fmul_rn(p.one_minus_beta2, __fmul_rn(g, g)));
    m[i] = mi;
    v[i] = vi;
    const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), p.bias_correction2_sqrt), p.epsilon);
    w[i] = __fadd_rn(w[i], __fmul_rn(p.neg_step_size, __fdiv_rn(mi, denom)));
  }
}
}  // namespace

void adam_update(Context& ctx, const AdamUpdateParams& p, Tensor& w, const Tensor& grad, Tensor& m, Tensor& v) {
  const int64_t n = w.numel();
  if (n == 0) return;
  adam_update_kernel<<<scaletrain::cuda::blocks_for(n), scaletrain::cuda::kThreadsPerBlock, 0,
                       scaletrain::cuda::compute_stream(ctx)>>>(
      static_cast<float*>(w.raw()), static_cast<const float*>(grad.raw()), static_cast<float*>(m.raw()),
      static_cast<float*>(v.raw()), n, p);
  ST_CHECK_LAUNCH();
}

}  // namespace scaletrain::ops::cuda
