// The model's input op: image normalisation. The input pipeline hands over uint8 pixels (one
// byte per value, a quarter of the memory traffic of float32 and what a GPU job copies to the
// device); the trainer normalises each batch here, as the first op of the forward pass.
#pragma once

#include <vector>

#include "scaletrain/backend/context.hpp"

namespace scaletrain::ops {

// y = (x / 255 - mean[c]) / std[c] for uint8 images x (N, H, W, C) channels-last, into float32 y
// of the same shape. mean and std have one value per channel (std > 0). Each value is computed in
// double and rounded once to float, so the result does not depend on the backend.
void normalize_images(Context& ctx, const Tensor& x, const std::vector<double>& mean, const std::vector<double>& std,
                      Tensor& y);

}  // namespace scaletrain::ops
