// CUDA scaled, masked, position-added embedding: one thread per element (the CPU's arithmetic:
// one multiply, one add, the same bits).
#include "backend/cuda/cuda_context.hpp"
#include "ops/cuda/grid_stride.cuh"
#include "scaletrain/ops/token_embedding.hpp"

namespace scaletrain::ops::cuda {
namespace {

__global__ void token_embedding_forward_kernel(const float* x, const int32_t* ids, float scale, const float* pe,
                                               float* y, int64_t total, int64_t length, int64_t d) {
  for (int64_t e = grid_first(); e < total; e += grid_stride()) {
    const int64_t r = e / d;
    const float s = ids[r] != 0 ? scale : 0.0f;
    y[e] = __fadd_rn(__fmul_rn(s, x[e]), pe[(r % length) * d + e % d]);
  }
}

__global__ void token_embedding_backward_kernel(const int32_t* ids, float scale, const float* dy, float* dx,
                                                int64_t total, int64_t d) {
  for (int64_t e = grid_first(); e < total; e += grid_stride()) {
    const float s = ids[e / d] != 0 ? scale : 0.0f;
    dx[e] = s * dy[e];
  }
}

}  // namespace

void token_embedding_forward(Context& ctx, const Tensor& x, const Tensor& ids, float scale, const Tensor& positions,
                             Tensor& y) {
  const int64_t total = x.numel();
  token_embedding_forward_kernel<<<scaletrain::cuda::blocks_for(total), scaletrain::cuda::kThreadsPerBlock, 0,
                                   scaletrain::cuda::compute_stream(ctx)>>>(
      static_cast<const float*>(x.raw()), static_cast<const int32_t*>(ids.raw()), scale,
      static_cast<const float*>(positions.raw()), static_cast<float*>(y.raw()), total, x.dim(1), x.dim(2));
  ST_CHECK_LAUNCH();
}

void token_embedding_backward(Context& ctx, const Tensor& ids, float scale, const Tensor& dy, Tensor& dx) {
  const int64_t total = dy.numel();
  token_embedding_backward_kernel<<<scaletrain::cuda::blocks_for(total), scaletrain::cuda::kThreadsPerBlock, 0,
                                    scaletrain::cuda::compute_stream(ctx)>>>(
      static_cast<const int32_t*>(ids.raw()), scale, static_cast<const float*>(dy.raw()), static_cast<float*>(dx.raw()),
      total, dy.dim(2));
  ST_CHECK_LAUNCH();
}

}  // namespace scaletrain::ops::cuda
