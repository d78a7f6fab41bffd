// The Adam update over flat buffers, torch.optim.Adam's rule (no weight decay, no amsgrad), in
// float with float coefficients as optim::Adam computes them from the step's bias corrections:
//   m = b1 * m + (1 - b1) * g;  v = b2 * v + (1 - b2) * g * g;
//   w = w + neg_step_size * (m / (sqrt(v) / bc2_sqrt + eps))
// One pass over the whole flat parameter buffer. optim::Adam owns the options and both moments.
//
// lazy_adam_update is the same update restricted to the rows that a step touched, for a table
// read only by row lookups (an embedding): a row whose gradient is exactly zero in every element
// was looked up by no sample of the step (anywhere, once gradients are all-reduced), and it keeps
// its weights and both moments, as TensorFlow's LazyAdamOptimizer and torch.optim.SparseAdam
// leave the rows outside a sparse gradient. optim::LazyAdam runs it on lookup-only parameters.
#pragma once

#include "scaletrain/backend/context.hpp"

namespace scaletrain::ops {

struct AdamUpdateParams {
  float beta1 = 0.9f, one_minus_beta1 = 0.1f;
  float beta2 = 0.999f, one_minus_beta2 = 0.001f;
  float epsilon = 1e-8f;
  float bias_correction2_sqrt = 1.0f;  // sqrt(1 - beta2^t)
  float neg_step_size = 0.0f;          // -lr / (1 - beta1^t)
};

// w, grad, m (first moment), v (second moment): f32, the same element count, on the context's
// device; w, m and v are updated in place.
void adam_update(Context& ctx, const AdamUpdateParams& p, Tensor& w, const Tensor& grad, Tensor& m, Tensor& v);

// As adam_update on rows of row_width consecutive elements (the element count a multiple of it):
// rows whose gradient is all zeros are left as they are, the others update exactly as adam_update
// would update them (the same float operations, so the same bits).
void lazy_adam_update(Context& ctx, const AdamUpdateParams& p, Tensor& w, const Tensor& grad, Tensor& m, Tensor& v,
                      int64_t row_width);

}  // namespace scaletrain::ops
