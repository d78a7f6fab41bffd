// Tensor::fill on the GPU: one grid-stride kernel.
#include "backend/cuda/cuda_context.hpp"
#include "backend/cuda/memory_kernels.hpp"

namespace scaletrain::cuda {
namespace {
__global__ void fill_f32(float* data, float value, int64_t count) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    data[i] = value;
}
}  // namespace

void launch_fill_f32(float* data, float value, int64_t count, cudaStream_t stream) {
  if (count == 0) return;
  fill_f32<<<blocks_for(count), kThreadsPerBlock, 0, stream>>>(data, value, count);
  ST_CHECK_LAUNCH();
}
}  // namespace scaletrain::cuda
