// Private to src/ops/cuda: the grid-stride loop's bounds, in int64_t so that tensors past 2^31
// elements index correctly. Kernels are launched with scaletrain::cuda::blocks_for(n) blocks of
// kThreadsPerBlock threads; blocks_for caps the grid, and the loop covers the rest.
#pragma once

#include <cstdint>

namespace scaletrain::ops::cuda {

__device__ inline int64_t grid_first() { return blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; }
__device__ inline int64_t grid_stride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

}  // namespace scaletrain::ops::cuda
