// The GPU gradient all-reduce's element-wise kernels (gradient_kernels.hpp): grid-stride loops.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "backend/cuda/cuda_context.hpp"
#include "backend/cuda/gradient_kernels.hpp"

namespace scaletrain::cuda {
namespace {

#define ST_GRID_STRIDE(i, count)                                                             \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (count); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

// IEEE division (nvcc's default -prec-div=true), as the CPU's `g /= size`.
__global__ void divide_f32(float* data, float divisor, int64_t count) {
  ST_GRID_STRIDE(i, count) data[i] = __fdiv_rn(data[i], divisor);
}

__global__ void f32_to_fp16(const float* in, uint16_t* out, int64_t count) {
  ST_GRID_STRIDE(i, count) out[i] = __half_as_ushort(__float2half_rn(in[i]));
}

__global__ void f32_to_bf16(const float* in, uint16_t* out, int64_t count) {
  ST_GRID_STRIDE(i, count) out[i] = __bfloat16_as_ushort(__float2bfloat16_rn(in[i]));
}

__global__ void fp16_to_f32(const uint16_t* in, float* out, int64_t count) {
  ST_GRID_STRIDE(i, count) out[i] = __half2float(__ushort_as_half(in[i]));
}

__global__ void bf16_to_f32(const uint16_t* in, float* out, int64_t count) {
  ST_GRID_STRIDE(i, count) out[i] = __bfloat162float(__ushort_as_bfloat16(in[i]));
}

}  // namespace

void launch_divide_f32(float* data, float divisor, int64_t count, cudaStream_t stream) {
  if (count == 0) return;
  divide_f32<<<blocks_for(count), kThreadsPerBlock, 0, stream>>>(data, divisor, count);
  ST_CHECK_LAUNCH();
}

void launch_f32_to_16bit(const float* in, uint16_t* out, int64_t count, bool bf16, cudaStream_t stream) {
  if (count == 0) return;
  if (bf16) {
    f32_to_bf16<<<blocks_for(count), kThreadsPerBlock, 0, stream>>>(in, out, count);
  } else {
    f32_to_fp16<<<blocks_for(count), kThreadsPerBlock, 0, stream>>>(in, out, count);
  }
  ST_CHECK_LAUNCH();
}

void launch_16bit_to_f32(const uint16_t* in, float* out, int64_t count, bool bf16, cudaStream_t stream) {
  if (count == 0) return;
  if (bf16) {
    bf16_to_f32<<<blocks_for(count), kThreadsPerBlock, 0, stream>>>(in, out, count);
  } else {
    fp16_to_f32<<<blocks_for(count), kThreadsPerBlock, 0, stream>>>(in, out, count);
  }
  ST_CHECK_LAUNCH();
}

}  // namespace scaletrain::cuda
