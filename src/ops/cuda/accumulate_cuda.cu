// Gradient accumulation's sums on the GPU: one grid-stride kernel per stage, the CPU kernel's
// arithmetic with IEEE-rounded intrinsics (no FMA contraction), so both backends give the same bits.
#include "backend/cuda/cuda_context.hpp"
#include "ops/cuda/grid_stride.cuh"
#include "scaletrain/ops/accumulate.hpp"

namespace scaletrain::ops::cuda {
namespace {
__global__ void accumulate_kernel(AccumulateStage stage, float scale, float* s, float* g, int64_t n) {
  for (int64_t j = grid_first(); j < n; j += grid_stride()) {
    switch (stage) {
      case AccumulateStage::first:
        s[j] = g[j];
        break;
      case AccumulateStage::middle:
        s[j] = __fadd_rn(s[j], g[j]);
        break;
      case AccumulateStage::last:
        g[j] = __fmul_rn(__fadd_rn(s[j], g[j]), scale);
        break;
    }
  }
}
}  // namespace

void accumulate_gradient(Context& ctx, AccumulateStage stage, float scale, Tensor& sum, Tensor& grad) {
  const int64_t n = grad.numel();
  if (n == 0) return;
  accumulate_kernel<<<scaletrain::cuda::blocks_for(n), scaletrain::cuda::kThreadsPerBlock, 0,
                      scaletrain::cuda::compute_stream(ctx)>>>(stage, scale, static_cast<float*>(sum.raw()),
                                                               static_cast<float*>(grad.raw()), n);
  ST_CHECK_LAUNCH();
}

}  // namespace scaletrain::ops::cuda
