// Private: argument checks shared by the op dispatchers, so every op reports a bad tensor the
// same way ("<op>: <argument> ...") before any backend kernel runs.
// Each dispatcher switches over Device with a case per device and no default, so -Wswitch
// (in -Wall) names every op that lacks a case when a device is added; a device without a
// kernel breaks out of the switch to no_kernel().
#pragma once

#include <optional>
#include <string>

#include "scaletrain/backend/context.hpp"
#include "scaletrain/core/error.hpp"

namespace scaletrain::ops {

// The 16-bit dtype of ctx's mixed precision (f16 for amp-fp16, bf16 for amp-bf16), or f32.
inline DType amp_storage_dtype(const Context& ctx) {
  const std::optional<HalfFormat> format = storage_format(ctx.precision());
  return !format ? DType::f32 : (*format == HalfFormat::fp16 ? DType::f16 : DType::bf16);
}

// t is defined, float32 (or, under a mixed precision, of its 16-bit format: activations stored
// in 16 bits) and on the context's device.
inline void check_tensor(const Context& ctx, const Tensor& t, const char* op, const char* name) {
  ST_CHECK(t.defined(), op << ": " << name << " is undefined");
  ST_CHECK(t.dtype() == DType::f32 || t.dtype() == amp_storage_dtype(ctx),
           op << ": " << name << " must be float32"
              << (amp_storage_dtype(ctx) != DType::f32 ? std::string(" or ") + dtype_name(amp_storage_dtype(ctx)) +
                                                             " (" + precision_name(ctx.precision()) + ")"
                                                       : std::string())
              << ", got " << dtype_name(t.dtype()));
  ST_CHECK(t.device() == ctx.device(), op << ": " << name << " is on " << device_name(t.device())
                                          << " but the context runs on " << device_name(ctx.device()));
}

// The dispatcher's answer for a device with no kernel (or a value outside Device).
[[noreturn]] inline void no_kernel(const char* op, Device device) {
  ST_THROW(op << ": no kernel for device " << device_name(device));
}

// A class label outside [0, classes), in the same words from every device's kernel (the CPU
// checks labels on the host, the GPU on the device and reports after its copy back).
[[noreturn]] inline void throw_label_out_of_range(const char* op, int64_t sample, int64_t label, int64_t classes) {
  ST_THROW(op << ": label " << label << " of sample " << sample << " is outside the " << classes << " classes [0, "
              << classes << ")");
}

inline void check_shape(const Tensor& t, const Shape& expected, const char* op, const char* name) {
  ST_CHECK(t.shape() == expected,
           op << ": " << name << " has shape " << shape_string(t.shape()) << ", expected " << shape_string(expected));
}

// Both of the above.
inline void check_tensor(const Context& ctx, const Tensor& t, const Shape& expected, const char* op, const char* name) {
  check_tensor(ctx, t, op, name);
  check_shape(t, expected, op, name);
}

// `out` shares no byte with `in` (an op whose kernels cannot run in place).
inline void check_no_overlap(const Tensor& out, const Tensor& in, const char* op, const char* out_name,
                             const char* in_name) {
  const char* po = static_cast<const char*>(out.raw());
  const char* pi = static_cast<const char*>(in.raw());
  const bool overlap = out.bytes() > 0 && in.bytes() > 0 && po < pi + in.bytes() && pi < po + out.bytes();
  ST_CHECK(!overlap, op << ": " << out_name << " overlaps " << in_name << " (the op cannot run in place)");
}

}  // namespace scaletrain::ops
