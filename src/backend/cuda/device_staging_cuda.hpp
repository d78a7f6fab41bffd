// Private: the CUDA DeviceStaging's factory, seen from code that includes no CUDA header
// (src/backend/device_staging.cpp, which every build compiles and which dispatches on the
// buffer's device). Defined in device_staging.cpp where the CUDA backend is built, and by
// device_staging_absent.cpp, which refuses, where it is not.
#pragma once

#include <memory>

#include "scaletrain/backend/device_staging.hpp"

namespace scaletrain::cuda {

// ctx is a CUDA Context and device_buffer an f32 tensor on it (checked by the caller).
std::unique_ptr<DeviceStaging> create_device_staging(Context& ctx, Tensor& device_buffer);

}  // namespace scaletrain::cuda
