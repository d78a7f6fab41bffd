// CUDA element-wise product and its gradient: grid-stride passes, each product rounded once
// (__fmul_rn, as the CPU): the same bits as the CPU. Backward reads dy before writing da and db,
// which may alias it. 16-bit storage (with_half_storage): each tensor is read and written in its
// own format (ops/cuda/half_io.cuh), the product of the widened values stored once.
#include "backend/cuda/cuda_context.hpp"
#include "ops/cuda/grid_stride.cuh"
#include "ops/cuda/half_io.cuh"
#include "scaletrain/ops/multiply.hpp"

namespace scaletrain::ops::cuda {
namespace {

__global__ void multiply_kernel(const void* a, ElemKind ak, const void* b, ElemKind bk, void* y, ElemKind yk,
                                int64_t n) {
  for (int64_t i = grid_first(); i < n; i += grid_stride())
    store_float(y, yk, i, __fmul_rn(load_float(a, ak, i), load_float(b, bk, i)));
}

__global__ void multiply_backward_kernel(const void* a, ElemKind ak, const void* b, ElemKind bk, const void* dy,
                                         ElemKind dyk, void* da, ElemKind dak, void* db, ElemKind dbk, int64_t n) {
  for (int64_t i = grid_first(); i < n; i += grid_stride()) {
    // In the CPU kernel's order: dy read first (da or db may alias it), a read after da is written.
    const float g = load_float(dy, dyk, i);
    store_float(da, dak, i, __fmul_rn(g, load_float(b, bk, i)));
    store_float(db, dbk, i, __fmul_rn(g, load_float(a, ak, i)));
  }
}

}  // namespace

void multiply_forward(Context& ctx, const Tensor& a, const Tensor& b, Tensor& y) {
  const int64_t n = a.numel();
  if (n == 0) return;
  multiply_kernel<<<scaletrain::cuda::blocks_for(n), scaletrain::cuda::kThreadsPerBlock, 0,
                    scaletrain::cuda::compute_stream(ctx)>>>(a.raw(), elem_kind(a, "multiply_forward a"), b.raw(),
                                                             elem_kind(b, "multiply_forward b"), y.raw(),
                                                             elem_kind(y, "multiply_forward y"), n);
  ST_CHECK_LAUNCH();
}

void multiply_backward(Context& ctx, const Tensor& a, const Tensor& b, const Tensor& dy, Tensor& da, Tensor& db) {
  const int64_t n = a.numel();
  if (n == 0) return;
  multiply_backward_kernel<<<scaletrain::cuda::blocks_for(n), scaletrain::cuda::kThreadsPerBlock, 0,
                             scaletrain::cuda::compute_stream(ctx)>>>(
      a.raw(), elem_kind(a, "multiply_backward a"), b.raw(), elem_kind(b, "multiply_backward b"), dy.raw(),
      elem_kind(dy, "multiply_backward dy"), da.raw(), elem_kind(da, "multiply_backward da"), db.raw(),
      elem_kind(db, "multiply_backward db"), n);
  ST_CHECK_LAUNCH();
}

}  // namespace scaletrain::ops::cuda
