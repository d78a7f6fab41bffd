// Private to src/ops/cuda: element access for kernels that read and write 16-bit storage
// (ops/op.hpp, with_half_storage). A tensor's element type is passed as an ElemKind, uniform
// over a launch; loads widen to float (exact), stores round a float to the tensor's format to
// nearest, ties to even (__float2half_rn, __float2bfloat16_rn: core/half.hpp's bits), so a
// kernel computing in float and storing once gives the bits of the fp32 kernel followed by the
// dispatch's rounding (unit.half_storage on the CPU, gpu.half_storage on a GPU).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "scaletrain/core/error.hpp"
#include "scaletrain/tensor/tensor.hpp"

namespace scaletrain {
class Context;
}

namespace scaletrain::ops::cuda {

// y = x in y's storage, both on the GPU, of one element count: a copy where the types agree, else
// cast_to_half or cast_from_half (f32 <-> the 16-bit type; one rounding to nearest, ties to even).
// For kernels with 16-bit storage whose fast path needs one type on both sides (cast_cuda.cu).
void convert_storage(Context& ctx, const Tensor& x, Tensor& y);

enum class ElemKind : int { f32 = 0, f16 = 1, bf16 = 2 };

// The kind of a float tensor (f32, f16 or bf16); throws naming `what` for another dtype.
inline ElemKind elem_kind(const Tensor& t, const char* what) {
  switch (t.dtype()) {
    case DType::f32:
      return ElemKind::f32;
    case DType::f16:
      return ElemKind::f16;
    case DType::bf16:
      return ElemKind::bf16;
    default:
      ST_THROW(what << ": " << dtype_name(t.dtype()) << " is not a float type (f32, f16, bf16)");
  }
}

__device__ __forceinline__ float load_float(const void* p, ElemKind kind, int64_t i) {
  switch (kind) {
    case ElemKind::f16:
      return __half2float(static_cast<const __half*>(p)[i]);
    case ElemKind::bf16:
      return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    default:
      return static_cast<const float*>(p)[i];
  }
}

__device__ __forceinline__ void store_float(void* p, ElemKind kind, int64_t i, float v) {
  switch (kind) {
    case ElemKind::f16:
      static_cast<__half*>(p)[i] = __float2half_rn(v);
      break;
    case ElemKind::bf16:
      static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v);
      break;
    default:
      static_cast<float*>(p)[i] = v;
  }
}

// v rounded to the format of `kind` (to nearest, ties to even), as a float: what storing it so and
// loading it back gives.
__device__ __forceinline__ float round_to_kind(float v, ElemKind kind) {
  switch (kind) {
    case ElemKind::f16:
      return __half2float(__float2half_rn(v));
    case ElemKind::bf16:
      return __bfloat162float(__float2bfloat16_rn(v));
    default:
      return v;
  }
}

}  // namespace scaletrain::ops::cuda
