// Flatten in NCHW order: the argument checks and their messages. The kernels against the float64
// reference (1x1, 6x6x16, 4x4x5 with N = 3) and the backward as the forward's gradient are op cases
// (tests/support/op_cases.cpp); the feature order by hand is in unit.blocks.
#include <boost/test/unit_test.hpp>

#include "scaletrain/core/error.hpp"
#include "scaletrain/ops/flatten.hpp"
#include "support/gradcheck.hpp"

namespace st = scaletrain;
using st::test::check_throws;

BOOST_AUTO_TEST_SUITE(flatten)

BOOST_AUTO_TEST_CASE(argument_checks) {
  st::Context ctx;
  const st::Tensor x = st::Tensor::zeros({2, 3, 4, 5});
  st::Tensor y = st::Tensor::zeros({2, 60}), dx = st::Tensor::zeros({2, 3, 4, 5});
  st::Tensor y_wrong = st::Tensor::zeros({2, 61}), x3 = st::Tensor::zeros({2, 12, 5});
  check_throws([&] { st::ops::flatten_chw_forward(ctx, x, y_wrong); },
               {"flatten_chw_forward: y has shape [2, 61], expected [2, 60]"});
  check_throws([&] { st::ops::flatten_chw_forward(ctx, x3, y); }, {"x must be (N, H, W, C), got [2, 12, 5]"});
  check_throws([&] { st::ops::flatten_chw_backward(ctx, y_wrong, dx); }, {"flatten_chw_backward: dy has shape"});
  check_throws([&] { st::ops::flatten_chw_backward(ctx, y, x3); }, {"dx must be (N, H, W, C)"});
  st::Tensor view = st::Tensor::view_of(dx, 0, {2, 60});
  check_throws([&] { st::ops::flatten_chw_backward(ctx, view, dx); }, {"dx overlaps dy"});
}

BOOST_AUTO_TEST_SUITE_END()
