// Private to src/ops/cuda: reductions over the threads of one block of
// scaletrain::cuda::kThreadsPerBlock threads, in a fixed tree order (the same bits on every call,
// whatever the scheduling), for kernels that give a block one row (layer norm, masked softmax).
// Every thread of the block must call them, with its own partial value; every thread gets the
// result. `scratch` is __shared__ storage of kThreadsPerBlock values of the type.
#pragma once

#include "backend/cuda/cuda_context.hpp"

namespace scaletrain::ops::cuda {

template <typename T, typename Combine>
__device__ T block_reduce(T value, T* scratch, Combine combine) {
  constexpr int threads = scaletrain::cuda::kThreadsPerBlock;
  scratch[threadIdx.x] = value;
  __syncthreads();
  for (int half = threads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) scratch[threadIdx.x] = combine(scratch[threadIdx.x], scratch[threadIdx.x + half]);
    __syncthreads();
  }
  const T total = scratch[0];
  __syncthreads();  // before the next call overwrites scratch
  return total;
}

struct Plus {
  __device__ double operator()(double a, double b) const { return a + b; }
};
struct Max {
  __device__ float operator()(float a, float b) const { return a > b ? a : b; }
};

__device__ inline double block_sum(double value, double* scratch) { return block_reduce(value, scratch, Plus{}); }
__device__ inline float block_max(float value, float* scratch) { return block_reduce(value, scratch, Max{}); }

// Blocks for a kernel that gives each block one row and grid-strides over the rows: one per row,
// capped (the loop covers the rest).
inline unsigned row_blocks(int64_t rows) {
  return static_cast<unsigned>(rows < (int64_t{1} << 20) ? rows : (int64_t{1} << 20));
}

}  // namespace scaletrain::ops::cuda
