// Fully connected layer with bias, as PyTorch's Linear: y = x w^T + b.
#pragma once

#include "scaletrain/backend/context.hpp"

namespace scaletrain::ops {

// x: (N, IN); w: (OUT, IN); b: (OUT); y: (N, OUT) overwritten.
void linear_forward(Context& ctx, const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y);
// dy: (N, OUT). dx: (N, IN), dw: (OUT, IN), db: (OUT), all overwritten. dx may be undefined
// (not computed) when the input needs no gradient.
void linear_backward(Context& ctx, const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx, Tensor& dw,
                     Tensor& db);

}  // namespace scaletrain::ops
