// AlexNet as torchvision 0.14's (Krizhevsky's one-GPU variant: 64-192-384-256-256 filters, no LRN,
// no groups): features (conv + ReLU, max pools), an adaptive average pool to 6x6, the NCHW
// flatten the classifier's weights expect, and the classifier with dropout before its two hidden
// layers. PyTorch's default initialisation (no override in torchvision): U(+-1/sqrt(fan_in)).
#include "models/cnn_blocks.hpp"
#include "scaletrain/models/imagenet_cnns.hpp"

namespace scaletrain::models {

namespace {

using nn::ConvSpec;
using nn::Init;

void features_conv(nn::Sequential& net, nn::ParameterSet& params, int index, int in_channels, int out_channels,
                   int kernel, int stride, int padding) {
  net.emplace<nn::ConvReLU>(params, "features." + std::to_string(index), in_channels, out_channels,
                            ConvSpec::square(kernel, stride, padding).with_bias().with_init(Init::torch_default()));
}

}  // namespace

std::unique_ptr<Model> make_alexnet(int num_classes, int in_channels) {
  auto model = std::make_unique<Model>("alexnet", num_classes, in_channels);
  nn::ParameterSet& params = model->params();
  auto net = std::make_unique<nn::Sequential>();
  // features: indices as torchvision's nn.Sequential (ReLUs and pools take the others).
  features_conv(*net, params, 0, in_channels, 64, 11, 4, 2);
  net->emplace<nn::MaxPool2d>(cnn::max_pool(3, 2, 0, false));
  features_conv(*net, params, 3, 64, 192, 5, 1, 2);
  net->emplace<nn::MaxPool2d>(cnn::max_pool(3, 2, 0, false));
  features_conv(*net, params, 6, 192, 384, 3, 1, 1);
  features_conv(*net, params, 8, 384, 256, 3, 1, 1);
  features_conv(*net, params, 10, 256, 256, 3, 1, 1);
  net->emplace<nn::MaxPool2d>(cnn::max_pool(3, 2, 0, false));
  net->emplace<nn::AdaptiveAvgPool2d>(6, 6);
  net->emplace<nn::FlattenCHW>();
  // classifier: Dropout, Linear, ReLU, Dropout, Linear, ReLU, Linear.
  cnn::dropout(*net, *model, 0.5);
  net->emplace<nn::Linear>(params, "classifier.1", 256 * 6 * 6, 4096);
  net->emplace<nn::ReLU>(true);
  cnn::dropout(*net, *model, 0.5);
  net->emplace<nn::Linear>(params, "classifier.4", 4096, 4096);
  net->emplace<nn::ReLU>(true);
  net->emplace<nn::Linear>(params, "classifier.6", 4096, num_classes);
  model->set_network(std::move(net));
  return model;
}

}  // namespace scaletrain::models
