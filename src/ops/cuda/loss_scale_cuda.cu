// Unscaling the gradients on the GPU: a grid-stride pass with an IEEE-rounded multiply (the CPU's
// bits), each thread counting its non-finite elements and, where it saw any, adding them to one
// device counter, which the host reads at the end (the step waits for it anyway, to decide
// whether to skip).
#include "backend/cuda/cuda_context.hpp"
#include "ops/cuda/grid_stride.cuh"
#include "scaletrain/ops/loss_scale.hpp"

namespace scaletrain::ops::cuda {
namespace {
__global__ void unscale_kernel(float* g, int64_t n, float inv_scale, unsigned long long* nonfinite) {
  unsigned long long mine = 0;
  for (int64_t j = grid_first(); j < n; j += grid_stride()) {
    const float v = g[j];
    mine += isfinite(v) ? 0 : 1;
    g[j] = __fmul_rn(v, inv_scale);
  }
  // Most steps have none: only threads that saw one touch the counter.
  if (mine != 0) atomicAdd(nonfinite, mine);
}
}  // namespace

int64_t unscale_gradients(Context& ctx, float inv_scale, Tensor& grad) {
  const int64_t n = grad.numel();
  if (n == 0) return 0;
  cudaStream_t stream = scaletrain::cuda::compute_stream(ctx);
  auto* count = static_cast<unsigned long long*>(scaletrain::cuda::workspace(ctx, sizeof(unsigned long long)));
  ST_CHECK_CUDA(cudaMemsetAsync(count, 0, sizeof(unsigned long long), stream));
  unscale_kernel<<<scaletrain::cuda::blocks_for(n), scaletrain::cuda::kThreadsPerBlock, 0, stream>>>(
      static_cast<float*>(grad.raw()), n, inv_scale, count);
  ST_CHECK_LAUNCH();
  unsigned long long host = 0;
  ST_CHECK_CUDA(cudaMemcpyAsync(&host, count, sizeof host, cudaMemcpyDeviceToHost, stream));
  ST_CHECK_CUDA(cudaStreamSynchronize(stream));
  return static_cast<int64_t>(host);
}

}  // namespace scaletrain::ops::cuda
