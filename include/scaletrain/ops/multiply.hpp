// Element-wise product of two same-shaped tensors (NCF's generalized matrix factorization:
// user factors * item factors).
#pragma once

#include "scaletrain/backend/context.hpp"

namespace scaletrain::ops {

// y = a * b; any shape, a, b and y alike; y overwritten, may alias a or b (then the backward
// needs a copy of the overwritten input).
void multiply_forward(Context& ctx, const Tensor& a, const Tensor& b, Tensor& y);
// da = dy * b, db = dy * a; all the shape of a; da and db overwritten. Either may alias dy (each
// element of dy is read before it is written), not a, b or each other.
void multiply_backward(Context& ctx, const Tensor& a, const Tensor& b, const Tensor& dy, Tensor& da, Tensor& db);

}  // namespace scaletrain::ops
