// The CUDA state of a Context: the GPU, a compute stream (every op, in order), a copy stream (for
// transfers that overlap compute, ordered by events), cuDNN and cuBLAS handles bound to the
// compute stream, and the caching allocator behind every Device::cuda tensor.
// Copies and fills go on the compute stream, so a tensor is never read before the op that writes
// it has run; a copy to the host waits for the stream, since the caller reads the bytes next.
#include "backend/cuda/device_state.hpp"

#include <cuda_runtime.h>

#include "backend/cpu/dnnl_context.hpp"
#include "backend/cuda/cuda_context.hpp"
#include "backend/cuda/memory_kernels.hpp"
#include "scaletrain/core/out_of_memory.hpp"

namespace scaletrain::cuda {
namespace {

// Device memory through the caching allocator; one per open CUDA Context.
class CudaMemory : public DeviceMemory {
 public:
  CudaMemory(int gpu_index, cudaStream_t stream)
      : gpu_index_(gpu_index),
        stream_(stream),
        allocator_({[](std::size_t bytes) -> void* {
                      void* ptr = nullptr;
                      if (cudaMalloc(&ptr, bytes) != cudaSuccess) {
                        cudaGetLastError();  // out of memory is answered with nullptr, not left pending
                        return nullptr;
                      }
                      return ptr;
                    },
                    [](void* ptr) { cudaFree(ptr); }}) {}

  void* allocate(std::size_t bytes) override {
    void* ptr = allocator_.allocate(bytes);
    if (ptr == nullptr) throw_out_of_memory(bytes);
    return ptr;
  }
  void release(void* ptr) override { allocator_.release(ptr); }

  void copy(void* dst, Device dst_device, const void* src, Device src_device, std::size_t bytes) override {
    const cudaMemcpyKind kind = dst_device == Device::cpu   ? cudaMemcpyDeviceToHost
                                : src_device == Device::cpu ? cudaMemcpyHostToDevice
                                                            : cudaMemcpyDeviceToDevice;
    ST_CHECK_CUDA(cudaMemcpyAsync(dst, src, bytes, kind, stream_));
    if (dst_device == Device::cpu) ST_CHECK_CUDA(cudaStreamSynchronize(stream_));
  }
  void fill_zero(void* ptr, std::size_t bytes) override { ST_CHECK_CUDA(cudaMemsetAsync(ptr, 0, bytes, stream_)); }
  void fill_f32(float* ptr, float value, int64_t count) override { launch_fill_f32(ptr, value, count, stream_); }
  void* allocate_pinned_host(std::size_t bytes) override {
    void* ptr = nullptr;
    const cudaError_t status = cudaHostAlloc(&ptr, bytes == 0 ? 1 : bytes, cudaHostAllocDefault);
    if (status != cudaSuccess) {
      cudaGetLastError();
      ST_THROW("cannot pin " << bytes << " bytes of host memory for GPU " << gpu_index_ << ": "
                             << detail::cuda_message(status) << " (the node's locked-memory limit, ulimit -l?)");
    }
    return ptr;
  }
  void release_pinned_host(void* ptr) override { cudaFreeHost(ptr); }

  AllocatorStats stats() const { return allocator_.stats(); }

 private:
  // An error of its own type (core/out_of_memory.hpp): training adds the batch size to it.
  [[noreturn]] void throw_out_of_memory(std::size_t bytes) {
    std::size_t free_bytes = 0, total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    cudaGetLastError();
    ::scaletrain::detail::throw_out_of_device_memory(
        __FILE__, __LINE__,
        out_of_device_memory_message(gpu_index_, bytes, free_bytes, total_bytes, allocator_.stats().in_use_bytes));
  }

  int gpu_index_;
  cudaStream_t stream_;
  CachingAllocator allocator_;
};

}  // namespace

struct DeviceState {
  int gpu_index = 0;
  cudaStream_t compute = nullptr;
  cudaStream_t copy = nullptr;
  cudnnHandle_t cudnn = nullptr;
  cublasHandle_t cublas = nullptr;
  std::shared_ptr<CudaMemory> memory;
  void* workspace = nullptr;  // from memory: the largest workspace asked for so far
  std::size_t workspace_bytes = 0;

  ~DeviceState() {
    // Destructors do not throw: a failure here has nobody left to report to.
    if (compute != nullptr) cudaStreamSynchronize(compute);
    if (workspace != nullptr) memory->release(workspace);
    if (memory) set_device_memory(Device::cuda, nullptr);
    if (cublas != nullptr) cublasDestroy(cublas);
    if (cudnn != nullptr) cudnnDestroy(cudnn);
    if (copy != nullptr) cudaStreamDestroy(copy);
    if (compute != nullptr) cudaStreamDestroy(compute);
  }
};

void DeviceStateDeleter::operator()(DeviceState* state) const { delete state; }

DeviceStatePtr open_device_state(int gpu_index) {
  int count = 0;
  ST_CHECK_CUDA(cudaGetDeviceCount(&count));
  ST_CHECK(gpu_index >= 0 && gpu_index < count,
           "GPU " << gpu_index << " asked for, but " << count << " visible (CUDA_VISIBLE_DEVICES)");
  ST_CHECK(!device_memory_is_set(Device::cuda), "a CUDA Context is already open in this process: one at a time");
  DeviceStatePtr state(new DeviceState);
  state->gpu_index = gpu_index;
  ST_CHECK_CUDA(cudaSetDevice(gpu_index));
  ST_CHECK_CUDA(cudaStreamCreateWithFlags(&state->compute, cudaStreamNonBlocking));
  ST_CHECK_CUDA(cudaStreamCreateWithFlags(&state->copy, cudaStreamNonBlocking));
  ST_CHECK_CUDNN(cudnnCreate(&state->cudnn));
  ST_CHECK_CUDNN(cudnnSetStream(state->cudnn, state->compute));
  ST_CHECK_CUBLAS(cublasCreate(&state->cublas));
  ST_CHECK_CUBLAS(cublasSetStream(state->cublas, state->compute));
  // fp32 means fp32: no TF32 unless asked for (--tf32, Context::set_allow_tf32).
  ST_CHECK_CUBLAS(cublasSetMathMode(state->cublas, CUBLAS_DEFAULT_MATH));
  state->memory = std::make_shared<CudaMemory>(gpu_index, state->compute);
  set_device_memory(Device::cuda, state->memory);
  return state;
}

void synchronize(DeviceState& state) {
  ST_CHECK_CUDA(cudaStreamSynchronize(state.copy));
  ST_CHECK_CUDA(cudaStreamSynchronize(state.compute));
}

AllocatorStats memory_stats(const DeviceState& state) { return state.memory->stats(); }

void set_allow_tf32(DeviceState& state, bool allow) {
  ST_CHECK_CUBLAS(cublasSetMathMode(state.cublas, allow ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
}

namespace {
DeviceState& state_of(Context& ctx) {
  ST_CHECK(ctx.device() == Device::cuda && ctx.impl().cuda != nullptr,
           "a CUDA kernel was given a " << device_name(ctx.device()) << " context");
  return *ctx.impl().cuda;
}
}  // namespace

cudaStream_t compute_stream(Context& ctx) { return state_of(ctx).compute; }
cudaStream_t copy_stream(Context& ctx) { return state_of(ctx).copy; }
cudnnHandle_t cudnn_handle(Context& ctx) { return state_of(ctx).cudnn; }
cublasHandle_t cublas_handle(Context& ctx) { return state_of(ctx).cublas; }

void* workspace(Context& ctx, std::size_t bytes) {
  DeviceState& s = state_of(ctx);
  if (bytes == 0) return nullptr;
  if (bytes > s.workspace_bytes) {
    // The old block may still be in use by queued work; released to the cache, it is handed out
    // again only to later work on the same stream, which runs after that work.
    if (s.workspace != nullptr) s.memory->release(s.workspace);
    s.workspace = nullptr;
    s.workspace_bytes = 0;
    s.workspace = s.memory->allocate(bytes);
    s.workspace_bytes = bytes;
  }
  return s.workspace;
}

}  // namespace scaletrain::cuda
