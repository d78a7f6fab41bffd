// Private: what CUDA kernels (src/ops/cuda/, src/optim/cuda/, ...) take from a Context on a GPU:
// the compute stream every op runs on in order, the copy stream, the cuDNN and cuBLAS handles
// (bound to the compute stream), per-op scratch memory, and launch geometry. Includes the CUDA
// headers, so only .cu files and the CUDA backend include it.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstddef>
#include <cstdint>

#include "backend/cuda/cuda_check.hpp"
#include "scaletrain/backend/context.hpp"

namespace scaletrain::cuda {

// Each throws when ctx is not a CUDA context.
cudaStream_t compute_stream(Context& ctx);
cudaStream_t copy_stream(Context& ctx);
cudnnHandle_t cudnn_handle(Context& ctx);
cublasHandle_t cublas_handle(Context& ctx);

// Device scratch of at least `bytes` (a cuDNN workspace), from the caching allocator; valid until
// the next workspace() call on this context. Ops run in order on the compute stream, so an op may
// use it freely and the next op's call may hand the same memory out again. nullptr for 0 bytes.
void* workspace(Context& ctx, std::size_t bytes);

constexpr int kThreadsPerBlock = 256;
constexpr int64_t kMaxBlocks = 65535;  // blocks_for's cap
// Blocks for one thread per element, capped: kernels loop with a grid stride beyond the cap.
inline unsigned blocks_for(int64_t n) {
  const int64_t blocks = (n + kThreadsPerBlock - 1) / kThreadsPerBlock;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > kMaxBlocks ? kMaxBlocks : blocks));
}

}  // namespace scaletrain::cuda
