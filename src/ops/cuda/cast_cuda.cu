// CUDA float32 <-> fp16 / bf16: one thread per element, with the CUDA math headers' round-to-
// nearest-even conversions (__float2half_rn, __float2bfloat16_rn; the latter emulated in software
// below sm_80, so it runs on V100 too). They give core/half.hpp's bits for every finite value,
// subnormals and overflow to inf included; the op cases check it, and a NaN stays a NaN (its
// payload is not compared).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "backend/cuda/cuda_context.hpp"
#include "ops/cuda/grid_stride.cuh"
#include "ops/cuda/half_gemm.hpp"
#include "ops/cuda/half_io.cuh"
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

void launch_cast_to_half(cudaStream_t stream, const float* x, void* y, int64_t n, HalfFormat format) {
  const auto blocks = scaletrain::cuda::blocks_for(n);
  if (format == HalfFormat::fp16) {
    float_to_fp16_kernel<<<blocks, scaletrain::cuda::kThreadsPerBlock, 0, stream>>>(x, static_cast<__half*>(y), n);
  } else {
    float_to_bf16_kernel<<<blocks, scaletrain::cuda::kThreadsPerBlock, 0, stream>>>(x, static_cast<__nv_bfloat16*>(y),
                                                                                    n);
  }
  ST_CHECK_LAUNCH();
}

void cast_to_half(Context& ctx, const Tensor& x, Tensor& y) {
  launch_cast_to_half(scaletrain::cuda::compute_stream(ctx), static_cast<const float*>(x.raw()), y.raw(), x.numel(),
                      y.dtype() == DType::f16 ? HalfFormat::fp16 : HalfFormat::bf16);
}

void launch_cast_from_half(cudaStream_t stream, const void* x, float* y, int64_t n, HalfFormat format) {
  const auto blocks = scaletrain::cuda::blocks_for(n);
  if (format == HalfFormat::fp16) {
    fp16_to_float_kernel<<<blocks, scaletrain::cuda::kThreadsPerBlock, 0, stream>>>(static_cast<const __half*>(x), y,
                                                                                    n);
  } else {
    bf16_to_float_kernel<<<blocks, scaletrain::cuda::kThreadsPerBlock, 0, stream>>>(
        static_cast<const __nv_bfloat16*>(x), y, n);
  }
  ST_CHECK_LAUNCH();
}

void cast_from_half(Context& ctx, const Tensor& x, Tensor& y) {
  launch_cast_from_half(scaletrain::cuda::compute_stream(ctx), x.raw(), static_cast<float*>(y.raw()), x.numel(),
                        x.dtype() == DType::f16 ? HalfFormat::fp16 : HalfFormat::bf16);
}

void convert_storage(Context& ctx, const Tensor& x, Tensor& y) {
  ST_CHECK(x.numel() == y.numel(), "convert_storage: " << x.numel() << " elements into " << y.numel());
  if (x.numel() == 0) return;
  if (x.dtype() == y.dtype()) {
    if (x.raw() != y.raw())
      ST_CHECK_CUDA(cudaMemcpyAsync(y.raw(), x.raw(), x.bytes(), cudaMemcpyDeviceToDevice,
                                    scaletrain::cuda::compute_stream(ctx)));
  } else if (x.dtype() == DType::f32) {
    cast_to_half(ctx, x, y);
  } else if (y.dtype() == DType::f32) {
    cast_from_half(ctx, x, y);
  } else {
    ST_THROW("convert_storage: " << dtype_name(x.dtype()) << " into " << dtype_name(y.dtype())
                                 << ": only float32 to or from a 16-bit type");
  }
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
