// Local response normalisation across channels: the argument checks and their messages, and the
// definition at the edges, by hand: one channel (the window is wider than C on both sides, alpha is
// still divided by the size) and size 1. The kernels against the float64 reference (C = 3 < size,
// 96 channels, values at AlexNet's scale, size 3 with k = 2, AlexNet's norm1 at full size) and the
// backward against central differences are op cases (tests/support/op_cases.cpp).
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <string>

#include "scaletrain/core/error.hpp"
#include "scaletrain/ops/lrn.hpp"
#include "support/gradcheck.hpp"

namespace st = scaletrain;
using st::test::check_throws;
using st::test::nan_tensor;
using st::test::to_tensor;
using st::test::to_vector;

BOOST_AUTO_TEST_SUITE(lrn)

BOOST_AUTO_TEST_CASE(argument_checks) {
  st::Context ctx;
  const st::Tensor x = st::Tensor::zeros({2, 3, 3, 4}), dy = st::Tensor::zeros({2, 3, 3, 4});
  st::Tensor y = st::Tensor::zeros({2, 3, 3, 4}), dx = st::Tensor::zeros({2, 3, 3, 4});
  const st::ops::LrnParams p;
  check_throws(
      [&] {
        st::ops::lrn_forward(ctx, {4, 1e-4f, 0.75f, 1.0f}, x, y);
      },
      {"lrn_forward: size must be odd", "got 4"});
  check_throws([&] { st::ops::lrn_forward(ctx, {0, 1e-4f, 0.75f, 1.0f}, x, y); }, {"size must be odd and >= 1"});
  check_throws(
      [&] {
        st::ops::lrn_backward(ctx, {5, 1e-4f, 0.75f, 0.0f}, x, dy, dx);
      },
      {"lrn_backward: k must be finite and > 0, got 0"});
  check_throws([&] { st::ops::lrn_forward(ctx, {5, -1.0f, 0.75f, 1.0f}, x, y); }, {"alpha must be finite and >= 0"});
  check_throws([&] { st::ops::lrn_forward(ctx, {5, 1e-4f, -0.5f, 1.0f}, x, y); }, {"beta must be finite and >= 0"});
  check_throws([&] { st::ops::lrn_forward(ctx, {5, 1e-4f, NAN, 1.0f}, x, y); }, {"beta must be finite"});
  st::Tensor y_wrong = st::Tensor::zeros({2, 3, 3, 5});
  check_throws([&] { st::ops::lrn_forward(ctx, p, x, y_wrong); }, {"y has shape [2, 3, 3, 5], expected [2, 3, 3, 4]"});
  const st::Tensor x1 = st::Tensor::zeros({4});
  st::Tensor y1 = st::Tensor::zeros({4});
  check_throws([&] { st::ops::lrn_forward(ctx, p, x1, y1); }, {"x must be (..., C) with at least 2 dimensions"});
  st::Tensor same = x;
  check_throws([&] { st::ops::lrn_forward(ctx, p, x, same); }, {"y overlaps x"});
  st::Tensor dy_alias = dy;
  check_throws([&] { st::ops::lrn_backward(ctx, p, x, dy, dy_alias); }, {"dx overlaps dy"});
  st::Tensor dx_wrong = st::Tensor::zeros({2, 3, 4, 3});
  check_throws([&] { st::ops::lrn_backward(ctx, p, x, dy, dx_wrong); }, {"dx has shape"});
}

BOOST_AUTO_TEST_CASE(edges_by_hand) {
  st::Context ctx;
  // One channel, size 5: s = k + alpha / 5 * x^2 (the clipped window holds x alone).
  const double alpha = 0.5, beta = 0.75, k = 2.0;
  const std::vector<double> xv{-3.0, -0.5, 0.0, 1.25, 4.0, 7.5};
  const st::Tensor x = to_tensor(xv, {6, 1});
  st::Tensor y = nan_tensor({6, 1});
  st::ops::lrn_forward(ctx, {5, static_cast<float>(alpha), static_cast<float>(beta), static_cast<float>(k)}, x, y);
  const std::vector<double> got = to_vector(y);
  for (std::size_t i = 0; i < xv.size(); ++i) {
    const double want = xv[i] * std::pow(k + alpha / 5.0 * xv[i] * xv[i], -beta);
    BOOST_TEST(std::fabs(got[i] - want) <= 1e-6 * std::fabs(want) + 1e-7, i << ": " << got[i] << " vs " << want);
  }
  // Size 1: y = x * (k + alpha * x^2)^-beta channel by channel; dy/dx = s^-beta - 2 alpha beta x^2 s^(-beta-1).
  const st::Tensor x3 = to_tensor({1.0, -2.0, 3.0}, {1, 3});
  st::Tensor y3 = nan_tensor({1, 3}), dx3 = nan_tensor({1, 3});
  const st::ops::LrnParams one{1, static_cast<float>(alpha), static_cast<float>(beta), static_cast<float>(k)};
  st::ops::lrn_forward(ctx, one, x3, y3);
  st::ops::lrn_backward(ctx, one, x3, to_tensor({1.0, 1.0, 1.0}, {1, 3}), dx3);
  const std::vector<double> yv = to_vector(y3), dxv = to_vector(dx3);
  for (int c = 0; c < 3; ++c) {
    const double v = c == 0 ? 1.0 : (c == 1 ? -2.0 : 3.0), s = k + alpha * v * v;
    const double want_y = v * std::pow(s, -beta),
                 want_dx = std::pow(s, -beta) - 2 * alpha * beta * v * v * std::pow(s, -beta - 1);
    BOOST_TEST(std::fabs(yv[c] - want_y) <= 1e-6 * std::fabs(want_y), c << ": y " << yv[c] << " vs " << want_y);
    BOOST_TEST(std::fabs(dxv[c] - want_dx) <= 1e-6 * std::fabs(want_dx) + 1e-7,
               c << ": dx " << dxv[c] << " vs " << want_dx);
  }
}

BOOST_AUTO_TEST_SUITE_END()
