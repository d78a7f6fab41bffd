// ReLU and the element-wise add used by residual connections.
#pragma once

#include "scaletrain/backend/context.hpp"

namespace scaletrain::ops {

// y = max(x, 0); any shape; y overwritten, may alias x.
void relu_forward(Context& ctx, const Tensor& x, Tensor& y);
// dx = dy where y > 0 else 0; y is the forward output; dx overwritten, may alias dy.
void relu_backward(Context& ctx, const Tensor& y, const Tensor& dy, Tensor& dx);

// y = a + b, same shapes; y overwritten, may alias a or b.
void add_forward(Context& ctx, const Tensor& a, const Tensor& b, Tensor& y);
// y += x (gradient accumulation into a residual branch).
void add_inplace(Context& ctx, Tensor& y, const Tensor& x);

}  // namespace scaletrain::ops
