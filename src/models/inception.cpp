// Inception-v3 as torchvision 0.14's (Szegedy et al. 2015, "Rethinking the Inception
// Architecture"): the stem, Mixed_5b-5d (InceptionA), Mixed_6a (B), Mixed_6b-6e (C, with the 1x7
// and 7x1 factorised convolutions), Mixed_7a (D), Mixed_7b-7c (E, whose 3x3 branches split into
// 1x3 and 3x1 halves), average pool, dropout 0.5 and fc. AuxLogits branches off after Mixed_6e in
// training (nn/aux_head.hpp) and is registered there. It needs a 17x17 Mixed_6e map, so an input
// of at least 299x299; without it (--aux-loss-weight 0) 75x75 is the smallest input.
// Initialisation as torchvision's loop over modules: trunc_normal_(std, a=-2, b=2) with std the
// module's own `stddev` attribute or 0.1; AuxLogits.fc has 0.001, and AuxLogits.conv1's 0.01 is
// set on the BasicConv2d wrapper, which the loop does not look at, so its convolution gets 0.1 too.
#include "models/cnn_blocks.hpp"
#include "scaletrain/models/imagenet_cnns.hpp"

namespace scaletrain::models {

namespace {

using nn::ConvSpec;
using nn::Init;

const Init kWeights = Init::trunc_normal(0.1);

void conv(nn::Sequential& seq, nn::ParameterSet& params, const std::string& prefix, int in_channels, int out_channels,
          int kernel, int stride = 1, int padding = 0) {
  cnn::basic_conv(seq, params, prefix, in_channels, out_channels,
                  ConvSpec::square(kernel, stride, padding).with_init(kWeights));
}

// A factorised convolution: (kernel_h, kernel_w) with padding (pad_h, pad_w), stride 1.
void conv_rect(nn::Sequential& seq, nn::ParameterSet& params, const std::string& prefix, int in_channels,
               int out_channels, int kernel_h, int kernel_w, int pad_h, int pad_w) {
  cnn::basic_conv(seq, params, prefix, in_channels, out_channels,
                  ConvSpec::rect(kernel_h, kernel_w, pad_h, pad_w).with_init(kWeights));
}

// F.avg_pool2d(kernel_size=3, stride=1, padding=1), then branch_pool (1x1).
void pool_branch(nn::Branches& block, nn::ParameterSet& params, const std::string& name, int in_channels,
                 int out_channels) {
  nn::Sequential& b = block.add_branch();
  b.emplace<nn::AvgPool2d>(cnn::avg_pool(3, 1, 1));
  conv(b, params, name + ".branch_pool", in_channels, out_channels, 1);
}

// [branch1x1, branch5x5 (1x1, 5x5), branch3x3dbl (1x1, 3x3, 3x3), branch_pool]: 64+64+96+pool.
int inception_a(nn::Sequential& net, nn::ParameterSet& params, const std::string& name, int in, int pool_features) {
  auto& block = net.emplace<nn::Branches>();
  conv(block.add_branch(), params, name + ".branch1x1", in, 64, 1);
  nn::Sequential& b5 = block.add_branch();
  conv(b5, params, name + ".branch5x5_1", in, 48, 1);
  conv(b5, params, name + ".branch5x5_2", 48, 64, 5, 1, 2);
  nn::Sequential& b3 = block.add_branch();
  conv(b3, params, name + ".branch3x3dbl_1", in, 64, 1);
  conv(b3, params, name + ".branch3x3dbl_2", 64, 96, 3, 1, 1);
  conv(b3, params, name + ".branch3x3dbl_3", 96, 96, 3, 1, 1);
  pool_branch(block, params, name, in, pool_features);
  return 64 + 64 + 96 + pool_features;
}

// [branch3x3 (3x3 stride 2), branch3x3dbl (1x1, 3x3, 3x3 stride 2), max pool 3x3 stride 2].
int inception_b(nn::Sequential& net, nn::ParameterSet& params, const std::string& name, int in) {
  auto& block = net.emplace<nn::Branches>();
  conv(block.add_branch(), params, name + ".branch3x3", in, 384, 3, 2);
  nn::Sequential& b3 = block.add_branch();
  conv(b3, params, name + ".branch3x3dbl_1", in, 64, 1);
  conv(b3, params, name + ".branch3x3dbl_2", 64, 96, 3, 1, 1);
  conv(b3, params, name + ".branch3x3dbl_3", 96, 96, 3, 2);
  block.add_branch().emplace<nn::MaxPool2d>(cnn::max_pool(3, 2, 0, false));
  return 384 + 96 + in;
}

// [branch1x1, branch7x7 (1x1, 1x7, 7x1), branch7x7dbl (1x1, 7x1, 1x7, 7x1, 1x7), branch_pool]: 4 x 192.
int inception_c(nn::Sequential& net, nn::ParameterSet& params, const std::string& name, int in, int c7) {
  auto& block = net.emplace<nn::Branches>();
  conv(block.add_branch(), params, name + ".branch1x1", in, 192, 1);
  nn::Sequential& b7 = block.add_branch();
  conv(b7, params, name + ".branch7x7_1", in, c7, 1);
  conv_rect(b7, params, name + ".branch7x7_2", c7, c7, 1, 7, 0, 3);
  conv_rect(b7, params, name + ".branch7x7_3", c7, 192, 7, 1, 3, 0);
  nn::Sequential& bd = block.add_branch();
  conv(bd, params, name + ".branch7x7dbl_1", in, c7, 1);
  conv_rect(bd, params, name + ".branch7x7dbl_2", c7, c7, 7, 1, 3, 0);
  conv_rect(bd, params, name + ".branch7x7dbl_3", c7, c7, 1, 7, 0, 3);
  conv_rect(bd, params, name + ".branch7x7dbl_4", c7, c7, 7, 1, 3, 0);
  conv_rect(bd, params, name + ".branch7x7dbl_5", c7, 192, 1, 7, 0, 3);
  pool_branch(block, params, name, in, 192);
  return 4 * 192;
}

// [branch3x3 (1x1, 3x3 stride 2), branch7x7x3 (1x1, 1x7, 7x1, 3x3 stride 2), max pool 3x3 stride 2].
int inception_d(nn::Sequential& net, nn::ParameterSet& params, const std::string& name, int in) {
  auto& block = net.emplace<nn::Branches>();
  nn::Sequential& b3 = block.add_branch();
  conv(b3, params, name + ".branch3x3_1", in, 192, 1);
  conv(b3, params, name + ".branch3x3_2", 192, 320, 3, 2);
  nn::Sequential& b7 = block.add_branch();
  conv(b7, params, name + ".branch7x7x3_1", in, 192, 1);
  conv_rect(b7, params, name + ".branch7x7x3_2", 192, 192, 1, 7, 0, 3);
  conv_rect(b7, params, name + ".branch7x7x3_3", 192, 192, 7, 1, 3, 0);
  conv(b7, params, name + ".branch7x7x3_4", 192, 192, 3, 2);
  block.add_branch().emplace<nn::MaxPool2d>(cnn::max_pool(3, 2, 0, false));
  return 320 + 192 + in;
}

// The 1x3 and 3x1 halves that InceptionE concatenates after a shared first convolution.
void split_3x3(nn::Sequential& branch, nn::ParameterSet& params, const std::string& a, const std::string& b, int in) {
  auto& halves = branch.emplace<nn::Branches>();
  conv_rect(halves.add_branch(), params, a, in, 384, 1, 3, 0, 1);
  conv_rect(halves.add_branch(), params, b, in, 384, 3, 1, 1, 0);
}

// [branch1x1 (320), branch3x3 (1x1, [1x3, 3x1]), branch3x3dbl (1x1, 3x3, [1x3, 3x1]), branch_pool]:
// 320 + 768 + 768 + 192.
int inception_e(nn::Sequential& net, nn::ParameterSet& params, const std::string& name, int in) {
  auto& block = net.emplace<nn::Branches>();
  conv(block.add_branch(), params, name + ".branch1x1", in, 320, 1);
  nn::Sequential& b3 = block.add_branch();
  conv(b3, params, name + ".branch3x3_1", in, 384, 1);
  split_3x3(b3, params, name + ".branch3x3_2a", name + ".branch3x3_2b", 384);
  nn::Sequential& bd = block.add_branch();
  conv(bd, params, name + ".branch3x3dbl_1", in, 448, 1);
  conv(bd, params, name + ".branch3x3dbl_2", 448, 384, 3, 1, 1);
  split_3x3(bd, params, name + ".branch3x3dbl_3a", name + ".branch3x3dbl_3b", 384);
  pool_branch(block, params, name, in, 192);
  return 320 + 768 + 768 + 192;
}

// InceptionAux: average pool 5x5 stride 3, conv0 (1x1, 128), conv1 (5x5, 768), global average
// pool, fc (std 0.001). No dropout.
nn::ModulePtr aux_logits(nn::ParameterSet& params, int in, int num_classes) {
  auto head = std::make_unique<nn::Sequential>();
  head->emplace<nn::AvgPool2d>(cnn::avg_pool(5, 3, 0));
  conv(*head, params, "AuxLogits.conv0", in, 128, 1);
  conv(*head, params, "AuxLogits.conv1", 128, 768, 5);
  head->emplace<nn::GlobalAvgPool>();
  head->emplace<nn::Linear>(params, "AuxLogits.fc", 768, num_classes, Init::trunc_normal(0.001));
  return head;
}

}  // namespace

std::unique_ptr<Model> make_inception_v3(int num_classes, int in_channels) {
  auto model = std::make_unique<Model>("inception_v3", num_classes, in_channels);
  nn::ParameterSet& params = model->params();
  auto net = std::make_unique<nn::Sequential>();
  conv(*net, params, "Conv2d_1a_3x3", in_channels, 32, 3, 2);
  conv(*net, params, "Conv2d_2a_3x3", 32, 32, 3);
  conv(*net, params, "Conv2d_2b_3x3", 32, 64, 3, 1, 1);
  net->emplace<nn::MaxPool2d>(cnn::max_pool(3, 2, 0, false));
  conv(*net, params, "Conv2d_3b_1x1", 64, 80, 1);
  conv(*net, params, "Conv2d_4a_3x3", 80, 192, 3);
  net->emplace<nn::MaxPool2d>(cnn::max_pool(3, 2, 0, false));
  int c = inception_a(*net, params, "Mixed_5b", 192, 32);
  c = inception_a(*net, params, "Mixed_5c", c, 64);
  c = inception_a(*net, params, "Mixed_5d", c, 64);
  c = inception_b(*net, params, "Mixed_6a", c);
  c = inception_c(*net, params, "Mixed_6b", c, 128);
  c = inception_c(*net, params, "Mixed_6c", c, 160);
  c = inception_c(*net, params, "Mixed_6d", c, 160);
  c = inception_c(*net, params, "Mixed_6e", c, 192);
  auto& tap = net->emplace<nn::AuxTap>(model->aux_heads(), params);
  const int first = cnn::next_parameter(*model);
  tap.set_head(aux_logits(params, c, num_classes), first);
  c = inception_d(*net, params, "Mixed_7a", c);
  c = inception_e(*net, params, "Mixed_7b", c);
  c = inception_e(*net, params, "Mixed_7c", c);
  net->emplace<nn::GlobalAvgPool>();
  cnn::dropout(*net, *model, 0.5);
  net->emplace<nn::Linear>(params, "fc", c, num_classes, kWeights);
  model->set_network(std::move(net));
  return model;
}

}  // namespace scaletrain::models
