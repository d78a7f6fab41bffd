// ReLU and element-wise add: ReLU's backward gated by the forward output and its forward at
// signed zeros, NaN and tiny values, in-place aliasing, argument checks. The kernels' values
// against the float64 reference (inputs at the kink included) and the backward against central
// differences of the forward are op cases (tests/support/op_cases.cpp).
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <limits>
#include <string>

#include "scaletrain/core/error.hpp"
#include "scaletrain/ops/activation.hpp"
#include "support/gradcheck.hpp"
#include "support/reference_activation.hpp"

namespace st = scaletrain;
using scaletrain::test::nan_tensor;

namespace {

// Random floats in [-1, 1) with every fifth value exactly zero (ReLU's kink).
std::vector<double> random_floats(std::size_t n, uint64_t seed) {
  auto v = st::test::random_vector(n, seed);
  for (std::size_t i = 0; i < n; ++i) v[i] = i % 5 == 3 ? 0.0 : static_cast<float>(v[i]);
  return v;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(activation)

// The gradient is gated by the forward output y, not the input: zero where y == 0.
BOOST_AUTO_TEST_CASE(relu_backward_uses_output) {
  st::Context ctx;
  const st::Shape s{6};
  const st::Tensor y = st::test::to_tensor({0.0, 1.5, 0.0, 2.0, 1e-30, 0.0}, s);
  const st::Tensor dy = st::test::to_tensor({1, 2, 3, 4, 5, 6}, s);
  st::Tensor dx = nan_tensor(s);
  st::ops::relu_backward(ctx, y, dy, dx);
  BOOST_TEST(st::test::to_vector(dx) == (std::vector<double>{0, 2, 0, 4, 5, 0}));
  // Forward: negative, zero, positive, and NaN stays NaN (as in PyTorch).
  const st::Tensor x = st::test::to_tensor({-2.0, -0.0, 0.0, 3.0, std::nan(""), -1e-30}, s);
  st::Tensor yx = nan_tensor(s);
  st::ops::relu_forward(ctx, x, yx);
  const auto got = st::test::to_vector(yx);
  BOOST_TEST(got[0] == 0.0);
  BOOST_TEST(got[1] == 0.0);
  BOOST_TEST(got[2] == 0.0);
  BOOST_TEST(got[3] == 3.0);
  BOOST_TEST(std::isnan(got[4]));
  BOOST_TEST(got[5] == 0.0);
}

// Outputs may alias inputs: relu in place, relu backward into dy, add into either operand.
BOOST_AUTO_TEST_CASE(in_place_aliasing) {
  st::Context ctx;
  for (const st::Shape& s : {st::Shape{3, 5, 7, 3}, st::Shape{8, 16, 16, 33}}) {
    BOOST_TEST_CONTEXT("shape " << st::shape_string(s)) {
      const auto x = random_floats(st::shape_numel(s), 21), dy = random_floats(st::shape_numel(s), 22);
      const auto want_y = st::test::reference_relu_forward(x);
      st::Tensor xy = st::test::to_tensor(x, s);
      st::ops::relu_forward(ctx, xy, xy);
      BOOST_TEST(st::test::to_vector(xy) == want_y);
      st::Tensor g = st::test::to_tensor(dy, s);
      st::ops::relu_backward(ctx, xy, g, g);
      BOOST_TEST(st::test::to_vector(g) == st::test::reference_relu_backward(want_y, dy));

      auto want_sum = st::test::reference_add(x, dy);
      for (auto& v : want_sum) v = static_cast<float>(v);
      st::Tensor a = st::test::to_tensor(x, s), b = st::test::to_tensor(dy, s);
      st::ops::add_forward(ctx, a, b, a);
      BOOST_TEST(st::test::to_vector(a) == want_sum);
      a = st::test::to_tensor(x, s);
      st::ops::add_forward(ctx, a, b, b);
      BOOST_TEST(st::test::to_vector(b) == want_sum);
      st::Tensor twice = st::test::to_tensor(x, s);
      st::ops::add_inplace(ctx, twice, twice);
      auto want_twice = x;
      for (auto& v : want_twice) v *= 2;
      BOOST_TEST(st::test::to_vector(twice) == want_twice);
    }
  }
}

BOOST_AUTO_TEST_CASE(argument_checks) {
  st::Context ctx;
  st::Tensor a = st::Tensor::zeros({2, 3}), b = st::Tensor::zeros({3, 2}), c = st::Tensor::zeros({2, 3});
  st::Tensor ai = st::Tensor::zeros({2, 3}, st::DType::i32), undefined;
  BOOST_CHECK_THROW(st::ops::relu_forward(ctx, a, b), st::Error);
  BOOST_CHECK_THROW(st::ops::relu_forward(ctx, ai, ai), st::Error);
  BOOST_CHECK_THROW(st::ops::relu_forward(ctx, undefined, a), st::Error);
  BOOST_CHECK_THROW(st::ops::relu_backward(ctx, a, b, c), st::Error);
  BOOST_CHECK_THROW(st::ops::add_forward(ctx, a, b, c), st::Error);
  BOOST_CHECK_THROW(st::ops::add_inplace(ctx, a, b), st::Error);
  try {
    st::ops::add_forward(ctx, a, b, c);
  } catch (const st::Error& e) {
    const std::string msg = e.what();
    BOOST_TEST(msg.find("[3, 2]") != std::string::npos, msg);
  }
}

BOOST_AUTO_TEST_SUITE_END()
