// GoogLeNet as torchvision 0.14's (Szegedy et al. 2014 with batch norm after every convolution,
// BasicConv2d): the 3x3 convolution of its "5x5" branch (pytorch/vision#906) and the 2x2 max pool
// after inception4e are torchvision's. The two auxiliary heads branch off after inception4a (aux1)
// and inception4d (aux2) in training (nn/aux_head.hpp) and are registered after inception5b, as
// torchvision registers them. Initialisation: every conv and linear weight trunc_normal_(0.01,
// a=-2, b=2), linear biases PyTorch's default, batch norm 1 and 0. transform_input is off, as
// torchvision's for a model without pretrained weights.
#include "models/cnn_blocks.hpp"
#include "scaletrain/models/imagenet_cnns.hpp"

namespace scaletrain::models {

namespace {

using nn::ConvSpec;
using nn::Init;

const Init kWeights = Init::trunc_normal(0.01);

void conv(nn::Sequential& seq, nn::ParameterSet& params, const std::string& prefix, int in_channels, int out_channels,
          int kernel, int stride = 1, int padding = 0) {
  cnn::basic_conv(seq, params, prefix, in_channels, out_channels,
                  ConvSpec::square(kernel, stride, padding).with_init(kWeights));
}

// torchvision's Inception: branch1 (1x1), branch2 (1x1, 3x3), branch3 (1x1, 3x3), branch4 (3x3
// max pool stride 1 ceil, 1x1), concatenated in that order.
int inception(nn::Sequential& net, nn::ParameterSet& params, const std::string& name, int in_channels,
              const cnn::InceptionChannels& c) {
  auto& block = net.emplace<nn::Branches>();
  conv(block.add_branch(), params, name + ".branch1", in_channels, c.ch1x1, 1);
  nn::Sequential& b2 = block.add_branch();
  conv(b2, params, name + ".branch2.0", in_channels, c.ch3x3red, 1);
  conv(b2, params, name + ".branch2.1", c.ch3x3red, c.ch3x3, 3, 1, 1);
  nn::Sequential& b3 = block.add_branch();
  conv(b3, params, name + ".branch3.0", in_channels, c.ch5x5red, 1);
  conv(b3, params, name + ".branch3.1", c.ch5x5red, c.ch5x5, 3, 1, 1);
  nn::Sequential& b4 = block.add_branch();
  b4.emplace<nn::MaxPool2d>(cnn::max_pool(3, 1, 1, true));
  conv(b4, params, name + ".branch4.1", in_channels, c.pool_proj, 1);
  return c.out();
}

// torchvision's InceptionAux: adaptive average pool to 4x4, conv (1x1, 128), NCHW flatten, fc1
// (2048 -> 1024), ReLU, dropout 0.7, fc2 (1024 -> classes).
nn::ModulePtr aux_head(Model& model, const std::string& name, int in_channels, int num_classes) {
  nn::ParameterSet& params = model.params();
  auto head = std::make_unique<nn::Sequential>();
  head->emplace<nn::AdaptiveAvgPool2d>(4, 4);
  conv(*head, params, name + ".conv", in_channels, 128, 1);
  head->emplace<nn::FlattenCHW>();
  head->emplace<nn::Linear>(params, name + ".fc1", 2048, 1024, kWeights);
  head->emplace<nn::ReLU>(true);
  cnn::dropout(*head, model, 0.7);
  head->emplace<nn::Linear>(params, name + ".fc2", 1024, num_classes, kWeights);
  return head;
}

}  // namespace

std::unique_ptr<Model> make_googlenet(int num_classes, int in_channels) {
  auto model = std::make_unique<Model>("googlenet", num_classes, in_channels);
  nn::ParameterSet& params = model->params();
  auto net = std::make_unique<nn::Sequential>();
  conv(*net, params, "conv1", in_channels, 64, 7, 2, 3);
  net->emplace<nn::MaxPool2d>(cnn::max_pool(3, 2, 0, true));
  conv(*net, params, "conv2", 64, 64, 1);
  conv(*net, params, "conv3", 64, 192, 3, 1, 1);
  net->emplace<nn::MaxPool2d>(cnn::max_pool(3, 2, 0, true));
  int c = inception(*net, params, "inception3a", 192, cnn::kInception3a);
  c = inception(*net, params, "inception3b", c, cnn::kInception3b);
  net->emplace<nn::MaxPool2d>(cnn::max_pool(3, 2, 0, true));
  c = inception(*net, params, "inception4a", c, cnn::kInception4a);
  const int aux1_in = c;
  auto& aux1 = net->emplace<nn::AuxTap>(model->aux_heads(), params);
  c = inception(*net, params, "inception4b", c, cnn::kInception4b);
  c = inception(*net, params, "inception4c", c, cnn::kInception4c);
  c = inception(*net, params, "inception4d", c, cnn::kInception4d);
  const int aux2_in = c;
  auto& aux2 = net->emplace<nn::AuxTap>(model->aux_heads(), params);
  c = inception(*net, params, "inception4e", c, cnn::kInception4e);
  net->emplace<nn::MaxPool2d>(cnn::max_pool(2, 2, 0, true));
  c = inception(*net, params, "inception5a", c, cnn::kInception5a);
  c = inception(*net, params, "inception5b", c, cnn::kInception5b);
  // The heads' parameters here, after inception5b, and their dropouts before the main one.
  int first = cnn::next_parameter(*model);
  aux1.set_head(aux_head(*model, "aux1", aux1_in, num_classes), first);
  first = cnn::next_parameter(*model);
  aux2.set_head(aux_head(*model, "aux2", aux2_in, num_classes), first);
  net->emplace<nn::GlobalAvgPool>();
  cnn::dropout(*net, *model, 0.2);
  net->emplace<nn::Linear>(params, "fc", c, num_classes, kWeights);
  model->set_network(std::move(net));
  return model;
}

}  // namespace scaletrain::models
