// DeviceStaging::create, which checks the buffer and picks the implementation by its device, and
// the CPU implementation: a separate host buffer, with memcpy for the copies. On the CPU the ops
// have run by the time they return, so "after compute" is now. It exists so that the reducers'
// staged path (host mirror, per-range copies, waits) runs and is tested with real MPI ranks on
// machines without a GPU; the CPU trainer itself does not stage.
#include "scaletrain/backend/device_staging.hpp"

#include <cstring>
#include <vector>

#include "backend/cuda/device_staging_cuda.hpp"

namespace scaletrain {
namespace {

class CpuStaging final : public DeviceStaging {
 public:
  explicit CpuStaging(Tensor& buffer)
      : DeviceStaging(Device::cpu, buffer.raw(), buffer.numel(), nullptr),
        buffer_(buffer),
        mirror_(static_cast<std::size_t>(buffer.numel())) {
    set_host(mirror_.data());
  }

  void copy_to_host_after_compute(int64_t offset, int64_t count) override {
    check_range("copy_to_host_after_compute", offset, count);
    std::memcpy(host() + offset, buffer_.data<float>() + offset, bytes(count));
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queued_[offset] = count;
    }
    count_to_host(offset);
  }

  void wait_host(int64_t offset, int64_t count) override {
    check_range("wait_host", offset, count);
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = queued_.find(offset);
    ST_CHECK(it != queued_.end() && it->second == count, "DeviceStaging::wait_host: elements ["
                                                             << offset << ", " << offset + count
                                                             << ") were never copied to the host with that range");
  }

  void copy_to_device(int64_t offset, int64_t count) override {
    check_range("copy_to_device", offset, count);
    std::memcpy(buffer_.data<float>() + offset, host() + offset, bytes(count));
    count_to_device(offset);
  }

  void device_ready_for_compute() override {}

 private:
  static std::size_t bytes(int64_t count) { return static_cast<std::size_t>(count) * sizeof(float); }

  Tensor buffer_;  // shares the mirrored storage, which thus outlives the staging
  std::vector<float> mirror_;
  std::mutex mutex_;
  std::map<int64_t, int64_t> queued_;  // offset -> count of the ranges copied out
};

}  // namespace

std::unique_ptr<DeviceStaging> DeviceStaging::create(Context& ctx, Tensor& device_buffer) {
  ST_CHECK(device_buffer.defined(), "DeviceStaging: the buffer to mirror is undefined");
  ST_CHECK(device_buffer.dtype() == DType::f32,
           "DeviceStaging mirrors f32 buffers, not " << dtype_name(device_buffer.dtype()));
  ST_CHECK(device_buffer.device() == ctx.device(), "DeviceStaging: a " << device_name(device_buffer.device())
                                                                       << " buffer with a " << device_name(ctx.device())
                                                                       << " context");
  if (device_buffer.device() == Device::cpu) return std::make_unique<CpuStaging>(device_buffer);
  return cuda::create_device_staging(ctx, device_buffer);
}

}  // namespace scaletrain
