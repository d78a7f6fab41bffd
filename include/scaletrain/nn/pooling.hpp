// Average pooling layers for AlexNet, GoogLeNet and Inception-v3: PyTorch's AvgPool2d and
// AdaptiveAvgPool2d on channels-last activations. Stateless; like the layers in layers.hpp they
// own their output buffer (reuse_buffer), so an output stays valid only until the layer's next
// forward, and return fresh input gradients. MaxPool2d and GlobalAvgPool (ResNet's) are in
// layers.hpp.
#pragma once

#include "scaletrain/nn/module.hpp"
#include "scaletrain/ops/pool.hpp"

namespace scaletrain::nn {

// PyTorch AvgPool2d(kernel, stride, padding, ceil_mode, count_include_pad), square windows:
// (N, H, W, C) -> (N, OH, OW, C).
class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(ops::AvgPool2dParams p = {}) : pool_(p) {}
  Tensor forward(Context& ctx, const Tensor& x, bool training) override;
  Tensor backward(Context& ctx, const Tensor& dy, bool need_dx = true) override;
  void initialize(Rng&) override {}
  void list_ops(ops::OpNames& ops, bool training) const override;

 private:
  ops::AvgPool2dParams pool_;
  Shape x_shape_;  // backward needs only the input's shape
  Tensor y_buffer_;
};

// PyTorch AdaptiveAvgPool2d((out_h, out_w)): (N, H, W, C) -> (N, out_h, out_w, C), not flattened.
// Any input size, smaller than the output included (AlexNet's 6x6 from a 1x1 map below 96 px).
class AdaptiveAvgPool2d : public Module {
 public:
  AdaptiveAvgPool2d(int out_h, int out_w) : pool_{out_h, out_w} {}
  Tensor forward(Context& ctx, const Tensor& x, bool training) override;
  Tensor backward(Context& ctx, const Tensor& dy, bool need_dx = true) override;
  void initialize(Rng&) override {}
  void list_ops(ops::OpNames& ops, bool training) const override;

 private:
  ops::AdaptiveAvgPool2dParams pool_;
  Shape x_shape_;
  Tensor y_buffer_;
};

}  // namespace scaletrain::nn
