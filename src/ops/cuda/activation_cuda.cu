// CUDA ReLU and element-wise add: one grid-stride pass each, the same expressions as the CPU
// kernels (src/ops/cpu/activation_cpu.cpp), so results are bitwise equal. Every output element
// depends only on the same element of the inputs and is read before it is written by the same
// thread, so outputs may alias inputs (no __restrict__). Each tensor may be f32, f16 or bf16
// (16-bit storage, ops/cuda/half_io.cuh): elements are computed in float and stored once in the
// output's format, the bits of the fp32 kernel and the dispatch's rounding. Where every operand has
// one type and is 16-byte aligned (the usual case: the caching allocator's blocks are), the pass
// runs over 16-byte packs (packed_io.cuh), which keeps the GPU's memory busy; the element-wise
// kernels take the rest (mixed types, views at odd offsets).
#include "backend/cuda/cuda_context.hpp"
#include "ops/cuda/grid_stride.cuh"
#include "ops/cuda/half_io.cuh"
#include "ops/cuda/packed_io.cuh"
#include "scaletrain/ops/activation.hpp"

namespace scaletrain::ops::cuda {
namespace {

using scaletrain::cuda::blocks_for;
using scaletrain::cuda::kThreadsPerBlock;

// The three expressions, shared by the packed and the element-wise kernels.
struct Relu {
  // x < 0 ? 0 : x keeps NaN as NaN, as PyTorch does.
  __device__ float operator()(float x) const { return x < 0.0f ? 0.0f : x; }
};
struct ReluGradient {
  __device__ float operator()(float y, float dy) const { return y > 0.0f ? dy : 0.0f; }
};
struct Sum {
  __device__ float operator()(float a, float b) const { return a + b; }
};

__global__ void relu_forward_kernel(const void* x, ElemKind xk, void* y, ElemKind yk, int64_t n) {
  for (int64_t i = grid_first(); i < n; i += grid_stride()) store_float(y, yk, i, Relu{}(load_float(x, xk, i)));
}

template <typename F>
__global__ void map2_kernel(const void* a, ElemKind ak, const void* b, ElemKind bk, void* y, ElemKind yk, int64_t n,
                            F f) {
  for (int64_t i = grid_first(); i < n; i += grid_stride())
    store_float(y, yk, i, f(load_float(a, ak, i), load_float(b, bk, i)));
}

// y = f(a, b) element by element: packed where it can be, else the element-wise kernel.
template <typename F>
void launch_map2(Context& ctx, const Tensor& a, const Tensor& b, Tensor& y, F f, const char* op) {
  const int64_t n = y.numel();
  const ElemKind ak = elem_kind(a, op), bk = elem_kind(b, op), yk = elem_kind(y, op);
  const cudaStream_t stream = scaletrain::cuda::compute_stream(ctx);
  if (ak == yk && bk == yk && packs_aligned({a.raw(), b.raw(), y.raw()})) {
    with_storage_type(yk, [&](auto type) {
      packed_map2<decltype(type)>
          <<<blocks_for(packs_of(n, yk)), kThreadsPerBlock, 0, stream>>>(a.raw(), b.raw(), y.raw(), n, f);
    });
  } else {
    map2_kernel<<<blocks_for(n), kThreadsPerBlock, 0, stream>>>(a.raw(), ak, b.raw(), bk, y.raw(), yk, n, f);
  }
  ST_CHECK_LAUNCH();
}

}  // namespace

void relu_forward(Context& ctx, const Tensor& x, Tensor& y) {
  const int64_t n = x.numel();
  if (n == 0) return;
  const char* op = "relu_forward";
  const ElemKind xk = elem_kind(x, op), yk = elem_kind(y, op);
  const cudaStream_t stream = scaletrain::cuda::compute_stream(ctx);
  if (xk == yk && packs_aligned({x.raw(), y.raw()})) {
    with_storage_type(yk, [&](auto type) {
      packed_map1<decltype(type)>
          <<<blocks_for(packs_of(n, yk)), kThreadsPerBlock, 0, stream>>>(x.raw(), y.raw(), n, Relu{});
    });
  } else {
    relu_forward_kernel<<<blocks_for(n), kThreadsPerBlock, 0, stream>>>(x.raw(), xk, y.raw(), yk, n);
  }
  ST_CHECK_LAUNCH();
}

void relu_backward(Context& ctx, const Tensor& y, const Tensor& dy, Tensor& dx) {
  if (y.numel() == 0) return;
  launch_map2(ctx, y, dy, dx, ReluGradient{}, "relu_backward");
}

void add_forward(Context& ctx, const Tensor& a, const Tensor& b, Tensor& y) {
  if (a.numel() == 0) return;
  launch_map2(ctx, a, b, y, Sum{}, "add_forward");
}

// y += x: the add with y as its first operand and its output.
void add_inplace(Context& ctx, Tensor& y, const Tensor& x) {
  if (y.numel() == 0) return;
  launch_map2(ctx, y, x, y, Sum{}, "add_inplace");
}

}  // namespace scaletrain::ops::cuda
