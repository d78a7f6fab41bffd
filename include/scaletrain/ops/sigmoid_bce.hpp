// Binary cross-entropy on logits, identical to PyTorch's BCEWithLogitsLoss(reduction='mean')
// (the MLPerf NCF reference's loss), in the numerically stable form
//   loss_i = max(x_i, 0) - x_i * y_i + log(1 + exp(-|x_i|)),
// which neither overflows exp for large |x| nor loses log(sigmoid) to cancellation.
//   d(mean loss) / d x_i = (sigmoid(x_i) - y_i) / N.
#pragma once

#include "scaletrain/backend/context.hpp"

namespace scaletrain::ops {

// logits: (N) or (N, 1) f32; targets: the same shape, f32 (0 or 1 for NCF; any value in [0, 1]
// works). Returns the mean loss over the N samples. dlogits: the shape of logits, overwritten
// with grad_scale * d(mean loss)/d(logits) (grad_scale: the loss scale, train/loss_scaler.hpp;
// it scales the gradient, not the returned loss); may be undefined (not computed).
double sigmoid_bce_with_logits(Context& ctx, const Tensor& logits, const Tensor& targets, Tensor& dlogits,
                               double grad_scale = 1.0);

}  // namespace scaletrain::ops
