// CUDA scaled, masked, position-added embedding: one thread per element (the CPU's arithmetic:
// one multiply, one add, the same bits). 16-bit storage (with_half_storage): x, the positions, y,
// dy and dx are read and written in their own formats (ops/cuda/half_io.cuh), the arithmetic in
// float as before, each value stored once.
#include "backend/cuda/cuda_context.hpp"
#include "ops/cuda/grid_stride.cuh"
#include "ops/cuda/half_io.cuh"
#include "scaletrain/ops/token_embedding.hpp"

namespace scaletrain::ops::cuda {
namespace {

__global__ void token_embedding_forward_kernel(const void* x, ElemKind xk, const int32_t* ids, float scale,
                                               const void* pe, ElemKind pk, void* y, ElemKind yk, int64_t total,
                                               int64_t length, int64_t d) {
  for (int64_t e = grid_first(); e < total; e += grid_stride()) {
    const int64_t r = e / d;
    const float s = ids[r] != 0 ? scale : 0.0f;
    store_float(y, yk, e, __fadd_rn(__fmul_rn(s, load_float(x, xk, e)), load_float(pe, pk, (r % length) * d + e % d)));
  }
}

__global__ void token_embedding_backward_kernel(const int32_t* ids, float scale, const void* dy, ElemKind dyk, void* dx,
                                                ElemKind dxk, int64_t total, int64_t d) {
  for (int64_t e = grid_first(); e < total; e += grid_stride()) {
    const float s = ids[e / d] != 0 ? scale : 0.0f;
    store_float(dx, dxk, e, s * load_float(dy, dyk, e));
  }
}

}  // namespace

void token_embedding_forward(Context& ctx, const Tensor& x, const Tensor& ids, float scale, const Tensor& positions,
                             Tensor& y) {
  const int64_t total = x.numel();
  token_embedding_forward_kernel<<<scaletrain::cuda::blocks_for(total), scaletrain::cuda::kThreadsPerBlock, 0,
                                   scaletrain::cuda::compute_stream(ctx)>>>(
      x.raw(), elem_kind(x, "token_embedding_forward x"), static_cast<const int32_t*>(ids.raw()), scale,
      positions.raw(), elem_kind(positions, "token_embedding_forward positions"), y.raw(),
      elem_kind(y, "token_embedding_forward y"), total, x.dim(1), x.dim(2));
  ST_CHECK_LAUNCH();
}

void token_embedding_backward(Context& ctx, const Tensor& ids, float scale, const Tensor& dy, Tensor& dx) {
  const int64_t total = dy.numel();
  token_embedding_backward_kernel<<<scaletrain::cuda::blocks_for(total), scaletrain::cuda::kThreadsPerBlock, 0,
                                    scaletrain::cuda::compute_stream(ctx)>>>(
      static_cast<const int32_t*>(ids.raw()), scale, dy.raw(), elem_kind(dy, "token_embedding_backward dy"), dx.raw(),
      elem_kind(dx, "token_embedding_backward dx"), total, dy.dim(2));
  ST_CHECK_LAUNCH();
}

}  // namespace scaletrain::ops::cuda
