// The SGD update on the GPU: one grid-stride kernel over the flat buffers, the CPU kernel's
// arithmetic in the same order. fmaf is avoided on purpose: nvcc contracts a*b+c into an FMA by
// default, which rounds once where the CPU rounds twice, so __fmul_rn/__fadd_rn keep the two
// backends' updates bitwise alike (the GPU-vs-CPU tests then compare with fp32 tolerances that
// leave room for the gradients' own differences, not the update's).
#include "backend/cuda/cuda_context.hpp"
#include "scaletrain/ops/sgd.hpp"

namespace scaletrain::ops::cuda {
namespace {
__global__ void sgd_update_kernel(float* w, const float* grad, float* v, int64_t n, float wd, float mu, float neg_lr,
                                  bool nesterov) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float g = __fadd_rn(grad[i], __fmul_rn(wd, w[i]));
    const float vi = __fadd_rn(__fmul_rn(mu, v[i]), g);
    v[i] = vi;
    const float d = nesterov ? __fadd_rn(g, __fmul_rn(mu, vi)) : vi;
    w[i] = __fadd_rn(w[i], __fmul_rn(neg_lr, d));
  }
}
}  // namespace

void sgd_update(Context& ctx, const SgdUpdateParams& p, Tensor& w, const Tensor& grad, Tensor& momentum) {
  const int64_t n = w.numel();
  if (n == 0) return;
  sgd_update_kernel<<<scaletrain::cuda::blocks_for(n), scaletrain::cuda::kThreadsPerBlock, 0,
                      scaletrain::cuda::compute_stream(ctx)>>>(
      static_cast<float*>(w.raw()), static_cast<const float*>(grad.raw()), static_cast<float*>(momentum.raw()), n,
      p.weight_decay, p.momentum, -p.lr, p.nesterov);
  ST_CHECK_LAUNCH();
}

}  // namespace scaletrain::ops::cuda
