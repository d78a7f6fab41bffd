// CUDA dropout: one thread per block of four elements (grid-stride beyond the grid's cap), the
// same arithmetic as the CPU kernel (src/ops/dropout_mask.hpp: Philox4x32-10, an integer compare,
// one float multiply), so both devices give the same bits. Each element is read before it is
// written by the same thread, so the output may alias the input (no __restrict__).
#include "backend/cuda/cuda_context.hpp"
#include "ops/cuda/grid_stride.cuh"
#include "ops/dropout_mask.hpp"
#include "scaletrain/ops/dropout.hpp"

namespace scaletrain::ops::cuda {
namespace {

using scaletrain::cuda::blocks_for;
using scaletrain::cuda::kThreadsPerBlock;

__global__ void dropout_kernel(DropoutMask mask, const float* in, float* out, int64_t n) {
  const int64_t blocks = (n + 3) / 4;
  for (int64_t b = grid_first(); b < blocks; b += grid_stride()) {
    const int64_t first = 4 * b;
    const int count = n - first < 4 ? static_cast<int>(n - first) : 4;
    dropout_block(mask, static_cast<uint64_t>(b), in + first, out + first, count);
  }
}

void apply(Context& ctx, const DropoutParams& params, const Tensor& in, Tensor& out) {
  const int64_t n = in.numel();
  if (n == 0) return;
  const cudaStream_t stream = scaletrain::cuda::compute_stream(ctx);
  if (params.p == 0.0) {  // the identity, exactly, as on the CPU
    if (out.raw() != in.raw())
      ST_CHECK_CUDA(cudaMemcpyAsync(out.raw(), in.raw(), in.bytes(), cudaMemcpyDeviceToDevice, stream));
    return;
  }
  const int64_t blocks = (n + 3) / 4;
  dropout_kernel<<<blocks_for(blocks), kThreadsPerBlock, 0, stream>>>(
      dropout_mask(params), static_cast<const float*>(in.raw()), static_cast<float*>(out.raw()), n);
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
