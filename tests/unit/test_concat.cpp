// Feature concatenation of two 2-D tensors and its split: the argument checks and their messages.
// The values against the float64 reference (one sample, width-1 sides, above the threading bound)
// and the split as the gradient of the concatenation by central differences are op cases
// (tests/support/op_cases.cpp).
#include <boost/test/unit_test.hpp>
#include <string>

#include "scaletrain/core/error.hpp"
#include "scaletrain/ops/concat.hpp"

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

BOOST_AUTO_TEST_SUITE_END()
