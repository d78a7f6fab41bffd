// Private: the CUDA state of a Context, seen from code that includes no CUDA header (context.cpp,
// which every build compiles). Defined in device_state.cpp where the CUDA backend is built, and by
// device_state_absent.cpp, which refuses, where it is not.
#pragma once

#include <memory>

#include "scaletrain/core/caching_allocator.hpp"

namespace scaletrain::cuda {

struct DeviceState;
struct DeviceStateDeleter {
  void operator()(DeviceState* state) const;
};
using DeviceStatePtr = std::unique_ptr<DeviceState, DeviceStateDeleter>;

// Makes GPU `gpu_index` this process's current device and opens its streams, library handles and
// caching allocator (which then backs every Device::cuda tensor). One at a time per process.
// Throws scaletrain::Error naming the GPU and the failing call; "not built" without the backend.
DeviceStatePtr open_device_state(int gpu_index);
// Waits for the work submitted to the compute and copy streams.
void synchronize(DeviceState& state);
AllocatorStats memory_stats(const DeviceState& state);
// cuBLAS's math mode: TF32 tensor-op math when allowed, the default (fp32) otherwise. cuDNN's
// convolutions read the Context's flag when they choose an algorithm (ops/cuda/conv2d_cuda.cu).
void set_allow_tf32(DeviceState& state, bool allow);

}  // namespace scaletrain::cuda
