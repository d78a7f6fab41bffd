// Loss scaling's gradient op (train/loss_scaler.hpp): after the all-reduce, the gradients are
// divided by the loss scale and checked for inf and NaN in one pass, as PyTorch's
// _amp_foreach_non_finite_check_and_unscale_ does. (The scale enters backward through the loss
// ops' gradient factor, so no op multiplies by it.)
#pragma once

#include <cstdint>

#include "scaletrain/backend/context.hpp"

namespace scaletrain::ops {

// grad *= inv_scale, element by element (one rounding: inv_scale is a power of two for dynamic
// scaling, and then exact); returns how many elements were inf or NaN before. grad: f32 on the
// context's device (the flat gradient buffer). Synchronises the device to read the count.
int64_t unscale_gradients(Context& ctx, float inv_scale, Tensor& grad);

}  // namespace scaletrain::ops
