// CUDA ReLU and element-wise add: one grid-stride pass each, the same expressions as the CPU
// kernels (src/ops/cpu/activation_cpu.cpp), so results are bitwise equal. Every output element
// depends only on the same element of the inputs and is read before it is written by the same
// thread, so outputs may alias inputs (no __restrict__).
#include "backend/cuda/cuda_context.hpp"
#include "ops/cuda/grid_stride.cuh"
#include "scaletrain/ops/activation.hpp"

namespace scaletrain::ops::cuda {
namespace {

using scaletrain::cuda::blocks_for;
using scaletrain::cuda::kThreadsPerBlock;

__global__ void relu_forward_kernel(const float* x, float* y, int64_t n) {
  // x < 0 ? 0 : x keeps NaN as NaN, as PyTorch does.
  for (int64_t i = grid_first(); i < n; i += grid_stride()) {
    const float v = x[i];
    y[i] = v < 0.0f ? 0.0f : v;
  }
}

__global__ void relu_backward_kernel(const float* y, const float* dy, float* dx, int64_t n) {
  for (int64_t i = grid_first(); i < n; i += grid_stride()) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

__global__ void add_kernel(const float* a, const float* b, float* y, int64_t n) {
  for (int64_t i = grid_first(); i < n; i += grid_stride()) y[i] = a[i] + b[i];
}

__global__ void add_inplace_kernel(float* y, const float* x, int64_t n) {
  for (int64_t i = grid_first(); i < n; i += grid_stride()) y[i] += x[i];
}

}  // namespace

void relu_forward(Context& ctx, const Tensor& x, Tensor& y) {
  const int64_t n = x.numel();
  if (n == 0) return;
  relu_forward_kernel<<<blocks_for(n), kThreadsPerBlock, 0, scaletrain::cuda::compute_stream(ctx)>>>(
      static_cast<const float*>(x.raw()), static_cast<float*>(y.raw()), n);
  ST_CHECK_LAUNCH();
}

void relu_backward(Context& ctx, const Tensor& y, const Tensor& dy, Tensor& dx) {
  const int64_t n = y.numel();
  if (n == 0) return;
  relu_backward_kernel<<<blocks_for(n), kThreadsPerBlock, 0, scaletrain::cuda::compute_stream(ctx)>>>(
      static_cast<const float*>(y.raw()), static_cast<const float*>(dy.raw()), static_cast<float*>(dx.raw()), n);
  ST_CHECK_LAUNCH();
}

void add_forward(Context& ctx, const Tensor& a, const Tensor& b, Tensor& y) {
  const int64_t n = a.numel();
  if (n == 0) return;
  add_kernel<<<blocks_for(n), kThreadsPerBlock, 0, scaletrain::cuda::compute_stream(ctx)>>>(
      static_cast<const float*>(a.raw()), static_cast<const float*>(b.raw()), static_cast<float*>(y.raw()), n);
  ST_CHECK_LAUNCH();
}

void add_inplace(Context& ctx, Tensor& y, const Tensor& x) {
  const int64_t n = y.numel();
  if (n == 0) return;
  add_inplace_kernel<<<blocks_for(n), kThreadsPerBlock, 0, scaletrain::cuda::compute_stream(ctx)>>>(
      static_cast<float*>(y.raw()), static_cast<const float*>(x.raw()), n);
  ST_CHECK_LAUNCH();
}

}  // namespace scaletrain::ops::cuda
