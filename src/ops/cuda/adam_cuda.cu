// The Adam update on the GPU: one grid-stride kernel, the CPU kernel's arithmetic in the same
// order with IEEE-rounded intrinsics (no FMA contraction; sqrt and division correctly rounded, as
// on the CPU), so that both backends give the same update from the same inputs. The lazy form
// gives each row to one block, which first agrees (__syncthreads_or) whether the row's gradient
// has a nonzero element.
#include <algorithm>

#include "backend/cuda/cuda_context.hpp"
#include "ops/cuda/grid_stride.cuh"
#include "scaletrain/ops/adam.hpp"

namespace scaletrain::ops::cuda {
namespace {

__device__ inline void adam_element(const AdamUpdateParams& p, float* w, const float* grad, float* m, float* v,
                                    int64_t i) {
  const float g = grad[i];
  const float mi = __fadd_rn(__fmul_rn(m[i], p.beta1), __fmul_rn(p.one_minus_beta1, g));
  const float vi = __fadd_rn(__fmul_rn(v[i], p.beta2), __fmul_rn(p.one_minus_beta2, __fmul_rn(g, g)));
  m[i] = mi;
  v[i] = vi;
  const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), p.bias_correction2_sqrt), p.epsilon);
  w[i] = __fadd_rn(w[i], __fmul_rn(p.neg_step_size, __fdiv_rn(mi, denom)));
}

__global__ void adam_update_kernel(float* w, const float* grad, float* m, float* v, int64_t n, AdamUpdateParams p) {
  for (int64_t i = grid_first(); i < n; i += grid_stride()) adam_element(p, w, grad, m, v, i);
}

// Block b takes rows b, b + gridDim.x, ...; every thread of the block walks the same rows, so
// the barrier inside the loop is reached by all of them.
__global__ void lazy_adam_update_kernel(float* w, const float* grad, float* m, float* v, int64_t rows, int64_t width,
                                        AdamUpdateParams p) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t first = r * width;
    int nonzero = 0;
    for (int64_t j = threadIdx.x; j < width; j += blockDim.x) nonzero |= grad[first + j] != 0.0f;
    if (!__syncthreads_or(nonzero)) continue;
    for (int64_t j = threadIdx.x; j < width; j += blockDim.x) adam_element(p, w, grad, m, v, first + j);
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

void lazy_adam_update(Context& ctx, const AdamUpdateParams& p, Tensor& w, const Tensor& grad, Tensor& m, Tensor& v,
                      int64_t row_width) {
  const int64_t rows = w.numel() / row_width;
  if (rows == 0) return;
  // A warp per row for NCF's narrow rows (8 to 128 wide), up to 256 threads for wide ones.
  const int threads = static_cast<int>(std::min<int64_t>(256, (row_width + 31) / 32 * 32));
  const int blocks = static_cast<int>(std::min<int64_t>(rows, 65535));
  lazy_adam_update_kernel<<<blocks, threads, 0, scaletrain::cuda::compute_stream(ctx)>>>(
      static_cast<float*>(w.raw()), static_cast<const float*>(grad.raw()), static_cast<float*>(m.raw()),
      static_cast<float*>(v.raw()), rows, row_width, p);
  ST_CHECK_LAUNCH();
}

}  // namespace scaletrain::ops::cuda
