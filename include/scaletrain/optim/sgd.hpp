// SGD with momentum and weight decay, PyTorch's rule exactly (torch.optim.SGD, dampening 0):
//   g = grad + wd * w;  v = mu * v + g  (first step: v = g);  g = nesterov ? g + mu * v : v;
//   w -= lr * g
// applied to every parameter (batch-norm affine parameters and biases included, as
// torch.optim.SGD(model.parameters()) does). It runs on the flat value / gradient buffers in one
// vectorised OpenMP loop, so its cost does not grow with the number of parameter tensors.
// The momentum buffer has the same layout and offsets as ParameterSet::flat_values() and
// starts at zero, which makes the first step's v = 0 * mu + g = g exactly (PyTorch's first step).
#pragma once

#include "scaletrain/nn/parameters.hpp"
#include "scaletrain/tensor/tensor.hpp"

namespace scaletrain::optim {

struct SgdOptions {
  double momentum = 0.9;  // Goyal et al. 2017 and the MLPerf ResNet reference use 0.9
  double weight_decay = 0.0;
  bool nesterov = false;
};

class Sgd {
 public:
  // params must be finalized and outlive the optimizer.
  Sgd(nn::ParameterSet& params, const SgdOptions& options);
  // One update of every parameter from params.flat_grads() with learning rate lr.
  void step(double lr);

  const SgdOptions& options() const { return options_; }
  int64_t steps() const { return steps_; }
  nn::ParameterSet& params() { return params_; }

  // Flat, same layout/offsets as params.flat_values(). Inline (as is momentum_view) so that
  // code reading or restoring momentum (checkpoints) needs no link dependency on st_optim.
  Tensor& momentum_buffer() { return momentum_; }
  // View of parameter i's momentum, with the parameter's shape (for checkpoints).
  Tensor momentum_view(int i) {
    const nn::TensorInfo& info = params_.parameter_info(i);
    return Tensor::view_of(momentum_, info.offset, info.shape);
  }

 private:
  nn::ParameterSet& params_;
  SgdOptions options_;
  Tensor momentum_;
  int64_t steps_ = 0;
};

}  // namespace scaletrain::optim
