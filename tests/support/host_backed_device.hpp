// Test support: a "device" whose memory is malloc'd host memory, set as the memory of
// Device::cuda, so that code which moves tensors across the device boundary (Tensor::to,
// ParameterSet::move_to, the communicator's staging, checkpoints written from device tensors) runs
// its device branch on a machine without a GPU. It counts the copies each way. Ops still dispatch
// on the Context's device, so no kernel runs on this "device".
#pragma once

#include <boost/test/unit_test.hpp>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>

#include "scaletrain/tensor/tensor.hpp"

namespace scaletrain::test {

struct HostBackedMemory : DeviceMemory {
  std::set<void*> live;
  int copies_to_host = 0, copies_to_device = 0, copies_on_device = 0;
  std::set<void*> pinned;
  void* allocate(std::size_t bytes) override {
    void* p = std::malloc(bytes == 0 ? 1 : bytes);
    live.insert(p);
    return p;
  }
  void release(void* p) override {
    BOOST_TEST(live.erase(p) == 1u);
    std::free(p);
  }
  void copy(void* dst, Device dst_device, const void* src, Device src_device, std::size_t bytes) override {
    if (dst_device == Device::cpu)
      ++copies_to_host;
    else if (src_device == Device::cpu)
      ++copies_to_device;
    else
      ++copies_on_device;
    std::memcpy(dst, src, bytes);
  }
  void fill_zero(void* p, std::size_t bytes) override { std::memset(p, 0, bytes); }
  void* allocate_pinned_host(std::size_t bytes) override {
    void* p = std::malloc(bytes == 0 ? 1 : bytes);
    pinned.insert(p);
    return p;
  }
  void release_pinned_host(void* p) override {
    BOOST_TEST(pinned.erase(p) == 1u);
    std::free(p);
  }
  void fill_f32(float* p, float value, int64_t n) override {
    for (int64_t i = 0; i < n; ++i) p[i] = value;
  }
};

// Sets a HostBackedMemory as Device::cuda's memory for its lifetime (restoring none after).
class HostBackedDevice {
 public:
  HostBackedDevice() : memory_(std::make_shared<HostBackedMemory>()) { set_device_memory(Device::cuda, memory_); }
  ~HostBackedDevice() { set_device_memory(Device::cuda, nullptr); }
  HostBackedDevice(const HostBackedDevice&) = delete;
  HostBackedDevice& operator=(const HostBackedDevice&) = delete;
  HostBackedMemory& memory() { return *memory_; }

 private:
  std::shared_ptr<HostBackedMemory> memory_;
};

}  // namespace scaletrain::test
