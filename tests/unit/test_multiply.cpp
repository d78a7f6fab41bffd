// Element-wise product: aliasing of the gradients with dy, argument checks. The kernels against
// the float64 reference (exact: the float product of two floats is the rounded double product)
// on odd shapes and above the threading bound, and the backward against central differences of
// the forward, are op cases (tests/support/op_cases.cpp).
#include <boost/test/unit_test.hpp>
#include <limits>
#include <string>

#include "scaletrain/core/error.hpp"
#include "scaletrain/ops/multiply.hpp"
#include "support/gradcheck.hpp"
#include "support/reference_multiply.hpp"

namespace st = scaletrain;
using scaletrain::test::nan_tensor;
using scaletrain::test::random_floats;

namespace {

std::vector<double> rounded(std::vector<double> v) {
  for (auto& x : v) x = static_cast<float>(x);
  return v;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(multiply)

// da or db may be dy itself (the caller reuses the incoming gradient's buffer).
BOOST_AUTO_TEST_CASE(gradient_may_alias_dy) {
  st::Context ctx;
  const st::Shape s{4099, 9};
  const auto a = random_floats(st::shape_numel(s), 31), b = random_floats(st::shape_numel(s), 32);
  const auto dy = random_floats(st::shape_numel(s), 33);
  std::vector<double> want_da, want_db;
  st::test::reference_multiply_backward(a, b, dy, want_da, want_db);
  const st::Tensor ta = st::test::to_tensor(a, s), tb = st::test::to_tensor(b, s);
  st::Tensor g = st::test::to_tensor(dy, s), other = nan_tensor(s);
  st::ops::multiply_backward(ctx, ta, tb, g, g, other);
  BOOST_TEST(st::test::to_vector(g) == rounded(want_da));
  BOOST_TEST(st::test::to_vector(other) == rounded(want_db));
  g = st::test::to_tensor(dy, s);
  st::ops::multiply_backward(ctx, ta, tb, g, other, g);
  BOOST_TEST(st::test::to_vector(other) == rounded(want_da));
  BOOST_TEST(st::test::to_vector(g) == rounded(want_db));
}

BOOST_AUTO_TEST_CASE(argument_checks) {
  st::Context ctx;
  st::Tensor a = st::Tensor::zeros({2, 3}), b = st::Tensor::zeros({3, 2}), c = st::Tensor::zeros({2, 3});
  st::Tensor d = st::Tensor::zeros({2, 3}), ai = st::Tensor::zeros({2, 3}, st::DType::i32);
  BOOST_CHECK_THROW(st::ops::multiply_forward(ctx, a, b, c), st::Error);
  BOOST_CHECK_THROW(st::ops::multiply_forward(ctx, ai, c, d), st::Error);
  BOOST_CHECK_THROW(st::ops::multiply_backward(ctx, a, c, b, d, d), st::Error);
  BOOST_CHECK_THROW(st::ops::multiply_backward(ctx, a, c, a, d, d), st::Error);  // da == db
  try {
    st::ops::multiply_forward(ctx, a, b, c);
    BOOST_FAIL("no error");
  } catch (const st::Error& e) {
    const std::string msg = e.what();
    BOOST_TEST(msg.find("b has shape [3, 2], expected [2, 3]") != std::string::npos, msg);
  }
}

BOOST_AUTO_TEST_SUITE_END()
