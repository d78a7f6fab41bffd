// The BVLC Caffe reference models the LRZ study ran with NVCaffe (BVLC/caffe, models/bvlc_alexnet
// and models/bvlc_googlenet, train_val.prototxt), as their own models beside torchvision's:
//   alexnet-caffe:   conv1 (96, 11x11 stride 4), LRN, pool, conv2 (256, 5x5, 2 groups), LRN, pool,
//                    conv3, conv4 and conv5 (2 groups each), pool, fc6, fc7 (dropout after each),
//                    fc8; 227x227 input. Fillers: gaussian 0.01 (fc6, fc7: 0.005), biases 0 or 1
//                    (conv2, conv4, conv5, fc6, fc7: 0.1).
//   googlenet-caffe: biases and ReLU on every convolution, no batch norm, LRN after pool1 and
//                    conv2, real 5x5 convolutions, a 3x3 pool4, a 7x7 average pool and dropout 0.4
//                    before loss3/classifier; loss1 and loss2 (average pool 5x5 stride 3, conv 1x1,
//                    fc 1024, dropout 0.7, classifier) after inception_4a and inception_4d, with
//                    their parameters where the prototxt puts them. Fillers: xavier, conv and fc
//                    biases 0.2, classifier biases 0. 224x224 input.
// Caffe pools round up (ceil_mode) and count an average pool's padding as PyTorch does with
// count_include_pad; its LRN is PyTorch's LocalResponseNorm(5, 1e-4, 0.75, 1). Parameter names are
// the prototxt's layer names with '/' written '.' (an HDF5 path separator otherwise):
// conv1/7x7_s2 -> conv1.7x7_s2.weight (docs/checkpoint-format.md).
#include "models/cnn_blocks.hpp"
#include "scaletrain/models/imagenet_cnns.hpp"

namespace scaletrain::models {

namespace {

using nn::ConvSpec;
using nn::Init;

// Caffe's LRN layer as the two prototxts set it: local_size 5, alpha 1e-4, beta 0.75, k 1.
ops::LrnParams caffe_lrn() { return ops::LrnParams{5, 1e-4f, 0.75f, 1.0f}; }

// A convolution with bias and its in-place ReLU, as every Caffe convolution here is.
void conv_relu(nn::Sequential& seq, nn::ParameterSet& params, const std::string& name, int in_channels,
               int out_channels, ConvSpec spec) {
  seq.emplace<nn::ConvReLU>(params, name, in_channels, out_channels, spec.with_bias());
}

ConvSpec alexnet_conv(int kernel, int stride, int padding, int groups, double bias) {
  return ConvSpec::square(kernel, stride, padding).with_groups(groups).with_init(Init::gaussian(0.01, bias));
}

}  // namespace

std::unique_ptr<Model> make_alexnet_caffe(int num_classes, int in_channels) {
  auto model = std::make_unique<Model>("alexnet-caffe", num_classes, in_channels);
  nn::ParameterSet& params = model->params();
  auto net = std::make_unique<nn::Sequential>();
  conv_relu(*net, params, "conv1", in_channels, 96, alexnet_conv(11, 4, 0, 1, 0.0));
  net->emplace<nn::LocalResponseNorm>(caffe_lrn());
  net->emplace<nn::MaxPool2d>(cnn::max_pool(3, 2, 0, true));
  conv_relu(*net, params, "conv2", 96, 256, alexnet_conv(5, 1, 2, 2, 0.1));
  net->emplace<nn::LocalResponseNorm>(caffe_lrn());
  net->emplace<nn::MaxPool2d>(cnn::max_pool(3, 2, 0, true));
  conv_relu(*net, params, "conv3", 256, 384, alexnet_conv(3, 1, 1, 1, 0.0));
  conv_relu(*net, params, "conv4", 384, 384, alexnet_conv(3, 1, 1, 2, 0.1));
  conv_relu(*net, params, "conv5", 384, 256, alexnet_conv(3, 1, 1, 2, 0.1));
  net->emplace<nn::MaxPool2d>(cnn::max_pool(3, 2, 0, true));
  net->emplace<nn::FlattenCHW>();
  net->emplace<nn::Linear>(params, "fc6", 256 * 6 * 6, 4096, Init::gaussian(0.005, 0.1));
  net->emplace<nn::ReLU>(true);
  cnn::dropout(*net, *model, 0.5);
  net->emplace<nn::Linear>(params, "fc7", 4096, 4096, Init::gaussian(0.005, 0.1));
  net->emplace<nn::ReLU>(true);
  cnn::dropout(*net, *model, 0.5);
  net->emplace<nn::Linear>(params, "fc8", 4096, num_classes, Init::gaussian(0.01, 0.0));
  model->set_network(std::move(net));
  return model;
}

namespace {

const Init kXavierConv = Init::xavier_fan_in(0.2);

void gconv(nn::Sequential& seq, nn::ParameterSet& params, const std::string& name, int in_channels, int out_channels,
           int kernel, int stride = 1, int padding = 0) {
  conv_relu(seq, params, name, in_channels, out_channels,
            ConvSpec::square(kernel, stride, padding).with_init(kXavierConv));
}

// inception_Nx: 1x1; 3x3_reduce, 3x3; 5x5_reduce, 5x5; pool (3x3 stride 1), pool_proj.
int inception(nn::Sequential& net, nn::ParameterSet& params, const std::string& name, int in,
              const cnn::InceptionChannels& c) {
  auto& block = net.emplace<nn::Branches>();
  gconv(block.add_branch(), params, name + ".1x1", in, c.ch1x1, 1);
  nn::Sequential& b3 = block.add_branch();
  gconv(b3, params, name + ".3x3_reduce", in, c.ch3x3red, 1);
  gconv(b3, params, name + ".3x3", c.ch3x3red, c.ch3x3, 3, 1, 1);
  nn::Sequential& b5 = block.add_branch();
  gconv(b5, params, name + ".5x5_reduce", in, c.ch5x5red, 1);
  gconv(b5, params, name + ".5x5", c.ch5x5red, c.ch5x5, 5, 1, 2);
  nn::Sequential& bp = block.add_branch();
  bp.emplace<nn::MaxPool2d>(cnn::max_pool(3, 1, 1, true));
  gconv(bp, params, name + ".pool_proj", in, c.pool_proj, 1);
  return c.out();
}

// lossN: ave_pool (5x5 stride 3), conv (1x1, 128), fc (1024), drop_fc (0.7), classifier.
nn::ModulePtr loss_head(Model& model, const std::string& name, int in, int num_classes) {
  nn::ParameterSet& params = model.params();
  auto head = std::make_unique<nn::Sequential>();
  head->emplace<nn::AvgPool2d>(cnn::avg_pool(5, 3, 0, true));
  gconv(*head, params, name + ".conv", in, 128, 1);
  head->emplace<nn::FlattenCHW>();
  head->emplace<nn::Linear>(params, name + ".fc", 128 * 4 * 4, 1024, Init::xavier_fan_in(0.2));
  head->emplace<nn::ReLU>(true);
  cnn::dropout(*head, model, 0.7);
  head->emplace<nn::Linear>(params, name + ".classifier", 1024, num_classes, Init::xavier_fan_in(0.0));
  return head;
}

// An auxiliary loss head right here, its parameters registered now (the prototxt's order).
void tap_loss_head(nn::Sequential& net, Model& model, const std::string& name, int in, int num_classes) {
  auto& tap = net.emplace<nn::AuxTap>(model.aux_heads(), model.params());
  const int first = cnn::next_parameter(model);
  tap.set_head(loss_head(model, name, in, num_classes), first);
}

}  // namespace

std::unique_ptr<Model> make_googlenet_caffe(int num_classes, int in_channels) {
  auto model = std::make_unique<Model>("googlenet-caffe", num_classes, in_channels);
  nn::ParameterSet& params = model->params();
  auto net = std::make_unique<nn::Sequential>();
  gconv(*net, params, "conv1.7x7_s2", in_channels, 64, 7, 2, 3);
  net->emplace<nn::MaxPool2d>(cnn::max_pool(3, 2, 0, true));
  net->emplace<nn::LocalResponseNorm>(caffe_lrn());
  gconv(*net, params, "conv2.3x3_reduce", 64, 64, 1);
  gconv(*net, params, "conv2.3x3", 64, 192, 3, 1, 1);
  net->emplace<nn::LocalResponseNorm>(caffe_lrn());
  net->emplace<nn::MaxPool2d>(cnn::max_pool(3, 2, 0, true));
  int c = inception(*net, params, "inception_3a", 192, cnn::kInception3a);
  c = inception(*net, params, "inception_3b", c, cnn::kInception3b);
  net->emplace<nn::MaxPool2d>(cnn::max_pool(3, 2, 0, true));
  c = inception(*net, params, "inception_4a", c, cnn::kInception4a);
  tap_loss_head(*net, *model, "loss1", c, num_classes);
  c = inception(*net, params, "inception_4b", c, cnn::kInception4b);
  c = inception(*net, params, "inception_4c", c, cnn::kInception4c);
  c = inception(*net, params, "inception_4d", c, cnn::kInception4d);
  tap_loss_head(*net, *model, "loss2", c, num_classes);
  c = inception(*net, params, "inception_4e", c, cnn::kInception4e);
  net->emplace<nn::MaxPool2d>(cnn::max_pool(3, 2, 0, true));
  c = inception(*net, params, "inception_5a", c, cnn::kInception5a);
  c = inception(*net, params, "inception_5b", c, cnn::kInception5b);
  net->emplace<nn::AvgPool2d>(cnn::avg_pool(7, 1, 0));
  net->emplace<nn::FlattenCHW>();  // 1x1 x 1024: the order is the same either way
  cnn::dropout(*net, *model, 0.4);
  net->emplace<nn::Linear>(params, "loss3.classifier", c, num_classes, Init::xavier_fan_in(0.0));
  model->set_network(std::move(net));
  return model;
}

}  // namespace scaletrain::models
