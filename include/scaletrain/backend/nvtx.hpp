// NVTX ranges: named stretches of the host timeline that Nsight Systems shows above the GPU's
// kernels (nsys profile --trace=cuda,nvtx), so a profile of a run on the cluster reads as
// forward, backward, allreduce, ... without symbols. NVTX v3 is header-only and costs a branch
// when no profiler is attached. Without the CUDA backend the calls do nothing.
#pragma once

namespace scaletrain {

// Push and pop one range on this thread's stack; `name` must outlive the call only.
void nvtx_push(const char* name) noexcept;
void nvtx_pop() noexcept;

// A range from construction to destruction.
class NvtxRange {
 public:
  explicit NvtxRange(const char* name) noexcept { nvtx_push(name); }
  ~NvtxRange() { nvtx_pop(); }
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

}  // namespace scaletrain
