// The Adam update over flat buffers, torch.optim.Adam's rule (no weight decay, no amsgrad), in
// float with float coefficients as optim::Adam computes them from the step's bias corrections:
//   m = b1 * m + (1 - b1) * g;  v = b2 * v + (1 - b2) * g * g;
//   w = w + neg_step_size * (m / (sqrt(v) / bc2_sqrt + eps))
// One pass over the whole flat parameter buffer. optim::Adam owns the options and both moments.
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

}  // namespace scaletrain::ops
