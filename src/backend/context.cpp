#include "scaletrain/backend/context.hpp"

#include <omp.h>

#include "backend/cpu/dnnl_context.hpp"
#include "scaletrain/core/error.hpp"

namespace scaletrain {

const char* precision_name(Precision precision) {
  switch (precision) {
    case Precision::fp32:
      return "fp32";
    case Precision::amp_fp16:
      return "amp-fp16";
    case Precision::amp_bf16:
      return "amp-bf16";
  }
  return "?";
}

std::optional<HalfFormat> storage_format(Precision precision) {
  switch (precision) {
    case Precision::amp_fp16:
      return HalfFormat::fp16;
    case Precision::amp_bf16:
      return HalfFormat::bf16;
    default:
      return std::nullopt;
  }
}

Context::Context(Device device, int threads, int gpu_index)
    : device_(device), threads_(threads), gpu_index_(gpu_index) {
  if (threads > 0) omp_set_num_threads(threads);
  threads_ = omp_get_max_threads();
  impl_ = std::make_unique<Impl>();
  if (device == Device::cuda) impl_->cuda = cuda::open_device_state(gpu_index);
}

Context::~Context() = default;

void Context::synchronize() {
  impl_->stream.wait();
  if (impl_->cuda) cuda::synchronize(*impl_->cuda);
}

void Context::set_allow_tf32(bool allow) {
  allow_tf32_ = allow;
  if (impl_->cuda) cuda::set_allow_tf32(*impl_->cuda, allow);
}

AllocatorStats Context::device_memory_stats() const {
  return impl_->cuda ? cuda::memory_stats(*impl_->cuda) : AllocatorStats{};
}

}  // namespace scaletrain
