// CUDA element-wise product and its gradient: grid-stride passes, each product rounded once
// (__fmul_rn, as the CPU): the same bits as the CPU. Backward reads dy before writing da and db,
// which may alias it.
#include "backend/cuda/cuda_context.hpp"
#include "ops/cuda/grid_stride.cuh"
#include "scaletrain/ops/multiply.hpp"

namespace scaletrain::ops::cuda {
namespace {

__global__ void multiply_kernel(const float* a, const float* b, float* y, int64_t n) {
  for (int64_t i = grid_first(); i < n; i += grid_stride()) y[i] = __fmul_rn(a[i], b[i]);
}

__global__ void multiply_backward_kernel(const float* a, const float* b, const float* dy, float* da, float* db,
                                         int64_t n) {
  for (int64_t i = grid_first(); i < n; i += grid_stride()) {
    const float g = dy[i];
    da[i] = __fmul_rn(g, b[i]);
    db[i] = __fmul_rn(g, a[i]);
  }
}

}  // namespace

void multiply_forward(Context& ctx, const Tensor& a, const Tensor& b, Tensor& y) {
  const int64_t n = a.numel();
  if (n == 0) return;
  multiply_kernel<<<scaletrain::cuda::blocks_for(n), scaletrain::cuda::kThreadsPerBlock, 0,
                    scaletrain::cuda::compute_stream(ctx)>>>(
      static_cast<const float*>(a.raw()), static_cast<const float*>(b.raw()), static_cast<float*>(y.raw()), n);
  ST_CHECK_LAUNCH();
}

void multiply_backward(Context& ctx, const Tensor& a, const Tensor& b, const Tensor& dy, Tensor& da, Tensor& db) {
  const int64_t n = a.numel();
  if (n == 0) return;
  multiply_backward_kernel<<<scaletrain::cuda::blocks_for(n), scaletrain::cuda::kThreadsPerBlock, 0,
                             scaletrain::cuda::compute_stream(ctx)>>>(
      static_cast<const float*>(a.raw()), static_cast<const float*>(b.raw()), static_cast<const float*>(dy.raw()),
      static_cast<float*>(da.raw()), static_cast<float*>(db.raw()), n);
  ST_CHECK_LAUNCH();
}

}  // namespace scaletrain::ops::cuda
