// ResNets: ResNet-50 v1.5 exactly as torchvision.models.resnet50 (stride 2 on the 3x3 conv of
// the downsampling Bottleneck; He et al. 2015 with the MLPerf/torchvision v1.5 change), and the
// CIFAR-style ResNet-20 of He et al. 2016 ("Deep Residual Learning", section 4.2) with projection
// shortcuts (1x1 conv + BN) where the shape changes. Names follow torchvision's state_dict.
#pragma once

#include <memory>
#include <string>

#include "scaletrain/models/model.hpp"
#include "scaletrain/nn/layers.hpp"

namespace scaletrain::models {

// out = relu(main(x) + shortcut(x)), where shortcut is the identity or downsample.0 (1x1 conv)
// + downsample.1 (BN). Backward sends the output gradient through both branches and sums them
// (the main branch's first convolution adds its input gradient into the shortcut's as it stores it).
class ResidualBlock : public nn::Module {
 public:
  Tensor forward(Context& ctx, const Tensor& x, bool training) override;
  Tensor backward(Context& ctx, const Tensor& dy, bool need_dx = true) override;
  void initialize(Rng& rng) override;
  void list_ops(ops::OpNames& ops, bool training) const override;

 protected:
  ResidualBlock() = default;
  // Registers downsample.0 / downsample.1 under prefix; call after the main branch's layers so
  // that registration follows torchvision's order.
  void add_downsample(nn::ParameterSet& params, const std::string& prefix, int in_channels, int out_channels,
                      int stride);
  nn::Sequential main_;  // ends with a batch norm
  std::unique_ptr<nn::Sequential> downsample_;
  nn::ReLU relu_{true};

 private:
  nn::BatchNorm2d& last_batch_norm();
  Tensor forward_fused(Context& ctx, const Tensor& x);
  Tensor backward_fused(Context& ctx, const Tensor& dy, bool need_dx);
  Tensor main_backward(Context& ctx, const Tensor& dy, std::size_t count, bool need_dx, Tensor& d_shortcut);
};

// conv1 3x3 (stride), bn1, relu, conv2 3x3, bn2; projection shortcut when stride != 1 or the
// channel count changes.
class BasicBlock : public ResidualBlock {
 public:
  static constexpr int kExpansion = 1;
  BasicBlock(nn::ParameterSet& params, const std::string& prefix, int in_channels, int planes, int stride);
};

// conv1 1x1, bn1, relu, conv2 3x3 (stride: v1.5), bn2, relu, conv3 1x1 (planes * 4), bn3;
// projection shortcut when stride != 1 or the channel count changes.
class Bottleneck : public ResidualBlock {
 public:
  static constexpr int kExpansion = 4;
  Bottleneck(nn::ParameterSet& params, const std::string& prefix, int in_channels, int planes, int stride);
};

// 25,557,032 parameters at 1000 classes and 3 input channels.
std::unique_ptr<Model> make_resnet50(int num_classes, int in_channels);
// 272,186 parameters at 10 classes and 1 input channel.
std::unique_ptr<Model> make_resnet20(int num_classes, int in_channels);

}  // namespace scaletrain::models
