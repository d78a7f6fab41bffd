// Stand-in for NVTX ranges (nvtx.hpp) in a build without the CUDA backend: nothing to profile.
#include "scaletrain/backend/nvtx.hpp"

namespace scaletrain {

void nvtx_push(const char*) noexcept {}
void nvtx_pop() noexcept {}

}  // namespace scaletrain
