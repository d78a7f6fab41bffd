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

namespace scaletrain {

enum class DType { f32, f16, bf16, i32, i64, u8 };  // f16/bf16 reserved for the GPU backend
enum class Device { cpu, cuda };                    // cuda reserved (SCALETRAIN_CUDA)

std::size_t dtype_size(DType dtype);
const char* dtype_name(DType dtype);
const char* device_name(Device device);

using Shape = std::vector<int64_t>;
int64_t shape_numel(const Shape& shape);
std::string shape_string(const Shape& shape);  // "[2, 3, 4]"

// The host element type of each dtype that has one: DTypeOf<float>::value == DType::f32.
// f16/bf16 have no host type (they are GPU-only), so data<T>() cannot name them; other types
// (char, uint16_t, ...) do not compile. Untyped access to the bytes goes through raw().
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

// Raw device memory; the allocator behind it depends on the device.
class Storage {
 public:
  Storage(std::size_t bytes, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  void* data() { return data_; }
  std::size_t bytes() const { return bytes_; }
  Device device() const { return device_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
  Device device_;
};

class Tensor {
 public:
  Tensor() = default;
  // Uninitialised storage.
  static Tensor empty(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu);
  static Tensor zeros(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu);
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

  // Same storage, new shape with the same element count.
  Tensor reshape(const Shape& shape) const;
  // A deep copy.
  Tensor clone() const;
  // Element-wise copy from a tensor of the same dtype and element count.
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
