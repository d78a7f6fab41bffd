// CPU float32 <-> fp16 / bf16: core/half.hpp's conversions, element by element, on the
// context's OpenMP threads.
#include "scaletrain/core/half.hpp"
#include "scaletrain/ops/cast.hpp"

namespace scaletrain::ops::cpu {

constexpr int64_t kParallelMin = int64_t{1} << 15;  // below this, threads cost more than they save

void cast_to_half(Context&, const Tensor& x, Tensor& y) {
  const float* in = x.data<float>();
  uint16_t* out = static_cast<uint16_t*>(y.raw());
  const int64_t n = x.numel();
  const bool fp16 = y.dtype() == DType::f16;
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) out[i] = fp16 ? float_to_fp16(in[i]) : float_to_bf16(in[i]);
}

void cast_from_half(Context&, const Tensor& x, Tensor& y) {
  const uint16_t* in = static_cast<const uint16_t*>(x.raw());
  float* out = y.data<float>();
  const int64_t n = x.numel();
  const bool fp16 = x.dtype() == DType::f16;
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) out[i] = fp16 ? fp16_to_float(in[i]) : bf16_to_float(in[i]);
}

void round_to_half(Context&, Tensor& x, HalfFormat format) { round_in_place(format, x.data<float>(), x.numel()); }

}  // namespace scaletrain::ops::cpu
