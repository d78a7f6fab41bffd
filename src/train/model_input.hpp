// Private to src/train: the model's input from the loader's uint8 pixels (normalised with the
// split's mean and std), shared by the training step and evaluation.
#pragma once

#include "scaletrain/backend/context.hpp"
#include "scaletrain/data/dataset.hpp"
#include "scaletrain/ops/normalize.hpp"
#include "scaletrain/tensor/tensor.hpp"

namespace scaletrain::train {

// Normalises `pixels` (B, H, W, C) u8 into `buffer` (reallocated only when the batch shape
// changes) and returns it.
inline const Tensor& model_input(Context& ctx, const Tensor& pixels, const data::SplitInfo& split, Tensor& buffer) {
  if (!buffer.defined() || buffer.shape() != pixels.shape()) buffer = Tensor::empty(pixels.shape());
  ops::normalize_images(ctx, pixels, split.mean, split.std, buffer);
  return buffer;
}

}  // namespace scaletrain::train
