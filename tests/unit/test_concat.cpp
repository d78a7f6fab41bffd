// Concatenation along the last dimension (concat_features: two 2-D tensors; concat_channels: N
// tensors of any rank) and its split: the argument checks and their messages. The values against the
// float64 reference (one sample, width-1 sides, one input, 2-D, above the threading bound) and the
// split as the gradient of the concatenation by central differences are op cases
// (tests/support/op_cases.cpp).
#include <boost/test/unit_test.hpp>
#include <string>

#include "scaletrain/core/error.hpp"
#include "scaletrain/ops/concat.hpp"
#include "support/gradcheck.hpp"

namespace st = scaletrain;

BOOST_AUTO_TEST_SUITE(concat)

BOOST_AUTO_TEST_CASE(argument_checks) {
  st::Context ctx;
  st::Tensor a = st::Tensor::zeros({4, 3}), b = st::Tensor::zeros({4, 5}), y = st::Tensor::zeros({4, 8});
  st::Tensor b_rows = st::Tensor::zeros({5, 5}), y_wide = st::Tensor::zeros({4, 9}), a3 = st::Tensor::zeros({4, 3, 1});
  BOOST_CHECK_THROW(st::ops::concat_features_forward(ctx, a, b_rows, y), st::Error);
  BOOST_CHECK_THROW(st::ops::concat_features_forward(ctx, a3, b, y), st::Error);
  BOOST_CHECK_THROW(st::ops::concat_features_backward(ctx, y_wide, a, b), st::Error);
  BOOST_CHECK_THROW(st::ops::concat_features_backward(ctx, y, a, b_rows), st::Error);
  try {
    st::ops::concat_features_forward(ctx, a, b, y_wide);
    BOOST_FAIL("no error");
  } catch (const st::Error& e) {
    const std::string msg = e.what();
    BOOST_TEST(msg.find("y has shape [4, 9], expected [4, 8]") != std::string::npos, msg);
  }
}

BOOST_AUTO_TEST_CASE(channels_argument_checks) {
  using st::test::check_throws;
  st::Context ctx;
  const st::Tensor a = st::Tensor::zeros({2, 3, 3, 4}), b = st::Tensor::zeros({2, 3, 3, 1});
  st::Tensor y = st::Tensor::zeros({2, 3, 3, 5});
  check_throws([&] { st::ops::concat_channels_forward(ctx, {}, y); }, {"concat_channels_forward: xs is empty"});
  check_throws(
      [&] {
        st::ops::concat_channels_forward(ctx, {a, st::Tensor::zeros({2, 3, 2, 1})}, y);
      },
      {"xs[1] [2, 3, 2, 1] and xs[0] [2, 3, 3, 4] differ in a dimension other than the last"});
  check_throws([&] { st::ops::concat_channels_forward(ctx, {a, st::Tensor::zeros({18, 1})}, y); }, {"xs[1]", "differ"});
  st::Tensor y_wrong = st::Tensor::zeros({2, 3, 3, 6});
  check_throws(
      [&] {
        st::ops::concat_channels_forward(ctx, {a, b}, y_wrong);
      },
      {"y has shape [2, 3, 3, 6], expected [2, 3, 3, 5]"});
  check_throws([&] { st::ops::concat_channels_forward(ctx, {a, st::Tensor()}, y); }, {"xs[1] is undefined"});
  // An input inside the output (the later optimisation of writing branches into the output's
  // slices is not this op).
  st::Tensor part = st::Tensor::view_of(y, 0, {2, 3, 3, 1});
  check_throws([&] { st::ops::concat_channels_forward(ctx, {a, part}, y); }, {"y overlaps xs[1]"});
  check_throws(
      [&] {
        st::ops::concat_channels_backward(ctx, y_wrong, {a, b});
      },
      {"concat_channels_backward: dy has shape"});
  check_throws(
      [&] {
        st::ops::concat_channels_backward(ctx, y, {a, st::Tensor::zeros({2, 3, 3, 1}, st::DType::i32)});
      },
      {"dxs[1] must be float32"});
}

BOOST_AUTO_TEST_SUITE_END()
