// Private to src/train: the model's input from the loader's uint8 pixels (normalised with the
// split's mean and std), shared by the training step and evaluation, and the copy of a host batch
// tensor to the Context's device. On a GPU the uint8 pixels cross, a quarter of the bytes of the
// floats they become there.
#pragma once

#include "scaletrain/backend/context.hpp"
#include "scaletrain/data/dataset.hpp"
#include "scaletrain/ops/normalize.hpp"
#include "scaletrain/tensor/tensor.hpp"

namespace scaletrain::train {

// `t` on the context's device: `t` itself where it is already there, else copied into
// `device_copy` (reallocated only when the shape or dtype changes).
inline const Tensor& on_context_device(Context& ctx, const Tensor& t, Tensor& device_copy) {
  if (t.device() == ctx.device()) return t;
  if (!device_copy.defined() || device_copy.shape() != t.shape() || device_copy.dtype() != t.dtype() ||
      device_copy.device() != ctx.device())
    device_copy = Tensor::empty(t.shape(), t.dtype(), ctx.device());
  device_copy.copy_from(t);
  return device_copy;
}

// Normalises `pixels` (B, H, W, C) u8 into `buffer` on the context's device (reallocated only
// when the batch shape changes) and returns it; `device_pixels` holds the pixels' copy on a GPU.
inline const Tensor& model_input(Context& ctx, const Tensor& pixels, const data::SplitInfo& split, Tensor& buffer,
                                 Tensor& device_pixels) {
  const Tensor& x = on_context_device(ctx, pixels, device_pixels);
  if (!buffer.defined() || buffer.shape() != pixels.shape() || buffer.device() != ctx.device())
    buffer = Tensor::empty(pixels.shape(), DType::f32, ctx.device());
  ops::normalize_images(ctx, x, split.mean, split.std, buffer);
  return buffer;
}

}  // namespace scaletrain::train
