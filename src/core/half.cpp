// Rounding float arrays to a 16-bit format in place (core/half.hpp): one loop per format, so that
// the compiler vectorises each without a branch per element.
#include "scaletrain/core/half.hpp"

namespace scaletrain {

void round_in_place(HalfFormat format, float* data, int64_t n) {
  if (format == HalfFormat::fp16) {
    for (int64_t i = 0; i < n; ++i) data[i] = fp16_to_float(float_to_fp16(data[i]));
  } else {
    for (int64_t i = 0; i < n; ++i) data[i] = bf16_to_float(float_to_bf16(data[i]));
  }
}

}  // namespace scaletrain
