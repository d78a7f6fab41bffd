// ResNet-50 v1.5 and CIFAR ResNet-20. Layer registration order mirrors torchvision's module
// order (conv1, bn1, ..., downsample after the main branch, fc last), so the ParameterSet's
// flat buffers follow the forward pass and gradients complete in reverse order during backward.
#include "scaletrain/models/resnet.hpp"

#include "scaletrain/core/error.hpp"
#include "scaletrain/ops/activation.hpp"
#include "scaletrain/ops/batch_norm.hpp"

namespace scaletrain::models {

using nn::BatchNorm2d;
using nn::Conv2d;
using nn::join_name;

// ---- ResidualBlock ----

void ResidualBlock::add_downsample(nn::ParameterSet& params, const std::string& prefix, int in_channels,
                                   int out_channels, int stride) {
  downsample_ = std::make_unique<nn::Sequential>();
  const std::string ds = join_name(prefix, "downsample");
  downsample_->emplace<Conv2d>(params, join_name(ds, "0"), in_channels, out_channels, 1, stride, 0);
  downsample_->emplace<BatchNorm2d>(params, join_name(ds, "1"), out_channels);
}

void ResidualBlock::list_ops(ops::OpNames& ops, bool training) const {
  main_.list_ops(ops, training);
  if (downsample_) downsample_->list_ops(ops, training);
  relu_.list_ops(ops, training);
  ops.insert("add_forward");  // the residual sum
  if (!training) return;
  // Backward's sum of the branches' gradients (the main branch's first layer adds into the
  // shortcut's); the fused end of the block (--fuse bn-add-relu).
  main_.list_backward_adding_ops(ops);
  ops.insert({"batch_norm_add_relu_forward_training", "batch_norm_add_relu_backward"});
}

nn::BatchNorm2d& ResidualBlock::last_batch_norm() {
  auto* bn = dynamic_cast<nn::BatchNorm2d*>(&main_.at(main_.size() - 1));
  ST_CHECK(bn != nullptr, "internal: a residual block's main branch must end with a batch norm");
  return *bn;
}

Tensor ResidualBlock::forward(Context& ctx, const Tensor& x, bool training) {
  if (training && ctx.fuse_bn_add_relu()) return forward_fused(ctx, x);
  // The main branch ends in batch norm, whose output buffer is free to take the sum in place
  // (batch norm's backward reads its input, not its output); x itself is left untouched.
  Tensor h = main_.forward(ctx, x, training);
  const Tensor shortcut = downsample_ ? downsample_->forward(ctx, x, training) : x;
  ST_CHECK(h.shape() == shortcut.shape(),
           "residual branches disagree: " << shape_string(h.shape()) << " vs " << shape_string(shortcut.shape()));
  ops::add_forward(ctx, h, shortcut, h);
  return relu_.forward(ctx, h, training);
}

// --fuse bn-add-relu: the main branch but its batch norm, the shortcut, then batch norm, the add
// and the ReLU in one op. The shortcut runs before the last batch norm here: the same values.
Tensor ResidualBlock::forward_fused(Context& ctx, const Tensor& x) {
  const Tensor h = main_.forward_first(ctx, x, true, main_.size() - 1);
  const Tensor shortcut = downsample_ ? downsample_->forward(ctx, x, true) : x;
  ST_CHECK(h.shape() == shortcut.shape(),
           "residual branches disagree: " << shape_string(h.shape()) << " vs " << shape_string(shortcut.shape()));
  return last_batch_norm().forward_add_relu(ctx, h, shortcut);
}

// The fused op's backward gives the last batch norm's input gradient and the shortcut's (its
// weight and bias gradients complete first now, before the shortcut's).
Tensor ResidualBlock::backward_fused(Context& ctx, const Tensor& dy, bool need_dx) {
  const nn::BatchNorm2d::AddReluGradients g = last_batch_norm().backward_add_relu(ctx, dy, true);
  Tensor d_shortcut = downsample_ ? downsample_->backward(ctx, g.dz, need_dx) : g.dz;
  return main_backward(ctx, g.dx, main_.size() - 1, need_dx, d_shortcut);
}

Tensor ResidualBlock::backward(Context& ctx, const Tensor& dy, bool need_dx) {
  if (last_batch_norm().fused_last()) return backward_fused(ctx, dy, need_dx);
  Tensor g = relu_.backward(ctx, dy, true);
  // Shortcut first: downsample was registered last, so its gradients complete first.
  Tensor d_shortcut = downsample_ ? downsample_->backward(ctx, g, need_dx) : g;
  return main_backward(ctx, g, main_.size(), need_dx, d_shortcut);
}

// The main branch's first `count` layers backward, their input gradient added into the shortcut's
// as the branch's first convolution stores it (the block's input gradient, with no pass of its
// own). With an identity shortcut the sum lands in the gradient the branch started from, which its
// last layer has read by then.
Tensor ResidualBlock::main_backward(Context& ctx, const Tensor& dy, std::size_t count, bool need_dx,
                                    Tensor& d_shortcut) {
  if (!need_dx) {
    main_.backward_first(ctx, dy, false, count);
    return Tensor();
  }
  main_.backward_first_adding(ctx, dy, count, d_shortcut);
  return d_shortcut;
}

void ResidualBlock::initialize(Rng& rng) {
  main_.initialize(rng);
  if (downsample_) downsample_->initialize(rng);
}

BasicBlock::BasicBlock(nn::ParameterSet& params, const std::string& prefix, int in_channels, int planes, int stride) {
  main_.emplace<Conv2d>(params, join_name(prefix, "conv1"), in_channels, planes, 3, stride, 1);
  main_.emplace<nn::BatchNormReLU>(params, join_name(prefix, "bn1"), planes);
  main_.emplace<Conv2d>(params, join_name(prefix, "conv2"), planes, planes, 3, 1, 1);
  main_.emplace<BatchNorm2d>(params, join_name(prefix, "bn2"), planes);
  if (stride != 1 || in_channels != planes * kExpansion)
    add_downsample(params, prefix, in_channels, planes * kExpansion, stride);
}

Bottleneck::Bottleneck(nn::ParameterSet& params, const std::string& prefix, int in_channels, int planes, int stride) {
  main_.emplace<Conv2d>(params, join_name(prefix, "conv1"), in_channels, planes, 1, 1, 0);
  main_.emplace<nn::BatchNormReLU>(params, join_name(prefix, "bn1"), planes);
  main_.emplace<Conv2d>(params, join_name(prefix, "conv2"), planes, planes, 3, stride, 1);
  main_.emplace<nn::BatchNormReLU>(params, join_name(prefix, "bn2"), planes);
  main_.emplace<Conv2d>(params, join_name(prefix, "conv3"), planes, planes * kExpansion, 1, 1, 0);
  main_.emplace<BatchNorm2d>(params, join_name(prefix, "bn3"), planes * kExpansion);
  if (stride != 1 || in_channels != planes * kExpansion)
    add_downsample(params, prefix, in_channels, planes * kExpansion, stride);
}

namespace {

// layerN: `blocks` blocks, the first with `stride`; returns the output channel count.
template <typename Block>
int add_stage(nn::Sequential& net, nn::ParameterSet& params, const std::string& name, int in_channels, int planes,
              int blocks, int stride) {
  auto stage = std::make_unique<nn::Sequential>();
  for (int b = 0; b < blocks; ++b) {
    stage->emplace<Block>(params, join_name(name, std::to_string(b)), in_channels, planes, b == 0 ? stride : 1);
    in_channels = planes * Block::kExpansion;
  }
  net.add(std::move(stage));
  return in_channels;
}

}  // namespace

std::unique_ptr<Model> make_resnet50(int num_classes, int in_channels) {
  auto model = std::make_unique<Model>("resnet50", num_classes, in_channels);
  nn::ParameterSet& params = model->params();
  auto net = std::make_unique<nn::Sequential>();
  net->emplace<Conv2d>(params, "conv1", in_channels, 64, 7, 2, 3);
  net->emplace<nn::BatchNormReLU>(params, "bn1", 64);
  net->emplace<nn::MaxPool2d>(ops::MaxPool2dParams{3, 2, 1});
  int channels = 64;
  channels = add_stage<Bottleneck>(*net, params, "layer1", channels, 64, 3, 1);
  channels = add_stage<Bottleneck>(*net, params, "layer2", channels, 128, 4, 2);
  channels = add_stage<Bottleneck>(*net, params, "layer3", channels, 256, 6, 2);
  channels = add_stage<Bottleneck>(*net, params, "layer4", channels, 512, 3, 2);
  net->emplace<nn::GlobalAvgPool>();
  net->emplace<nn::Linear>(params, "fc", channels, num_classes);
  model->set_network(std::move(net));
  return model;
}

std::unique_ptr<Model> make_resnet20(int num_classes, int in_channels) {
  auto model = std::make_unique<Model>("resnet20", num_classes, in_channels);
  nn::ParameterSet& params = model->params();
  auto net = std::make_unique<nn::Sequential>();
  net->emplace<Conv2d>(params, "conv1", in_channels, 16, 3, 1, 1);
  net->emplace<nn::BatchNormReLU>(params, "bn1", 16);
  int channels = 16;
  channels = add_stage<BasicBlock>(*net, params, "layer1", channels, 16, 3, 1);
  channels = add_stage<BasicBlock>(*net, params, "layer2", channels, 32, 3, 2);
  channels = add_stage<BasicBlock>(*net, params, "layer3", channels, 64, 3, 2);
  net->emplace<nn::GlobalAvgPool>();
  net->emplace<nn::Linear>(params, "fc", channels, num_classes);
  model->set_network(std::move(net));
  return model;
}

}  // namespace scaletrain::models
