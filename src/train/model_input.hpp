// Private to src/train: the model's input from the loader's uint8 pixels (normalised with the
// split's mean and std, or as Caffe's models take them: --preprocess), shared by the training step and evaluation, and
// the copy of a host batch tensor to the Context's device. On a GPU the uint8 pixels cross, a quarter of the bytes of
// the floats they become there.
#pragma once

#include <string>
#include <vector>

#include "scaletrain/backend/context.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/data/dataset.hpp"
#include "scaletrain/data/loader.hpp"
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

// ops::normalize_images' arguments for a split under --preprocess (data/loader.hpp).
struct InputNormalization {
  std::vector<double> mean, std;
  ops::ChannelOrder order = ops::ChannelOrder::as_stored;
};

// torchvision: the split's mean and std. caffe: the channels reversed (RGB pixels, a BGR model)
// and mean m / 255, std 1 / 255 per BGR channel, which normalize_images turns into exactly
// pixel - m; the split's mean and std are not used. Throws for caffe on images without 3 channels.
inline InputNormalization input_normalization(const data::SplitInfo& split, const std::string& preprocess) {
  if (preprocess != "caffe") return {split.mean, split.std, ops::ChannelOrder::as_stored};
  ST_CHECK(split.channels == 3, "--preprocess caffe takes RGB images (3 channels) to the model in BGR order, but "
                                    << split.dir << " has " << split.channels << "-channel images");
  InputNormalization n;
  for (double m : data::kCaffeMeanBgr) n.mean.push_back(m / 255.0);
  n.std.assign(3, 1.0 / 255.0);
  n.order = ops::ChannelOrder::reversed;
  return n;
}

// Normalises `pixels` (B, H, W, C) u8 into `buffer` on the context's device (reallocated only
// when the batch shape changes) and returns it; `device_pixels` holds the pixels' copy on a GPU.
inline const Tensor& model_input(Context& ctx, const Tensor& pixels, const InputNormalization& normalization,
                                 Tensor& buffer, Tensor& device_pixels) {
  const Tensor& x = on_context_device(ctx, pixels, device_pixels);
  if (!buffer.defined() || buffer.shape() != pixels.shape() || buffer.device() != ctx.device())
    buffer = Tensor::empty(pixels.shape(), DType::f32, ctx.device());
  ops::normalize_images(ctx, x, normalization.mean, normalization.std, buffer, normalization.order);
  return buffer;
}

}  // namespace scaletrain::train
