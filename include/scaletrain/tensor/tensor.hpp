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

  void* raw() const;
  template <typename T>
  T* data() const {
    check_type(sizeof(T));
    return static_cast<T*>(raw());
  }

 private:
  void check_type(std::size_t elem) const;
  std::shared_ptr<Storage> storage_;
  int64_t offset_bytes_ = 0;
  Shape shape_;
  DType dtype_ = DType::f32;
  Device device_ = Device::cpu;
};

}  // namespace scaletrain
