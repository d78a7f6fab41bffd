// CUDA dropout: one thread per block of four elements (grid-stride beyond the grid's cap), the
// same arithmetic as the CPU kernel (src/ops/dropout_mask.hpp: Philox4x32-10, an integer compare,
// one float multiply), so both devices give the same bits. Each element is read before it is
// written by the same thread, so the output may alias the input (no __restrict__).
// 16-bit storage (with_half_storage): each block of four is widened, masked and scaled in float as
// above and stored once in the output's format: the fp32 kernel's bits, rounded as the dispatch would.
#include "backend/cuda/cuda_context.hpp"
#include "ops/cuda/grid_stride.cuh"
#include "ops/cuda/half_io.cuh"
#include "ops/dropout_mask.hpp"
#include "scaletrain/ops/dropout.hpp"

namespace scaletrain::ops::cuda {
namespace {

using scaletrain::cuda::blocks_for;
using scaletrain::cuda::kThreadsPerBlock;

__global__ void dropout_kernel(DropoutMask mask, const void* in, ElemKind ink, void* out, ElemKind outk, int64_t n) {
  const int64_t blocks = (n + 3) / 4;
  for (int64_t b = grid_first(); b < blocks; b += grid_stride()) {
    const int64_t first = 4 * b;
    const int count = n - first < 4 ? static_cast<int>(n - first) : 4;
    float x[4], y[4];
    for (int j = 0; j < count; ++j) x[j] = load_float(in, ink, first + j);
    dropout_block(mask, static_cast<uint64_t>(b), x, y, count);
    for (int j = 0; j < count; ++j) store_float(out, outk, first + j, y[j]);
  }
}

void apply(Context& ctx, const DropoutParams& params, const Tensor& in, Tensor& out) {
  const int64_t n = in.numel();
  if (n == 0) return;
  const cudaStream_t stream = scaletrain::cuda::compute_stream(ctx);
  const ElemKind ink = elem_kind(in, "dropout input"), outk = elem_kind(out, "dropout output");
  if (params.p == 0.0) {  // the identity, exactly, as on the CPU (a copy, or one rounding into out's type)
    convert_storage(ctx, in, out);
    return;
  }
  const int64_t blocks = (n + 3) / 4;
  dropout_kernel<<<blocks_for(blocks), kThreadsPerBlock, 0, stream>>>(dropout_mask(params), in.raw(), ink, out.raw(),
                                                                      outk, n);
  ST_CHECK_LAUNCH();
}

}  // namespace

void dropout_forward(Context& ctx, const DropoutParams& params, const Tensor& x, Tensor& y) {
  apply(ctx, params, x, y);
}

void dropout_backward(Context& ctx, const DropoutParams& params, const Tensor& dy, Tensor& dx) {
  apply(ctx, params, dy, dx);
}

}  // namespace scaletrain::ops::cuda
