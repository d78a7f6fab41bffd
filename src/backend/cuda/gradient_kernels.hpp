// Private: the element-wise kernels of the GPU gradient all-reduce (comm/nccl_reducer.hpp): the
// mean's division and the 16-bit wire format's casts, on the stream the caller names. They round
// as the CPU path does (IEEE division, round to nearest even), so the two give the same bits.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace scaletrain::cuda {

// data[i] /= divisor.
void launch_divide_f32(float* data, float divisor, int64_t count, cudaStream_t stream);
// out[i] = in[i] rounded to fp16 (bf16 when `bf16`), as 16-bit words.
void launch_f32_to_16bit(const float* in, uint16_t* out, int64_t count, bool bf16, cudaStream_t stream);
// out[i] = in[i] widened to f32 (exact).
void launch_16bit_to_f32(const uint16_t* in, float* out, int64_t count, bool bf16, cudaStream_t stream);

}  // namespace scaletrain::cuda
