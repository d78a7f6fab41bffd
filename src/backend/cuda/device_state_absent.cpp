// Stand-in for the CUDA Context state in a build without the CUDA backend: opening a CUDA Context
// is refused with what to rebuild. Nothing else here can run, since no state is ever made.
#include "backend/cuda/device_state.hpp"
#include "scaletrain/core/error.hpp"

namespace scaletrain::cuda {

struct DeviceState {};

void DeviceStateDeleter::operator()(DeviceState* state) const { delete state; }

DeviceStatePtr open_device_state(int gpu_index) {
  ST_THROW(
      "--device cuda (GPU " << gpu_index
                            << "): this scaletrain was built without the CUDA backend; rebuild with "
                               "-DSCALETRAIN_CUDA=ON where the CUDA toolkit and cuDNN are installed (docs/gpu.md)");
}

void synchronize(DeviceState&) {}
AllocatorStats memory_stats(const DeviceState&) { return {}; }
void set_allow_tf32(DeviceState&, bool) {}

}  // namespace scaletrain::cuda
