// Private to src/models: the building blocks the ImageNet CNNs of the LRZ study share (AlexNet,
// GoogLeNet, Inception-v3 and their Caffe forms). Each appends layers to a Sequential and
// registers their parameters under torchvision's (or Caffe's) names, in registration order.
#pragma once

#include <memory>
#include <string>

#include "scaletrain/models/model.hpp"
#include "scaletrain/nn/aux_head.hpp"
#include "scaletrain/nn/blocks.hpp"
#include "scaletrain/nn/dropout.hpp"
#include "scaletrain/nn/layers.hpp"
#include "scaletrain/nn/pooling.hpp"

namespace scaletrain::models::cnn {

// torchvision's BasicConv2d (GoogLeNet, Inception-v3): "<prefix>.conv" (no bias) then
// "<prefix>.bn" (eps 0.001) with the in-place ReLU after it (BatchNormReLU). spec gives kernel, stride and padding; its
// init is the weight's (trunc_normal).
inline void basic_conv(nn::Sequential& seq, nn::ParameterSet& params, const std::string& prefix, int in_channels,
                       int out_channels, nn::ConvSpec spec) {
  spec.bias = false;
  seq.emplace<nn::Conv2d>(params, prefix + ".conv", in_channels, out_channels, spec);
  seq.emplace<nn::BatchNormReLU>(params, prefix + ".bn", out_channels, ops::BatchNormParams{1e-3f, 0.1f});
}

// A max pool with PyTorch's (or Caffe's) ceil_mode.
inline ops::MaxPool2dParams max_pool(int kernel, int stride, int padding, bool ceil_mode) {
  ops::MaxPool2dParams p;
  p.kernel = kernel;
  p.stride = stride;
  p.padding = padding;
  p.ceil_mode = ceil_mode;
  return p;
}

// An average pool as F.avg_pool2d(kernel, stride, padding) with its defaults (count_include_pad).
inline ops::AvgPool2dParams avg_pool(int kernel, int stride, int padding, bool ceil_mode = false) {
  ops::AvgPool2dParams p;
  p.kernel = kernel;
  p.stride = stride;
  p.padding = padding;
  p.ceil_mode = ceil_mode;
  p.count_include_pad = true;
  return p;
}

// The output channels of one GoogLeNet inception block: its 1x1 branch, its 3x3 branch's reduce
// and 3x3, its "5x5" branch's reduce and convolution, and the pool branch's projection.
struct InceptionChannels {
  int ch1x1, ch3x3red, ch3x3, ch5x5red, ch5x5, pool_proj;
  int out() const { return ch1x1 + ch3x3 + ch5x5 + pool_proj; }
};

// GoogLeNet's blocks (Szegedy et al. 2014, table 1), the same in torchvision's and Caffe's form.
constexpr InceptionChannels kInception3a{64, 96, 128, 16, 32, 32};
constexpr InceptionChannels kInception3b{128, 128, 192, 32, 96, 64};
constexpr InceptionChannels kInception4a{192, 96, 208, 16, 48, 64};
constexpr InceptionChannels kInception4b{160, 112, 224, 24, 64, 64};
constexpr InceptionChannels kInception4c{128, 128, 256, 24, 64, 64};
constexpr InceptionChannels kInception4d{112, 144, 288, 32, 64, 64};
constexpr InceptionChannels kInception4e{256, 160, 320, 32, 128, 128};
constexpr InceptionChannels kInception5a{256, 160, 320, 32, 128, 128};
constexpr InceptionChannels kInception5b{384, 192, 384, 48, 128, 128};

// A Dropout layer of the model's stream: layers are numbered in the order they are built, which
// must be the order torchvision registers its nn.Dropout modules (the masks' keys depend on it).
inline void dropout(nn::Sequential& seq, Model& model, double p) { seq.emplace<nn::Dropout>(model.random_stream(), p); }

// The first parameter index a head built from now on will have.
inline int next_parameter(Model& model) { return model.params().num_parameters(); }

}  // namespace scaletrain::models::cnn
