// The parameter-free layers of include/scaletrain/nn/blocks.hpp: LocalResponseNorm and FlattenCHW
// shapes and ops; Branches (Inception's concatenation of parallel branches), nested and with
// convolutions, against central differences of a scalar loss, its gradients marked ready in
// reverse registration order, need_dx = false, the ops it lists against the ops it dispatches, and
// an identity (empty) branch's part of dy added into the other branch's input gradient.
// The ops' values are op cases (tests/support/op_cases.cpp).
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "scaletrain/core/error.hpp"
#include "scaletrain/core/rng.hpp"
#include "scaletrain/nn/blocks.hpp"
#include "scaletrain/ops/registry.hpp"
#include "support/gradcheck.hpp"

using namespace scaletrain;
using scaletrain::test::central_difference;
using scaletrain::test::random_vector;
using scaletrain::test::to_tensor;
using scaletrain::test::to_vector;
using scaletrain::test::weighted_sum;

namespace {

// "a, b, c": the ops, sorted, for a failure message that shows both sides.
std::string names(const ops::OpNames& ops) {
  std::string out;
  for (const std::string& op : ops) out += (out.empty() ? "" : ", ") + op;
  return out;
}

// An Inception-like block on (N, H, W, 3) input, 8 output channels:
//   branch 0: 1x1 conv (3 -> 2), ReLU
//   branch 1: a nested Branches of {3x3 conv pad 1 (3 -> 2)} and {LRN (size 3)}: 2 + 3 channels
//   branch 2: 3x3 max pool stride 1 pad 1, 1x1 conv (3 -> 1), batch norm
// then the NCHW flatten and a linear layer, so that the loss sees every channel at its position.
struct Net {
  nn::ParameterSet ps;
  nn::Sequential seq;
  nn::Branches* block = nullptr;
  nn::Conv2d *conv0 = nullptr, *conv1 = nullptr, *conv2 = nullptr;

  Net(int hw, int classes) {
    block = &seq.emplace<nn::Branches>();
    nn::Sequential& b0 = block->add_branch();
    conv0 = &b0.emplace<nn::Conv2d>(ps, "b0.conv", 3, 2, 1, 1, 0);
    b0.emplace<nn::ReLU>(true);
    nn::Branches& inner = block->add_branch().emplace<nn::Branches>();
    conv1 = &inner.add_branch().emplace<nn::Conv2d>(ps, "b1.a.conv", 3, 2, 3, 1, 1);
    inner.add_branch().emplace<nn::LocalResponseNorm>(ops::LrnParams{3, 1.0f, 0.75f, 2.0f});
    nn::Sequential& b2 = block->add_branch();
    b2.emplace<nn::MaxPool2d>(ops::MaxPool2dParams{3, 1, 1});
    conv2 = &b2.emplace<nn::Conv2d>(ps, "b2.conv", 3, 1, 1, 1, 0);
    b2.emplace<nn::BatchNorm2d>(ps, "b2.bn", 1);
    seq.emplace<nn::FlattenCHW>();
    seq.emplace<nn::Linear>(ps, "fc", 8 * hw * hw, classes);
    ps.finalize();
    Rng rng(7);
    seq.initialize(rng);
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(blocks)

BOOST_AUTO_TEST_CASE(lrn_and_flatten_layers_keep_shapes) {
  Context ctx;
  nn::LocalResponseNorm lrn;
  const Tensor x = to_tensor(random_vector(2 * 3 * 4 * 5, 1), {2, 3, 4, 5});
  Tensor y = lrn.forward(ctx, x, true);
  BOOST_TEST(y.shape() == x.shape());
  BOOST_TEST(lrn.backward(ctx, to_tensor(random_vector(120, 2), {2, 3, 4, 5})).shape() == x.shape());
  BOOST_TEST(!lrn.backward(ctx, to_tensor(random_vector(120, 2), {2, 3, 4, 5}), false).defined());

  nn::FlattenCHW flatten;
  Tensor f = flatten.forward(ctx, x, true);
  BOOST_TEST(f.shape() == (Shape{2, 60}));
  // Feature c*H*W + h*W + w of sample n is x[n][h][w][c].
  const std::vector<double> xv = to_vector(x), fv = to_vector(f);
  BOOST_TEST(fv[1 * 60 + 4 * 12 + 2 * 4 + 3] == xv[((1 * 3 + 2) * 4 + 3) * 5 + 4]);
  Tensor dx = flatten.backward(ctx, f);
  BOOST_TEST(dx.shape() == x.shape());
  BOOST_TEST(to_vector(dx) == xv);  // the inverse
  BOOST_CHECK_THROW(flatten.forward(ctx, Tensor::zeros({2, 60}), true), Error);

  nn::FlattenCHW fresh;
  BOOST_CHECK_THROW(fresh.backward(ctx, f), Error);  // no forward yet
  nn::LocalResponseNorm even(ops::LrnParams{4, 1e-4f, 0.75f, 1.0f});
  BOOST_CHECK_THROW(even.forward(ctx, x, true), Error);

  ops::OpNames listed;
  lrn.list_ops(listed, true);
  flatten.list_ops(listed, true);
  BOOST_TEST(listed == (ops::OpNames{"lrn_forward", "lrn_backward", "flatten_chw_forward", "flatten_chw_backward"}));
}

BOOST_AUTO_TEST_CASE(branches_concatenate_in_registration_order) {
  // Two branches of one layer each: a 1x1 conv and an LRN; the output is [conv | lrn] per pixel.
  nn::ParameterSet ps;
  nn::Branches block;
  nn::Conv2d& conv = block.add_branch().emplace<nn::Conv2d>(ps, "conv", 3, 4, 1, 1, 0);
  nn::LocalResponseNorm& lrn = block.add_branch().emplace<nn::LocalResponseNorm>();
  ps.finalize();
  Rng rng(3);
  block.initialize(rng);
  BOOST_TEST(block.size() == 2u);
  Context ctx;
  const Tensor x = to_tensor(random_vector(2 * 5 * 5 * 3, 4), {2, 5, 5, 3});
  const std::vector<double> y = to_vector(block.forward(ctx, x, true));
  const std::vector<double> a = to_vector(conv.forward(ctx, x, true)), b = to_vector(lrn.forward(ctx, x, true));
  BOOST_REQUIRE_EQUAL(y.size(), a.size() + b.size());
  for (int64_t p = 0; p < 2 * 5 * 5; ++p) {
    for (int c = 0; c < 4; ++c) BOOST_TEST(y[p * 7 + c] == a[p * 4 + c]);
    for (int c = 0; c < 3; ++c) BOOST_TEST(y[p * 7 + 4 + c] == b[p * 3 + c]);
  }
  // Branches whose outputs differ in size cannot be concatenated.
  nn::Branches bad;
  bad.add_branch().emplace<nn::MaxPool2d>(ops::MaxPool2dParams{3, 2, 1});
  bad.add_branch();  // identity: 5x5 against the pool's 3x3
  test::check_throws([&] { bad.forward(ctx, x, true); }, {"concat_channels_forward", "differ"});
  nn::Branches none;
  test::check_throws([&] { none.forward(ctx, x, true); }, {"Branches: no branches"});
}

BOOST_AUTO_TEST_CASE(branches_backward_matches_finite_differences) {
  const int n = 2, hw = 4, classes = 3;
  Net net(hw, classes);
  Context ctx;
  const auto xv = random_vector(n * hw * hw * 3, 11);
  const auto r = random_vector(n * classes, 12);
  Tensor xt = to_tensor(xv, {n, hw, hw, 3});
  auto loss = [&]() { return weighted_sum(net.seq.forward(ctx, xt, true), r); };

  std::vector<int> ready;
  net.ps.set_grad_ready_hook([&](int i) { ready.push_back(i); });
  BOOST_TEST(net.seq.forward(ctx, xt, true).shape() == (Shape{n, classes}));
  const std::vector<double> dx = to_vector(net.seq.backward(ctx, to_tensor(r, {n, classes}), true));
  BOOST_TEST(dx.size() == xv.size());

  // Every parameter marked once, in reverse registration order: fc, branch 2 (bn, conv), the
  // nested branch's conv, branch 0's conv.
  BOOST_REQUIRE_EQUAL(static_cast<int>(ready.size()), net.ps.num_parameters());
  for (std::size_t i = 1; i < ready.size(); ++i) BOOST_TEST(ready[i] < ready[i - 1], "position " << i);

  std::vector<std::vector<double>> grads;
  for (nn::Conv2d* conv : {net.conv0, net.conv1, net.conv2})
    grads.push_back(to_vector(net.ps.grad(conv->weight_index())));

  // h = 1e-2 on the input (as unit.layers), 1e-3 on the weights: at 1e-2 a weight of branch 0's
  // conv moves one of its ReLU's inputs across 0 and the difference quotient straddles the kink.
  const float h = 1e-2f, h_weights = 1e-3f;
  std::vector<double> num, ana;
  for (int64_t i = 0; i < xt.numel(); i += 3) {
    num.push_back(central_difference(loss, xt.data<float>() + i, h));
    ana.push_back(dx[i]);
  }
  ST_CHECK_CLOSE_VECTORS(ana, num, 2e-3, 5e-2);
  const nn::Conv2d* convs[] = {net.conv0, net.conv1, net.conv2};
  for (int k = 0; k < 3; ++k) {
    BOOST_TEST_CONTEXT("conv " << k) {
      float* w = net.ps.value(convs[k]->weight_index()).data<float>();
      std::vector<double> num_w, ana_w;
      for (int64_t i = 0; i < net.ps.value(convs[k]->weight_index()).numel(); ++i) {
        num_w.push_back(central_difference(loss, w + i, h_weights));
        ana_w.push_back(grads[k][i]);
      }
      ST_CHECK_CLOSE_VECTORS(ana_w, num_w, 2e-3, 5e-2);
    }
  }

  // need_dx = false: no input gradient, the parameter gradients the same.
  net.seq.forward(ctx, xt, true);
  net.ps.flat_grads().zero();
  BOOST_TEST(!net.block->backward(ctx, Tensor::zeros({n, hw, hw, 8}), false).defined());
  net.seq.forward(ctx, xt, true);
  BOOST_TEST(!net.seq.backward(ctx, to_tensor(r, {n, classes}), false).defined());
  ST_CHECK_CLOSE_VECTORS(to_vector(net.ps.grad(net.conv0->weight_index())), grads[0], 1e-6, 1e-6);
}

BOOST_AUTO_TEST_CASE(branches_list_the_ops_they_dispatch) {
  const int n = 2, hw = 4, classes = 3;
  Net net(hw, classes);
  Context ctx;
  const Tensor x = to_tensor(random_vector(n * hw * hw * 3, 21), {n, hw, hw, 3});
  // As unit.op_registry records a model: list_ops(training) covers a training step and evaluation.
  ops::OpNames training, evaluation;
  {
    const ops::OpRecorder recorder;
    net.seq.forward(ctx, x, true);
    net.seq.backward(ctx, to_tensor(random_vector(n * classes, 22), {n, classes}), true);
    net.seq.forward(ctx, x, false);
    training = recorder.ops();
  }
  {
    const ops::OpRecorder recorder;
    net.seq.forward(ctx, x, false);
    evaluation = recorder.ops();
  }
  ops::OpNames listed_training, listed_evaluation;
  net.seq.list_ops(listed_training, true);
  net.seq.list_ops(listed_evaluation, false);
  BOOST_TEST(names(listed_training) == names(training));
  BOOST_TEST(names(listed_evaluation) == names(evaluation));
  BOOST_TEST(training.count("concat_channels_backward") == 1u);
  BOOST_TEST(training.count("add_inplace") == 1u);
  // Branch 0 and the nested branch starting with a convolution add their input gradients as the
  // convolution stores them.
  BOOST_TEST(training.count("conv2d_backward_data_add") == 1u);
}

BOOST_AUTO_TEST_CASE(an_identity_branch_adds_its_part_of_dy) {
  // [identity | 1x1 conv]: the identity (an empty branch, not the last) adds its part of dy into
  // the convolution's input gradient, which is computed alone here for the expectation.
  nn::ParameterSet ps;
  nn::Branches block;
  block.add_branch();
  nn::Conv2d& conv = block.add_branch().emplace<nn::Conv2d>(ps, "conv", 3, 4, 1, 1, 0);
  ps.finalize();
  Rng rng(5);
  block.initialize(rng);
  Context ctx;
  const int64_t pixels = 2 * 3 * 3;
  const Tensor x = to_tensor(random_vector(pixels * 3, 6), {2, 3, 3, 3});
  BOOST_TEST(block.forward(ctx, x, true).shape() == (Shape{2, 3, 3, 7}));
  const std::vector<double> dy = random_vector(pixels * 7, 7);
  const std::vector<double> dx = to_vector(block.backward(ctx, to_tensor(dy, {2, 3, 3, 7}), true));
  std::vector<double> conv_dy;
  for (int64_t p = 0; p < pixels; ++p)
    for (int c = 3; c < 7; ++c) conv_dy.push_back(dy[p * 7 + c]);
  conv.forward(ctx, x, true);
  const std::vector<double> conv_dx = to_vector(conv.backward(ctx, to_tensor(conv_dy, {2, 3, 3, 4}), true));
  BOOST_REQUIRE_EQUAL(dx.size(), conv_dx.size());
  for (int64_t p = 0; p < pixels; ++p)
    for (int c = 0; c < 3; ++c) {
      const double want = conv_dx[p * 3 + c] + dy[p * 7 + c];
      BOOST_TEST(std::abs(dx[p * 3 + c] - want) <= 1e-6 * (1.0 + std::abs(want)));
    }
}

BOOST_AUTO_TEST_SUITE_END()
