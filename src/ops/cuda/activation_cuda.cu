// CUDA ReLU and element-wise add: one grid-stride pass each, the same expressions as the CPU
// kernels (src/ops/cpu/activation_cpu.cpp), so results are bitwise equal. Every output element
// depends only on the same element of the inputs and is read before it is written by the same
// thread, so outputs may alias inputs (no __restrict__). Each tensor may be f32, f16 or bf16
// (16-bit storage, ops/cuda/half_io.cuh): elements are computed in float and stored once in the
// output's format, the bits of the fp32 kernel and the dispatch's rounding.
#include "backend/cuda/cuda_context.hpp"
#include "ops/cuda/grid_stride.cuh"
#include "ops/cuda/half_io.cuh"
#include "scaletrain/ops/activation.hpp"

namespace scaletrain::ops::cuda {
namespace {

using scaletrain::cuda::blocks_for;
using scaletrain::cuda::kThreadsPerBlock;

__global__ void relu_forward_kernel(const void* x, ElemKind xk, void* y, ElemKind yk, int64_t n) {
  // x < 0 ? 0 : x keeps NaN as NaN, as PyTorch does.
  for (int64_t i = grid_first(); i < n; i += grid_stride()) {
    const float v = load_float(x, xk, i);
    store_float(y, yk, i, v < 0.0f ? 0.0f : v);
  }
}

__global__ void relu_backward_kernel(const void* y, ElemKind yk, const void* dy, ElemKind dyk, void* dx, ElemKind dxk,
                                     int64_t n) {
  for (int64_t i = grid_first(); i < n; i += grid_stride())
    store_float(dx, dxk, i, load_float(y, yk, i) > 0.0f ? load_float(dy, dyk, i) : 0.0f);
}

__global__ void add_kernel(const void* a, ElemKind ak, const void* b, ElemKind bk, void* y, ElemKind yk, int64_t n) {
  for (int64_t i = grid_first(); i < n; i += grid_stride())
    store_float(y, yk, i, load_float(a, ak, i) + load_float(b, bk, i));
}

}  // namespace

void relu_forward(Context& ctx, const Tensor& x, Tensor& y) {
  const int64_t n = x.numel();
  if (n == 0) return;
  relu_forward_kernel<<<blocks_for(n), kThreadsPerBlock, 0, scaletrain::cuda::compute_stream(ctx)>>>(
      x.raw(), elem_kind(x, "relu_forward"), y.raw(), elem_kind(y, "relu_forward"), n);
  ST_CHECK_LAUNCH();
}

void relu_backward(Context& ctx, const Tensor& y, const Tensor& dy, Tensor& dx) {
  const int64_t n = y.numel();
  if (n == 0) return;
  const char* op = "relu_backward";
  relu_backward_kernel<<<blocks_for(n), kThreadsPerBlock, 0, scaletrain::cuda::compute_stream(ctx)>>>(
      y.raw(), elem_kind(y, op), dy.raw(), elem_kind(dy, op), dx.raw(), elem_kind(dx, op), n);
  ST_CHECK_LAUNCH();
}

void add_forward(Context& ctx, const Tensor& a, const Tensor& b, Tensor& y) {
  const int64_t n = a.numel();
  if (n == 0) return;
  const char* op = "add_forward";
  add_kernel<<<blocks_for(n), kThreadsPerBlock, 0, scaletrain::cuda::compute_stream(ctx)>>>(
      a.raw(), elem_kind(a, op), b.raw(), elem_kind(b, op), y.raw(), elem_kind(y, op), n);
  ST_CHECK_LAUNCH();
}

// y += x: the add with y as its first operand and its output.
void add_inplace(Context& ctx, Tensor& y, const Tensor& x) {
  const int64_t n = y.numel();
  if (n == 0) return;
  const char* op = "add_inplace";
  add_kernel<<<blocks_for(n), kThreadsPerBlock, 0, scaletrain::cuda::compute_stream(ctx)>>>(
      y.raw(), elem_kind(y, op), x.raw(), elem_kind(x, op), y.raw(), elem_kind(y, op), n);
  ST_CHECK_LAUNCH();
}

}  // namespace scaletrain::ops::cuda
