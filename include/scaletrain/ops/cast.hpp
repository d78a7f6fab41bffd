// Conversions between float32 and the 16-bit storage formats of mixed precision
// (docs/mixed-precision.md): what a GPU's 16-bit kernels read and write. The first step of the
// CUDA backend's 16-bit path (issue 26): 16-bit weight copies cast from the fp32 masters, and
// 16-bit gradients for the wire, cast on the device before they cross to the host.
//
// Both devices give the bits of core/half.hpp, which torch.torch_half checks against PyTorch's
// Tensor.half() and Tensor.bfloat16(): round to nearest, ties to even; a value beyond the format's
// range becomes inf (fp16: from 65520 in magnitude); subnormals kept; NaN stays NaN.
#pragma once

#include "scaletrain/backend/context.hpp"
#include "scaletrain/core/half.hpp"

namespace scaletrain::ops {

// x: f32; y: f16 or bf16, x's shape, overwritten with x rounded to y's format.
void cast_to_half(Context& ctx, const Tensor& x, Tensor& y);
// x: f16 or bf16; y: f32, x's shape, overwritten with x's values (exact).
void cast_from_half(Context& ctx, const Tensor& x, Tensor& y);
// x: f32, rounded in place to the nearest value of `format` (what storing it in 16 bits and
// reading it back gives). Under a mixed precision the op dispatch calls it on every fp32 output
// tensor the table of docs/mixed-precision.md calls 16-bit (ops/op.hpp) on the GPU, as it calls
// core/half.hpp's round_in_place on the CPU.
void round_to_half(Context& ctx, Tensor& x, HalfFormat format);
// t as f32: t itself when it is, else an f32 copy on t's device (exact). For code that reads an
// activation on the host (logits for predictions, decoding, the ranking evaluation), which under
// a mixed precision is stored in 16 bits (Context::activation_dtype).
Tensor as_f32(Context& ctx, const Tensor& t);

}  // namespace scaletrain::ops
