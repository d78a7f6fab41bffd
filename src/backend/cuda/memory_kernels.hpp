// Private: the CUDA backend's own fill kernel, launched by its DeviceMemory (Tensor::fill).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace scaletrain::cuda {
void launch_fill_f32(float* data, float value, int64_t count, cudaStream_t stream);
}
