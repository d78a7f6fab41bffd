// CUDA float32 <-> fp16 / bf16: one thread per element, with the CUDA math headers' round-to-
// nearest-even conversions (__float2half_rn, __float2bfloat16_rn; the latter emulated in software
// below sm_80, so it runs on V100 too). They give core/half.hpp's bits for every finite value,
// subnormals and overflow to inf included; the op cases check it, and a NaN stays a NaN (its
// payload is not compared).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "backend/cuda/cuda_context.hpp"
#include "ops/cuda/grid_stride.cuh"
#include "scaletrain/ops/cast.hpp"

namespace scaletrain::ops::cuda {
namespace {

__global__ void float_to_fp16_kernel(const float* x, __half* y, int64_t n) {
  for (int64_t i = grid_first(); i < n; i += grid_stride()) y[i] = __float2half_rn(x[i]);
}
__global__ void float_to_bf16_kernel(const float* x, __nv_bfloat16* y, int64_t n) {
  for (int64_t i = grid_first(); i < n; i += grid_stride()) y[i] = __float2bfloat16_rn(x[i]);
}
__global__ void fp16_to_float_kernel(const __half* x, float* y, int64_t n) {
  for (int64_t i = grid_first(); i < n; i += grid_stride()) y[i] = __half2float(x[i]);
}
__global__ void bf16_to_float_kernel(const __nv_bfloat16* x, float* y, int64_t n) {
  for (int64_t i = grid_first(); i < n; i += grid_stride()) y[i] = __bfloat162float(x[i]);
}

// In place: the float each element becomes when stored in 16 bits and read back.
__global__ void round_to_fp16_kernel(float* x, int64_t n) {
  for (int64_t i = grid_first(); i < n; i += grid_stride()) x[i] = __half2float(__float2half_rn(x[i]));
}
__global__ void round_to_bf16_kernel(float* x, int64_t n) {
  for (int64_t i = grid_first(); i < n; i += grid_stride()) x[i] = __bfloat162float(__float2bfloat16_rn(x[i]));
}

}  // namespace

void cast_to_half(Context& ctx, const Tensor& x, Tensor& y) {
  const int64_t n = x.numel();
  const auto blocks = scaletrain::cuda::blocks_for(n);
  cudaStream_t stream = scaletrain::cuda::compute_stream(ctx);
  const float* in = static_cast<const float*>(x.raw());
  if (y.dtype() == DType::f16) {
    float_to_fp16_kernel<<<blocks, scaletrain::cuda::kThreadsPerBlock, 0, stream>>>(in, static_cast<__half*>(y.raw()),
                                                                                    n);
  } else {
    float_to_bf16_kernel<<<blocks, scaletrain::cuda::kThreadsPerBlock, 0, stream>>>(
        in, static_cast<__nv_bfloat16*>(y.raw()), n);
  }
  ST_CHECK_LAUNCH();
}

void cast_from_half(Context& ctx, const Tensor& x, Tensor& y) {
  const int64_t n = x.numel();
  const auto blocks = scaletrain::cuda::blocks_for(n);
  cudaStream_t stream = scaletrain::cuda::compute_stream(ctx);
  float* out = static_cast<float*>(y.raw());
  if (x.dtype() == DType::f16) {
    fp16_to_float_kernel<<<blocks, scaletrain::cuda::kThreadsPerBlock, 0, stream>>>(static_cast<const __half*>(x.raw()),
                                                                                    out, n);
  } else {
    bf16_to_float_kernel<<<blocks, scaletrain::cuda::kThreadsPerBlock, 0, stream>>>(
        static_cast<const __nv_bfloat16*>(x.raw()), out, n);
  }
  ST_CHECK_LAUNCH();
}

void round_to_half(Context& ctx, Tensor& x, HalfFormat format) {
  const int64_t n = x.numel();
  const auto blocks = scaletrain::cuda::blocks_for(n);
  cudaStream_t stream = scaletrain::cuda::compute_stream(ctx);
  float* data = static_cast<float*>(x.raw());
  if (format == HalfFormat::fp16) {
    round_to_fp16_kernel<<<blocks, scaletrain::cuda::kThreadsPerBlock, 0, stream>>>(data, n);
  } else {
    round_to_bf16_kernel<<<blocks, scaletrain::cuda::kThreadsPerBlock, 0, stream>>>(data, n);
  }
  ST_CHECK_LAUNCH();
}

}  // namespace scaletrain::ops::cuda
