// CUDA (A, B, C, D) -> (A, C, B, D): one thread per element of y, reading x at its transposed
// place (a copy, the CPU's bits). Each thread reads and writes along d, so runs of D floats
// (the head size, 64 in the Transformer) are contiguous on both sides. 16-bit storage
// (with_half_storage): each element is read and written in its tensor's format, a copy where the
// two formats agree (ops/cuda/half_io.cuh).
#include "backend/cuda/cuda_context.hpp"
#include "ops/cuda/grid_stride.cuh"
#include "ops/cuda/half_io.cuh"
#include "scaletrain/ops/swap_axes.hpp"

namespace scaletrain::ops::cuda {
namespace {

__global__ void swap_middle_axes_kernel(const void* x, ElemKind xk, void* y, ElemKind yk, int64_t total, int64_t b_dim,
                                        int64_t c_dim, int64_t d_dim) {
  for (int64_t e = grid_first(); e < total; e += grid_stride()) {
    // e indexes y as (a, c, b, d).
    const int64_t d = e % d_dim;
    int64_t rest = e / d_dim;
    const int64_t b = rest % b_dim;
    rest /= b_dim;
    const int64_t c = rest % c_dim;
    const int64_t a = rest / c_dim;
    store_float(y, yk, e, load_float(x, xk, ((a * b_dim + b) * c_dim + c) * d_dim + d));
  }
}

}  // namespace

void swap_middle_axes(Context& ctx, const Tensor& x, Tensor& y) {
  const int64_t total = x.numel();
  swap_middle_axes_kernel<<<scaletrain::cuda::blocks_for(total), scaletrain::cuda::kThreadsPerBlock, 0,
                            scaletrain::cuda::compute_stream(ctx)>>>(x.raw(), elem_kind(x, "swap_middle_axes x"),
                                                                     y.raw(), elem_kind(y, "swap_middle_axes y"), total,
                                                                     x.dim(1), x.dim(2), x.dim(3));
  ST_CHECK_LAUNCH();
}

}  // namespace scaletrain::ops::cuda
