// DeviceStaging: a host mirror of a device f32 buffer (the flat gradients), for communication
// code that needs host memory (the MPI all-reduces) while the buffer lives on a GPU. Ranges are
// copied out as soon as the compute work queued so far has written them, without a device-wide
// synchronize, and copied back after the host has changed them; the compute stream then waits for
// those copies on the device, so the next op (the optimizer) reads them. No CUDA header here:
// communication code includes it in every build.
//
// Two implementations behind create():
//   cuda: pinned host memory (cudaHostAlloc), copies on the staging's own device-to-host and
//         host-to-device streams ordered by events, so that neither waits behind the other nor
//         behind the Context's copy stream (src/backend/cuda/device_staging.cpp);
//   cpu:  a separate host buffer and memcpy, so that the staged path of the reducers runs, and is
//         tested, on the CPU with real MPI ranks (src/backend/device_staging.cpp).
// Both count the copies per range, for tests and the report.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "scaletrain/backend/context.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/tensor/tensor.hpp"

namespace scaletrain {

class DeviceStaging {
 public:
  // A mirror of `device_buffer` (f32, on ctx's device; it and ctx must outlive the staging). The
  // CUDA one needs the CUDA backend ("not built" otherwise).
  static std::unique_ptr<DeviceStaging> create(Context& ctx, Tensor& device_buffer);

  virtual ~DeviceStaging() = default;
  DeviceStaging(const DeviceStaging&) = delete;
  DeviceStaging& operator=(const DeviceStaging&) = delete;

  Device device() const { return device_; }
  // Elements of the buffer and of its mirror.
  int64_t size() const { return size_; }
  // The mirrored buffer's first element (to check which buffer a staging mirrors).
  const void* device_data() const { return device_data_; }
  // The host mirror, size() floats. A range holds the device's values after wait_host() for it.
  float* host() { return host_; }

  // Main thread, in the order of the compute work: the range [offset, offset + count) is copied
  // to host() once the compute work queued so far (which writes it) has run. Returns at once.
  virtual void copy_to_host_after_compute(int64_t offset, int64_t count) = 0;
  // Any thread: returns when the copy queued for exactly this range is in host(). A range never
  // queued is an error.
  virtual void wait_host(int64_t offset, int64_t count) = 0;
  // Any thread, after host()[range] is final: queues the copy of the range back to the device.
  // The host range must stay unchanged until device_ready_for_compute()'s wait has passed.
  virtual void copy_to_device(int64_t offset, int64_t count) = 0;
  // Main thread, once every copy_to_device() of the step has returned: work queued on the compute
  // stream from now on runs after those copies (a device-side wait; the host does not block).
  virtual void device_ready_for_compute() = 0;

  // Copies so far of the range starting at `offset`, each direction (tests, reports).
  struct Copies {
    int64_t to_host = 0;
    int64_t to_device = 0;
  };
  Copies copies(int64_t offset) const {
    std::lock_guard<std::mutex> lock(count_mutex_);
    const auto it = copies_.find(offset);
    return it == copies_.end() ? Copies{} : it->second;
  }

 protected:
  DeviceStaging(Device device, const void* device_data, int64_t size, float* host)
      : device_(device), device_data_(device_data), size_(size), host_(host) {}

  void check_range(const char* what, int64_t offset, int64_t count) const {
    ST_CHECK(offset >= 0 && count >= 0 && offset <= size_ && count <= size_ - offset,
             "DeviceStaging::" << what << ": elements [" << offset << ", " << offset + count
                               << ") are outside the staged buffer of " << size_ << " elements");
  }
  void count_to_host(int64_t offset) {
    std::lock_guard<std::mutex> lock(count_mutex_);
    ++copies_[offset].to_host;
  }
  void count_to_device(int64_t offset) {
    std::lock_guard<std::mutex> lock(count_mutex_);
    ++copies_[offset].to_device;
  }
  void set_host(float* host) { host_ = host; }

 private:
  Device device_;
  const void* device_data_;
  int64_t size_;
  float* host_;
  mutable std::mutex count_mutex_;
  std::map<int64_t, Copies> copies_;
};

}  // namespace scaletrain
