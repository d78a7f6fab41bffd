// The SGD update over flat buffers, PyTorch's rule exactly (torch.optim.SGD, dampening 0), in
// float with float coefficients, operation for operation as PyTorch's kernels do it:
//   g = grad + wd * w;  v = mu * v + g;  d = nesterov ? g + mu * v : v;  w = w + (-lr) * d
// One pass over the whole flat parameter buffer (one kernel on a GPU), so its cost does not grow
// with the number of parameter tensors. optim::Sgd owns the options and the momentum buffer.
#pragma once

#include "scaletrain/backend/context.hpp"

namespace scaletrain::ops {

struct SgdUpdateParams {
  float lr = 0.0f;
  float momentum = 0.0f;
  float weight_decay = 0.0f;
  bool nesterov = false;
};

// w, grad, momentum: f32, the same element count, on the context's device; w and momentum are
// updated in place.
void sgd_update(Context& ctx, const SgdUpdateParams& p, Tensor& w, const Tensor& grad, Tensor& momentum);

}  // namespace scaletrain::ops
