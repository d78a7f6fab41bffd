// The model's input op: image normalisation. The input pipeline hands over uint8 pixels (one
// byte per value, a quarter of the memory traffic of float32 and what a GPU job copies to the
// device); the trainer normalises each batch here, as the first op of the forward pass.
#pragma once

#include <vector>

#include "scaletrain/backend/context.hpp"

namespace scaletrain::ops {

// Which input channel feeds output channel c: the same one, or channel C - 1 - c (RGB pixels to a
// BGR model, as Caffe's models take them: --preprocess caffe).
enum class ChannelOrder { as_stored, reversed };

// y[..., c] = (x[..., k] / 255 - mean[c]) / std[c] for uint8 images x (N, H, W, C) channels-last,
// into float32 y of the same shape, where k = c (as_stored) or C - 1 - c (reversed): mean and std
// are the output's, one value per channel (std > 0). Each value is computed in double and rounded
// once to float, so the result does not depend on the backend. (mean m / 255 and std 1 / 255 give
// exactly x - m in float for whole m from 0 to 255: Caffe's mean subtraction.)
void normalize_images(Context& ctx, const Tensor& x, const std::vector<double>& mean, const std::vector<double>& std,
                      Tensor& y, ChannelOrder order = ChannelOrder::as_stored);

}  // namespace scaletrain::ops
