// NVTX ranges (nvtx.hpp) through the NVTX v3 header the CUDA toolkit ships (12.0 and newer): no
// library to link; the first push looks for a profiler's injection library and is a no-op if
// none is attached.
#include "scaletrain/backend/nvtx.hpp"

#include <nvtx3/nvToolsExt.h>

namespace scaletrain {

void nvtx_push(const char* name) noexcept { nvtxRangePushA(name); }
void nvtx_pop() noexcept { nvtxRangePop(); }

}  // namespace scaletrain
