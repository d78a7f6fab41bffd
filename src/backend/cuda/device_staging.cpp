// The CUDA DeviceStaging: a pinned host mirror of a device f32 buffer (the flat gradients), so
// that the MPI all-reduces can run on gradient buckets while backward goes on: the --intra mpi
// path (ranks that share a GPU, or asked for), beside the NCCL reducer on GPU memory.
//
// Ordering, per range (a bucket: one fixed range per step):
//   main thread   copy_to_host_after_compute: event `computed` on the compute stream (the backward
//                 work queued so far writes the range); the D2H stream waits for it on the device
//                 and copies; event `host_ready` after the copy.
//   comm thread   wait_host: blocks on `host_ready` only, never on the whole device.
//   any thread    copy_to_device: the H2D copy on the H2D stream.
//   main thread   device_ready_for_compute: event after every H2D copy queued so far; the compute
//                 stream waits for it, so the optimizer reads the averaged gradients.
// The staging has its own D2H and H2D streams rather than the Context's copy stream: a D2H copy
// waits on the device for backward to reach its bucket, and in one shared stream it would hold
// back every copy queued behind it (a finished bucket's way back, the next batch's input).
// Events block the waiting thread (cudaEventBlockingSync) instead of spinning: the waiter is the
// communication thread, and a spinning one takes a core from the main thread launching backward.
// The current device is per thread, so every method sets it first: the communication and
// completion threads never opened the Context.
#include <cuda_runtime.h>

#include <mutex>

#include "backend/cuda/cuda_context.hpp"
#include "backend/cuda/device_staging_cuda.hpp"

namespace scaletrain::cuda {
namespace {

class CudaStaging final : public DeviceStaging {
 public:
  CudaStaging(Context& ctx, Tensor& buffer)
      : DeviceStaging(Device::cuda, buffer.raw(), buffer.numel(), nullptr),
        buffer_(buffer),
        gpu_(ctx.gpu_index()),
        compute_(compute_stream(ctx)),
        device_(static_cast<float*>(buffer.raw())) {
    // A failure part-way leaves the members made so far to release(): the destructor does not
    // run for a constructor that throws.
    try {
      ST_CHECK_CUDA(cudaSetDevice(gpu_));
      void* host = nullptr;
      if (size() > 0) ST_CHECK_CUDA(cudaHostAlloc(&host, bytes(size()), cudaHostAllocDefault));
      pinned_ = static_cast<float*>(host);
      set_host(pinned_);
      ST_CHECK_CUDA(cudaStreamCreateWithFlags(&d2h_, cudaStreamNonBlocking));
      ST_CHECK_CUDA(cudaStreamCreateWithFlags(&h2d_, cudaStreamNonBlocking));
      ST_CHECK_CUDA(cudaEventCreateWithFlags(&h2d_done_, cudaEventDisableTiming));
    } catch (...) {
      release();
      throw;
    }
  }

  ~CudaStaging() override { release(); }

  void copy_to_host_after_compute(int64_t offset, int64_t count) override {
    check_range("copy_to_host_after_compute", offset, count);
    ST_CHECK_CUDA(cudaSetDevice(gpu_));
    Range& r = range(offset, count);
    ST_CHECK_CUDA(cudaEventRecord(r.computed, compute_));
    ST_CHECK_CUDA(cudaStreamWaitEvent(d2h_, r.computed, 0));
    if (count > 0)
      ST_CHECK_CUDA(cudaMemcpyAsync(pinned_ + offset, device_ + offset, bytes(count), cudaMemcpyDeviceToHost, d2h_));
    ST_CHECK_CUDA(cudaEventRecord(r.host_ready, d2h_));
    {
      std::lock_guard<std::mutex> lock(mutex_);
      r.queued = true;
    }
    count_to_host(offset);
  }

  void wait_host(int64_t offset, int64_t count) override {
    check_range("wait_host", offset, count);
    cudaEvent_t ready = nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const auto it = ranges_.find(offset);
      ST_CHECK(it != ranges_.end() && it->second.queued && it->second.count == count,
               "DeviceStaging::wait_host: elements [" << offset << ", " << offset + count
                                                      << ") were never copied to the host with that range");
      ready = it->second.host_ready;
    }
    ST_CHECK_CUDA(cudaSetDevice(gpu_));
    ST_CHECK_CUDA(cudaEventSynchronize(ready));
  }

  void copy_to_device(int64_t offset, int64_t count) override {
    check_range("copy_to_device", offset, count);
    ST_CHECK_CUDA(cudaSetDevice(gpu_));
    if (count > 0)
      ST_CHECK_CUDA(cudaMemcpyAsync(device_ + offset, pinned_ + offset, bytes(count), cudaMemcpyHostToDevice, h2d_));
    count_to_device(offset);
  }

  void device_ready_for_compute() override {
    ST_CHECK_CUDA(cudaSetDevice(gpu_));
    ST_CHECK_CUDA(cudaEventRecord(h2d_done_, h2d_));
    ST_CHECK_CUDA(cudaStreamWaitEvent(compute_, h2d_done_, 0));
  }

 private:
  // The events of one range; made on its first copy and reused every step after.
  struct Range {
    int64_t count = 0;
    cudaEvent_t computed = nullptr;    // on the compute stream: backward has written the range
    cudaEvent_t host_ready = nullptr;  // on the D2H stream: the range is in the pinned mirror
    bool queued = false;               // a copy to the host was queued (wait_host may wait)
  };

  static std::size_t bytes(int64_t count) { return static_cast<std::size_t>(count) * sizeof(float); }

  // The range's events (the map's nodes do not move, so the reference stays valid). A range
  // starting at a known offset must keep its count: buckets are fixed.
  Range& range(int64_t offset, int64_t count) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = ranges_.find(offset);
    if (it != ranges_.end()) {
      ST_CHECK(it->second.count == count, "DeviceStaging: the range at element "
                                              << offset << " was " << it->second.count << " elements, now " << count
                                              << " (ranges are fixed, one per bucket)");
      return it->second;
    }
    Range r;
    r.count = count;
    ST_CHECK_CUDA(cudaEventCreateWithFlags(&r.computed, cudaEventDisableTiming));
    const cudaError_t status = cudaEventCreateWithFlags(&r.host_ready, cudaEventDisableTiming | cudaEventBlockingSync);
    if (status != cudaSuccess) {
      cudaEventDestroy(r.computed);
      ST_CHECK_CUDA(status);
    }
    return ranges_.emplace(offset, r).first->second;
  }

  // Waits for the copies in flight (the pinned memory may not go while one reads or writes it),
  // then frees everything. Destructors do not throw: a failure here has nobody to report to.
  void release() {
    cudaSetDevice(gpu_);
    if (d2h_ != nullptr) cudaStreamSynchronize(d2h_);
    if (h2d_ != nullptr) cudaStreamSynchronize(h2d_);
    for (auto& [offset, r] : ranges_) {
      if (r.computed != nullptr) cudaEventDestroy(r.computed);
      if (r.host_ready != nullptr) cudaEventDestroy(r.host_ready);
    }
    ranges_.clear();
    if (h2d_done_ != nullptr) cudaEventDestroy(h2d_done_);
    if (h2d_ != nullptr) cudaStreamDestroy(h2d_);
    if (d2h_ != nullptr) cudaStreamDestroy(d2h_);
    if (pinned_ != nullptr) cudaFreeHost(pinned_);
    h2d_done_ = nullptr;
    h2d_ = d2h_ = nullptr;
    pinned_ = nullptr;
  }

  Tensor buffer_;  // shares the mirrored storage, which thus outlives the staging
  int gpu_;
  cudaStream_t compute_;
  float* device_;
  float* pinned_ = nullptr;
  cudaStream_t d2h_ = nullptr, h2d_ = nullptr;
  cudaEvent_t h2d_done_ = nullptr;
  std::mutex mutex_;
  std::map<int64_t, Range> ranges_;  // by offset
};

}  // namespace

std::unique_ptr<DeviceStaging> create_device_staging(Context& ctx, Tensor& device_buffer) {
  ST_CHECK(ctx.device() == Device::cuda, "DeviceStaging: a cuda buffer needs a cuda context");
  return std::make_unique<CudaStaging>(ctx, device_buffer);
}

}  // namespace scaletrain::cuda
