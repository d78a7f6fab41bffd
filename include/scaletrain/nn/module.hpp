// Module: a layer or a block of layers with forward and backward. forward() keeps what its
// backward needs (inputs, outputs, batch statistics) until the next forward; backward() takes
// d(loss)/d(output), writes (overwrites) the gradients of its own parameters, calls
// ParameterSet::mark_grad_ready for each, and returns d(loss)/d(input). Residual blocks route
// gradients through both branches, so the model is a graph, not just a chain.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "scaletrain/backend/context.hpp"
#include "scaletrain/core/rng.hpp"
#include "scaletrain/nn/parameters.hpp"
#include "scaletrain/ops/registry.hpp"

namespace scaletrain::nn {

class Module {
 public:
  virtual ~Module() = default;
  // x: the layer's input (channels-last). training selects batch statistics in batch norm.
  virtual Tensor forward(Context& ctx, const Tensor& x, bool training) = 0;
  // dy: gradient of the loss w.r.t. the last forward's output. need_dx=false lets the first
  // layer skip the input gradient.
  virtual Tensor backward(Context& ctx, const Tensor& dy, bool need_dx = true) = 0;
  // backward, with d(loss)/d(input) added into `sum` (of the input's shape) instead of returned:
  // where two branches of a block meet at its input. This default adds backward's dx after it; a
  // convolution adds as it stores its input gradient (ops::conv2d_backward_data_add), saving a
  // pass over the gradient.
  virtual void backward_adding(Context& ctx, const Tensor& dy, Tensor& sum);
  // Adds the ops backward_adding runs beyond backward's (list_ops): add_inplace here, the
  // convolution's own adding op in Conv2d.
  virtual void list_backward_adding_ops(ops::OpNames& ops) const;
  // Fills parameters with their initial values (after ParameterSet::finalize).
  virtual void initialize(Rng& rng) = 0;
  // Adds the ops (ops/registry.hpp) its forward runs in evaluation, and with `training` also in
  // training and in backward: what --device checks against the device's kernels. unit.models
  // checks every model's list against the ops its forward and backward really dispatch.
  virtual void list_ops(ops::OpNames& ops, bool training) const = 0;
};

using ModulePtr = std::unique_ptr<Module>;

}  // namespace scaletrain::nn
