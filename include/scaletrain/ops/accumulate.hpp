// Gradient accumulation's sums (train/gradient_accumulation.hpp) as one op on any device: the
// first micro-batch's gradient starts the sum, the middle ones add to it, and the last folds the
// sum into its own gradient and scales it by 1 / micro-batches, in float:
//   first:  sum = grad;   middle: sum = sum + grad;   last: grad = (sum + grad) * scale
#pragma once

#include "scaletrain/backend/context.hpp"

namespace scaletrain::ops {

enum class AccumulateStage { first, middle, last };

// sum, grad: f32, the same shape, on the context's device (views of flat buffers are fine).
void accumulate_gradient(Context& ctx, AccumulateStage stage, float scale, Tensor& sum, Tensor& grad);

}  // namespace scaletrain::ops
