// SGD with momentum and weight decay, PyTorch's rule exactly (torch.optim.SGD, dampening 0):
//   g = grad + wd * w;  v = mu * v + g  (first step: v = g);  g = nesterov ? g + mu * v : v;
//   w -= lr * g
// applied to every parameter (batch-norm affine parameters and biases included, as
// torch.optim.SGD(model.parameters()) does). It runs on the flat value / gradient buffers as one
// op (ops/sgd.hpp: one OpenMP loop on the CPU, one kernel on a GPU), so its cost does not grow
// with the number of parameter tensors.
// The momentum buffer has the same layout and offsets as ParameterSet::flat_values() and
// starts at zero, which makes the first step's v = 0 * mu + g = g exactly (PyTorch's first step).
#pragma once

#include "scaletrain/core/json.hpp"
#include "scaletrain/nn/parameters.hpp"
#include "scaletrain/optim/optimizer.hpp"

namespace scaletrain::optim {

struct SgdOptions {
  double momentum = 0.9;  // Goyal et al. 2017 and the MLPerf ResNet reference use 0.9
  double weight_decay = 0.0;
  bool nesterov = false;
};

class Sgd : public Optimizer {
 public:
  // params must be finalized and outlive the optimizer.
  Sgd(nn::ParameterSet& params, const SgdOptions& options);
  // One update of every parameter from params.flat_grads() with learning rate lr.
  void step(Context& ctx, double lr) override;
  ops::OpNames ops() const override { return {"sgd_update"}; }
  const char* name() const override { return "sgd"; }
  // {"name": "sgd", "momentum", "weight_decay", "nesterov"}
  Json describe() const override;

  const SgdOptions& options() const { return options_; }

 private:
  SgdOptions options_;
};

}  // namespace scaletrain::optim
