// Tensor: shape, dtype, device tag and reference-counted storage.
// Storage is owned through shared_ptr so that views (a parameter's slice of the flat
// gradient buffer, a reshape) share it without copies. Storage is 64-byte aligned on the CPU.
// Layout conventions (see docs/architecture.md): activations are channels-last (N, H, W, C);
// conv weights are PyTorch's (O, C, KH, KW); linear weights (out, in).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "scaletrain/core/caching_allocator.hpp"  // AllocatorStats

namespace scaletrain {

enum class DType { f32, f16, bf16, i32, i64, u8 };  // f16/bf16: 16-bit storage (ops/cast.hpp)
enum class Device { cpu, cuda };                    // cuda: where the CUDA backend is built (SCALETRAIN_CUDA)

std::size_t dtype_size(DType dtype);
const char* dtype_name(DType dtype);
const char* device_name(Device device);

using Shape = std::vector<int64_t>;
int64_t shape_numel(const Shape& shape);
std::string shape_string(const Shape& shape);  // "[2, 3, 4]"

// The host element type of each dtype that has one: DTypeOf<float>::value == DType::f32.
// f16/bf16 have no host type in C++17, so data<T>() cannot name them; other types (char,
// uint16_t, ...) do not compile. Untyped access to the bytes goes through raw() (16-bit patterns
// as uint16_t).
template <typename T>
struct DTypeOf;
template <>
struct DTypeOf<float> {
  static constexpr DType value = DType::f32;
  static constexpr const char* name = "float";
};
template <>
struct DTypeOf<int32_t> {
  static constexpr DType value = DType::i32;
  static constexpr const char* name = "int32_t";
};
template <>
struct DTypeOf<int64_t> {
  static constexpr DType value = DType::i64;
  static constexpr const char* name = "int64_t";
};
template <>
struct DTypeOf<uint8_t> {
  static constexpr DType value = DType::u8;
  static constexpr const char* name = "uint8_t";
};

namespace detail {
// The message of a refused data<T>() call; separate so that a test can check the cuda case,
// which this build cannot allocate.
std::string host_access_message(const char* type, DType dtype, Device device, const Shape& shape);
}  // namespace detail

// The memory of a device other than the CPU, provided by its backend: the CUDA backend sets one
// when its Context opens (src/backend/cuda/), so this layer links no device library. Copies and
// fills run in the order of the device's work (its compute stream); a copy to the host returns
// when the bytes are there.
class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  // Throws scaletrain::Error naming the bytes asked for and available when the device has none.
  virtual void* allocate(std::size_t bytes) = 0;
  virtual void release(void* ptr) = 0;
  virtual void copy(void* dst, Device dst_device, const void* src, Device src_device, std::size_t bytes) = 0;
  virtual void fill_zero(void* ptr, std::size_t bytes) = 0;
  virtual void fill_f32(float* ptr, float value, int64_t count) = 0;
  // Page-locked host memory, which the device copies from and to asynchronously and at full
  // speed (cudaHostAlloc): for batches and staging buffers.
  virtual void* allocate_pinned_host(std::size_t bytes) = 0;
  virtual void release_pinned_host(void* ptr) = 0;
};

// Sets (or with nullptr clears) the memory behind tensors of `device`; Device::cpu is built in.
void set_device_memory(Device device, std::shared_ptr<DeviceMemory> memory);
// The memory of `device`; throws naming the device when no backend has set one (no CUDA Context
// is open, or the backend is not built).
std::shared_ptr<DeviceMemory> device_memory(Device device);
bool device_memory_is_set(Device device);

// The host memory that CPU tensors hold now and at most since the process began (pinned batches
// aside, which their device's allocator counts); reserved equals in use, as nothing is cached, and
// the allocation counts are -1 (not counted). With SCALETRAIN_HOST_CACHE=1 (a measurement hook)
// host tensors come from a CachingAllocator, the GPU's, and these are its figures: what a GPU run
// of the same model would hold beside what it uses.
AllocatorStats host_tensor_memory_stats();
// Starts the peak again from what is in use now (PyTorch's reset_peak_memory_stats), so that a
// test or a benchmark reads the peak of one stretch of work. Not under SCALETRAIN_HOST_CACHE.
void reset_host_tensor_memory_peak();

// Raw memory of one device: 64-byte aligned host memory, or the device's memory, which the
// storage keeps alive (a tensor may outlive the Context that made it). Host memory is pinned
// (page-locked) when `pinned_by` is the memory of a device that provides it.
class Storage {
 public:
  Storage(std::size_t bytes, Device device, std::shared_ptr<DeviceMemory> pinned_by = nullptr);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  void* data() { return data_; }
  std::size_t bytes() const { return bytes_; }
  Device device() const { return device_; }
  // The device's memory; nullptr on the CPU.
  DeviceMemory* device_memory() const { return device_ == Device::cpu ? nullptr : memory_.get(); }
  bool pinned() const { return device_ == Device::cpu && memory_ != nullptr; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
  Device device_;
  std::shared_ptr<DeviceMemory> memory_;  // the device's, or the pinning device's for host memory
};

class Tensor {
 public:
  Tensor() = default;
  // Uninitialised storage.
  static Tensor empty(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu);
  static Tensor zeros(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu);
  // Uninitialised host memory, pinned (page-locked) while a GPU Context is open in the process,
  // so that its copies to the GPU run asynchronously at full speed; ordinary host memory otherwise.
  static Tensor empty_pinned(const Shape& shape, DType dtype = DType::f32);
  // A view of `numel(shape)` elements of `base`'s storage starting at element `offset` of base.
  static Tensor view_of(const Tensor& base, int64_t offset, const Shape& shape);

  const Shape& shape() const { return shape_; }
  int64_t dim(int i) const { return shape_.at(i < 0 ? shape_.size() + i : i); }
  int ndim() const { return static_cast<int>(shape_.size()); }
  int64_t numel() const { return shape_numel(shape_); }
  std::size_t bytes() const { return numel() * dtype_size(dtype_); }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  bool defined() const { return storage_ != nullptr; }
  bool pinned() const { return storage_ != nullptr && storage_->pinned(); }

  // Same storage, new shape with the same element count.
  Tensor reshape(const Shape& shape) const;
  // A deep copy, on the same device.
  Tensor clone() const;
  // A copy on `device` (this tensor itself, shared, when it is there already).
  Tensor to(Device device) const;
  // Element-wise copy from a tensor of the same dtype and element count, on either device: the
  // device boundary is crossed here and in to(), nowhere else.
  void copy_from(const Tensor& src);
  void fill(float value);  // f32 only
  void zero();

  // Address of the first element on the tensor's device, unchecked and untyped: for byte
  // copies and for handing to a device API. Host code reads elements through data<T>().
  void* raw() const;
  // Host access to the elements: T must be the dtype's host type exactly (DTypeOf) and the
  // tensor must live on the CPU; otherwise throws scaletrain::Error naming T, dtype, shape and
  // device. Two enum compares, cheap enough for hot loops.
  template <typename T>
  T* data() const {
    using Element = std::remove_const_t<T>;
    if (dtype_ != DTypeOf<Element>::value || device_ != Device::cpu) refuse_host_access(DTypeOf<Element>::name);
    return static_cast<T*>(raw());
  }

 private:
  [[noreturn]] void refuse_host_access(const char* type) const;
  std::shared_ptr<Storage> storage_;
  int64_t offset_bytes_ = 0;
  Shape shape_;
  DType dtype_ = DType::f32;
  Device device_ = Device::cpu;
};

}  // namespace scaletrain
