// The CUDA BatchUpload: input batches copied host-to-device on the Context's copy stream, one
// numbered device buffer per batch in flight, ordered against the compute stream by events
// (include/scaletrain/backend/batch_upload.hpp has the scheme). The copy stream is the Context's
// own (device_state.cpp: "transfers that overlap compute"); the gradient staging has streams of
// its own, so a gradient copy waiting for backward never holds an input copy back.
// The host waits (wait_copied) on a blocking-sync event rather than spinning: it is the main
// thread, which also launches the step's kernels.
#include <cuda_runtime.h>

#include <vector>

#include "backend/cuda/batch_upload_cuda.hpp"
#include "backend/cuda/cuda_context.hpp"

namespace scaletrain::cuda {
namespace {

class CudaBatchUpload final : public BatchUpload {
 public:
  CudaBatchUpload(Context& ctx, int buffers)
      : BatchUpload(Device::cuda, buffers),
        gpu_(ctx.gpu_index()),
        compute_(compute_stream(ctx)),
        copy_(copy_stream(ctx)),
        buffer_(static_cast<std::size_t>(buffers)) {
    // A failure part-way leaves the events made so far to release(): the destructor does not run
    // for a constructor that throws.
    try {
      ST_CHECK_CUDA(cudaSetDevice(gpu_));
      ST_CHECK_CUDA(cudaEventCreateWithFlags(&queued_compute_, cudaEventDisableTiming));
      for (Buffer& b : buffer_) {
        ST_CHECK_CUDA(cudaEventCreateWithFlags(&b.copied, cudaEventDisableTiming | cudaEventBlockingSync));
        ST_CHECK_CUDA(cudaEventCreateWithFlags(&b.used, cudaEventDisableTiming));
      }
    } catch (...) {
      release();
      throw;
    }
  }

  ~CudaBatchUpload() override { release(); }

  void begin(int b, bool fresh_memory) override {
    check_buffer("begin", b);
    ST_CHECK_CUDA(cudaSetDevice(gpu_));
    Buffer& buf = buffer_[static_cast<std::size_t>(b)];
    if (fresh_memory) {
      ST_CHECK_CUDA(cudaEventRecord(queued_compute_, compute_));
      ST_CHECK_CUDA(cudaStreamWaitEvent(copy_, queued_compute_, 0));
      ++counts_.serialized;
    } else if (buf.used_recorded) {
      ST_CHECK_CUDA(cudaStreamWaitEvent(copy_, buf.used, 0));
    }
    ++counts_.batches;
  }

  void copy(const Tensor& src, Tensor& dst) override {
    ST_CHECK(src.device() == Device::cpu && dst.device() == Device::cuda && src.dtype() == dst.dtype() &&
                 src.bytes() == dst.bytes(),
             "BatchUpload::copy: " << dtype_name(src.dtype()) << shape_string(src.shape()) << " on "
                                   << device_name(src.device()) << " into " << dtype_name(dst.dtype())
                                   << shape_string(dst.shape()) << " on " << device_name(dst.device()));
    if (src.bytes() > 0)
      ST_CHECK_CUDA(cudaMemcpyAsync(dst.raw(), src.raw(), src.bytes(), cudaMemcpyHostToDevice, copy_));
    ++counts_.copies;
    counts_.bytes += static_cast<int64_t>(src.bytes());
  }

  void end(int b) override {
    check_buffer("end", b);
    ST_CHECK_CUDA(cudaSetDevice(gpu_));
    ST_CHECK_CUDA(cudaEventRecord(buffer_[static_cast<std::size_t>(b)].copied, copy_));
  }

  void wait_copied(int b) override {
    check_buffer("wait_copied", b);
    ST_CHECK_CUDA(cudaSetDevice(gpu_));
    ST_CHECK_CUDA(cudaEventSynchronize(buffer_[static_cast<std::size_t>(b)].copied));
  }

  void compute_after_copies(int b) override {
    check_buffer("compute_after_copies", b);
    ST_CHECK_CUDA(cudaSetDevice(gpu_));
    ST_CHECK_CUDA(cudaStreamWaitEvent(compute_, buffer_[static_cast<std::size_t>(b)].copied, 0));
  }

  void compute_done_with(int b) override {
    check_buffer("compute_done_with", b);
    ST_CHECK_CUDA(cudaSetDevice(gpu_));
    Buffer& buf = buffer_[static_cast<std::size_t>(b)];
    ST_CHECK_CUDA(cudaEventRecord(buf.used, compute_));
    buf.used_recorded = true;
  }

 private:
  struct Buffer {
    cudaEvent_t copied = nullptr;  // on the copy stream: the batch is in the buffer
    cudaEvent_t used = nullptr;    // on the compute stream: the step that read the buffer has run
    bool used_recorded = false;
  };

  // Waits for the copies in flight (they read the loader's pinned memory and write device memory
  // that goes back to the allocator), then frees the events. Destructors do not throw.
  void release() {
    cudaSetDevice(gpu_);
    if (copy_ != nullptr) cudaStreamSynchronize(copy_);
    for (Buffer& b : buffer_) {
      if (b.copied != nullptr) cudaEventDestroy(b.copied);
      if (b.used != nullptr) cudaEventDestroy(b.used);
      b = Buffer{};
    }
    if (queued_compute_ != nullptr) cudaEventDestroy(queued_compute_);
    queued_compute_ = nullptr;
  }

  int gpu_;
  cudaStream_t compute_;
  cudaStream_t copy_;
  std::vector<Buffer> buffer_;
  cudaEvent_t queued_compute_ = nullptr;  // fresh memory: every compute op queued before the copy
};

}  // namespace

std::unique_ptr<BatchUpload> create_batch_upload(Context& ctx, int buffers) {
  ST_CHECK(ctx.device() == Device::cuda, "BatchUpload: a cuda context is needed");
  return std::make_unique<CudaBatchUpload>(ctx, buffers);
}

}  // namespace scaletrain::cuda
