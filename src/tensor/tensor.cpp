// Tensor storage and views. CPU storage is 64-byte aligned for AVX-512 kernels; other devices'
// storage comes from the DeviceMemory their backend set.
#include "scaletrain/tensor/tensor.hpp"

#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>

#include "scaletrain/core/error.hpp"

namespace scaletrain {

std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return 4;
    case DType::f16:
      return 2;
    case DType::bf16:
      return 2;
    case DType::i32:
      return 4;
    case DType::i64:
      return 8;
    case DType::u8:
      return 1;
  }
  return 0;
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return "float32";
    case DType::f16:
      return "float16";
    case DType::bf16:
      return "bfloat16";
    case DType::i32:
      return "int32";
    case DType::i64:
      return "int64";
    case DType::u8:
      return "uint8";
  }
  return "?";
}

const char* device_name(Device device) {
  switch (device) {
    case Device::cpu:
      return "cpu";
    case Device::cuda:
      return "cuda";
  }
  return "?";
}

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

std::string shape_string(const Shape& shape) {
  std::ostringstream os;
  os << "[";
  for (std::size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << "]";
  return os.str();
}

namespace {
std::mutex g_device_memory_mutex;

// Host tensor memory in use (64-byte rounded) and its peak, for report.json's device memory on a
// CPU run: the figure a GPU run's caching allocator gives as peak_in_use_bytes. Counted, not
// cached: malloc already reuses freed host memory.
std::atomic<std::size_t> g_host_in_use{0};
std::atomic<std::size_t> g_host_peak{0};

// A multiple of the alignment; an empty tensor still gets a block.
std::size_t host_rounded_bytes(std::size_t bytes) { return bytes == 0 ? 64 : (bytes + 63) / 64 * 64; }

// 64-byte aligned host memory from malloc, the alignment taken from an over-allocation here, the
// block's own address kept just before the aligned one. Not aligned_alloc: glibc's asks malloc
// for the size plus the alignment and gives the excess back, so a freed block is smaller than
// the next request of the same size and cannot serve it (keep_freed_host_memory then keeps
// memory nobody reuses, and a model's large buffers fault in afresh every step). Equal requests
// here are equal malloc requests, and a freed block serves the next one.
constexpr std::size_t kHostAlignment = 64;
void* host_allocate(std::size_t rounded) {
  void* block = std::malloc(rounded + kHostAlignment);
  if (block == nullptr) return nullptr;
  // malloc's 16-byte alignment leaves at least 16 bytes before the aligned address.
  const std::uintptr_t aligned = (reinterpret_cast<std::uintptr_t>(block) + kHostAlignment) & ~(kHostAlignment - 1);
  reinterpret_cast<void**>(aligned)[-1] = block;
  return reinterpret_cast<void*>(aligned);
}
void host_release(void* aligned) {
  if (aligned != nullptr) std::free(static_cast<void**>(aligned)[-1]);
}

// SCALETRAIN_HOST_CACHE=1 (a measurement hook): host tensors come from a CachingAllocator over
// aligned_alloc, the GPU's allocator, so that a CPU run shows what a GPU run of the same model
// reserves beside what it uses (host_tensor_memory_stats then gives the allocator's figures).
// Never destroyed: tensors may outlive static destruction.
CachingAllocator* host_cache() {
  static CachingAllocator* cache = [] {
    const char* hook = std::getenv("SCALETRAIN_HOST_CACHE");
    if (hook == nullptr || std::string(hook) != "1") return static_cast<CachingAllocator*>(nullptr);
    return new CachingAllocator(
        {[](std::size_t bytes) { return std::aligned_alloc(64, bytes); }, [](void* ptr) { std::free(ptr); }});
  }();
  return cache;
}

void count_host_allocation(std::size_t bytes) {
  const std::size_t now = g_host_in_use.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  std::size_t peak = g_host_peak.load(std::memory_order_relaxed);
  while (now > peak && !g_host_peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}
std::array<std::shared_ptr<DeviceMemory>, 2> g_device_memory;  // by Device; cpu stays empty

std::size_t device_slot(Device device) { return static_cast<std::size_t>(device); }
}  // namespace

void set_device_memory(Device device, std::shared_ptr<DeviceMemory> memory) {
  ST_CHECK(device != Device::cpu, "the cpu's memory is built in");
  std::lock_guard<std::mutex> lock(g_device_memory_mutex);
  g_device_memory.at(device_slot(device)) = std::move(memory);
}

std::shared_ptr<DeviceMemory> device_memory(Device device) {
  std::shared_ptr<DeviceMemory> memory;
  {
    std::lock_guard<std::mutex> lock(g_device_memory_mutex);
    if (device != Device::cpu) memory = g_device_memory.at(device_slot(device));
  }
  ST_CHECK(memory != nullptr,
           "no " << device_name(device) << " memory: open a Context on that device first (or build the backend)");
  return memory;
}

bool device_memory_is_set(Device device) {
  std::lock_guard<std::mutex> lock(g_device_memory_mutex);
  return device != Device::cpu && g_device_memory.at(device_slot(device)) != nullptr;
}

Storage::Storage(std::size_t bytes, Device device, std::shared_ptr<DeviceMemory> pinned_by)
    : bytes_(bytes), device_(device) {
  if (device != Device::cpu) {
    memory_ = scaletrain::device_memory(device);
    data_ = memory_->allocate(bytes);
    return;
  }
  if (pinned_by != nullptr) {
    memory_ = std::move(pinned_by);
    data_ = memory_->allocate_pinned_host(bytes);
    return;
  }
  if (CachingAllocator* cache = host_cache()) {
    data_ = cache->allocate(bytes);
    ST_CHECK(data_ != nullptr, "out of host memory allocating " << bytes << " bytes");
    return;
  }
  const std::size_t rounded = host_rounded_bytes(bytes);
  data_ = host_allocate(rounded);
  ST_CHECK(data_ != nullptr, "out of host memory allocating " << bytes << " bytes");
  count_host_allocation(rounded);
}

Storage::~Storage() {
  if (pinned())
    memory_->release_pinned_host(data_);
  else if (memory_)
    memory_->release(data_);
  else if (CachingAllocator* cache = host_cache())
    cache->release(data_);
  else {
    host_release(data_);
    g_host_in_use.fetch_sub(host_rounded_bytes(bytes_), std::memory_order_relaxed);
  }
}

void reset_host_tensor_memory_peak() { g_host_peak.store(g_host_in_use.load(std::memory_order_relaxed)); }

AllocatorStats host_tensor_memory_stats() {
  if (CachingAllocator* cache = host_cache()) return cache->stats();
  AllocatorStats s;
  s.in_use_bytes = s.reserved_bytes = g_host_in_use.load(std::memory_order_relaxed);
  s.peak_in_use_bytes = s.peak_reserved_bytes = g_host_peak.load(std::memory_order_relaxed);
  s.underlying_allocations = s.underlying_frees = -1;  // malloc's calls are not counted
  return s;
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  for (auto d : shape) ST_CHECK(d >= 0, "negative dimension in shape " << shape_string(shape));
  Tensor t;
  t.shape_ = shape;
  t.dtype_ = dtype;
  t.device_ = device;
  t.storage_ = std::make_shared<Storage>(shape_numel(shape) * dtype_size(dtype), device);
  return t;
}

Tensor Tensor::empty_pinned(const Shape& shape, DType dtype) {
  for (auto d : shape) ST_CHECK(d >= 0, "negative dimension in shape " << shape_string(shape));
  std::shared_ptr<DeviceMemory> gpu;
  if (device_memory_is_set(Device::cuda)) gpu = device_memory(Device::cuda);
  Tensor t;
  t.shape_ = shape;
  t.dtype_ = dtype;
  t.device_ = Device::cpu;
  t.storage_ = std::make_shared<Storage>(shape_numel(shape) * dtype_size(dtype), Device::cpu, std::move(gpu));
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  t.zero();
  return t;
}

Tensor Tensor::view_of(const Tensor& base, int64_t offset, const Shape& shape) {
  ST_CHECK(base.defined(), "view of an undefined tensor");
  ST_CHECK(offset >= 0 && offset + shape_numel(shape) <= base.numel(),
           "view " << shape_string(shape) << " at " << offset << " exceeds " << shape_string(base.shape()));
  Tensor t = base;
  t.offset_bytes_ = base.offset_bytes_ + offset * static_cast<int64_t>(dtype_size(base.dtype_));
  t.shape_ = shape;
  return t;
}

Tensor Tensor::reshape(const Shape& shape) const {
  ST_CHECK(shape_numel(shape) == numel(), "cannot reshape " << shape_string(shape_) << " to " << shape_string(shape));
  Tensor t = *this;
  t.shape_ = shape;
  return t;
}

Tensor Tensor::clone() const {
  Tensor t = empty(shape_, dtype_, device_);
  t.copy_from(*this);
  return t;
}

Tensor Tensor::to(Device device) const {
  if (device == device_) return *this;
  Tensor t = empty(shape_, dtype_, device);
  t.copy_from(*this);
  return t;
}

void Tensor::copy_from(const Tensor& src) {
  ST_CHECK(src.dtype_ == dtype_ && src.numel() == numel(), "copy from " << dtype_name(src.dtype_)
                                                                        << shape_string(src.shape_) << " into "
                                                                        << dtype_name(dtype_) << shape_string(shape_));
  if (bytes() == 0 || raw() == src.raw()) return;
  if (device_ == Device::cpu && src.device_ == Device::cpu) {
    std::memcpy(raw(), src.raw(), bytes());
    return;
  }
  // One of the two is on a device: that device's memory copies (both on one device, or host and device).
  DeviceMemory* memory = device_ != Device::cpu ? storage_->device_memory() : src.storage_->device_memory();
  ST_CHECK(device_ == Device::cpu || src.device_ == Device::cpu || device_ == src.device_,
           "copy from " << device_name(src.device_) << " into " << device_name(device_) << ": go through the cpu");
  memory->copy(raw(), device_, src.raw(), src.device_, bytes());
}

void Tensor::fill(float value) {
  if (device_ != Device::cpu) {
    ST_CHECK(dtype_ == DType::f32, "fill() of a " << dtype_name(dtype_) << " tensor: float32 only");
    storage_->device_memory()->fill_f32(static_cast<float*>(raw()), value, numel());
    return;
  }
  float* p = data<float>();
  for (int64_t i = 0, n = numel(); i < n; ++i) p[i] = value;
}

void Tensor::zero() {
  if (bytes() == 0) return;
  if (device_ != Device::cpu)
    storage_->device_memory()->fill_zero(raw(), bytes());
  else
    std::memset(raw(), 0, bytes());
}

void* Tensor::raw() const {
  ST_CHECK(storage_ != nullptr, "access to an undefined tensor");
  return static_cast<char*>(storage_->data()) + offset_bytes_;
}

namespace detail {
std::string host_access_message(const char* type, DType dtype, Device device, const Shape& shape) {
  std::ostringstream os;
  os << "Tensor::data<" << type << ">() on a tensor of dtype " << dtype_name(dtype) << " (shape " << shape_string(shape)
     << ", device " << device_name(device) << ")";
  if (device != Device::cpu) os << ": host access to device memory; copy it to the CPU first";
  return os.str();
}
}  // namespace detail

void Tensor::refuse_host_access(const char* type) const {
  ST_THROW(detail::host_access_message(type, dtype_, device_, shape_));
}

}  // namespace scaletrain
