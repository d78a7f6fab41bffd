// Stand-in for the CUDA DeviceStaging in a build without the CUDA backend. No CUDA tensor can
// exist there, so this is reached only by misuse; it says what to rebuild all the same.
#include "backend/cuda/device_staging_cuda.hpp"
#include "scaletrain/core/error.hpp"

namespace scaletrain::cuda {

std::unique_ptr<DeviceStaging> create_device_staging(Context&, Tensor&) {
  ST_THROW(
      "host staging of a cuda buffer: this scaletrain was built without the CUDA backend; rebuild with "
      "-DSCALETRAIN_CUDA=ON where the CUDA toolkit and cuDNN are installed (docs/gpu.md)");
}

}  // namespace scaletrain::cuda
