#include "scaletrain/backend/context.hpp"

#include <omp.h>

#include <cstdlib>
#include <string>

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

void Context::set_precision(Precision precision) {
  precision_ = precision;
  const std::optional<HalfFormat> format = storage_format(precision);
  const char* hook = std::getenv("SCALETRAIN_AMP_STORAGE");
  const bool emulated = hook != nullptr && std::string(hook) == "f32";
  ST_CHECK(hook == nullptr || *hook == '\0' || emulated || std::string(hook) == "16",
           "SCALETRAIN_AMP_STORAGE='" << hook << "' is neither f32 nor 16 (a test hook)");
  activation_dtype_ = !format || emulated ? DType::f32 : (*format == HalfFormat::fp16 ? DType::f16 : DType::bf16);
}

std::string describe_amp_storage(const Context& ctx) {
  const std::optional<HalfFormat> format = storage_format(ctx.precision());
  if (!format) return "";
  const std::string half = *format == HalfFormat::fp16 ? "fp16" : "bf16";
  if (ctx.activation_dtype() == DType::f32)
    return std::string("on ") + device_name(ctx.device()) + ", activations and their gradients kept as fp32 holding " +
           half + " values (SCALETRAIN_AMP_STORAGE=f32): computed in fp32, 16-bit outputs rounded to 16-bit values";
  return std::string("on ") + device_name(ctx.device()) + ", activations and their gradients stored in " + half +
         " tensors: computed in fp32, each op's 16-bit inputs widened and its 16-bit outputs rounded once";
}

AllocatorStats Context::device_memory_stats() const {
  return impl_->cuda ? cuda::memory_stats(*impl_->cuda) : host_tensor_memory_stats();
}

}  // namespace scaletrain
