// Element-wise product: the fp32 kernels against the float64 reference on odd and large shapes
// (exact: the float product of two floats is the rounded double product), central finite
// differences for both inputs, aliasing of the gradients with dy, argument checks.
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

BOOST_AUTO_TEST_CASE(matches_reference) {
  st::Context ctx;
  uint64_t seed = 1;
  for (const st::Shape& s : {st::Shape{1}, st::Shape{17}, st::Shape{3, 5}, st::Shape{13, 7, 3}, st::Shape{4099, 64}}) {
    BOOST_TEST_CONTEXT("shape " << st::shape_string(s)) {
      const auto a = random_floats(st::shape_numel(s), seed++), b = random_floats(st::shape_numel(s), seed++);
      const auto dy = random_floats(st::shape_numel(s), seed++);
      st::Tensor y = nan_tensor(s), da = nan_tensor(s), db = nan_tensor(s);
      const st::Tensor ta = st::test::to_tensor(a, s), tb = st::test::to_tensor(b, s);
      st::ops::multiply_forward(ctx, ta, tb, y);
      BOOST_TEST(st::test::to_vector(y) == rounded(st::test::reference_multiply(a, b)));
      st::ops::multiply_backward(ctx, ta, tb, st::test::to_tensor(dy, s), da, db);
      std::vector<double> want_da, want_db;
      st::test::reference_multiply_backward(a, b, dy, want_da, want_db);
      BOOST_TEST(st::test::to_vector(da) == rounded(want_da));
      BOOST_TEST(st::test::to_vector(db) == rounded(want_db));
    }
  }
}

// d/da and d/db of sum(a * b * r) by central differences of the fp32 forward.
BOOST_AUTO_TEST_CASE(backward_matches_finite_differences) {
  st::Context ctx;
  const st::Shape s{5, 3};
  auto a = random_floats(15, 21), b = random_floats(15, 22);
  const auto r = random_floats(15, 23);
  auto f = [&] {
    st::Tensor y = nan_tensor(s);
    st::ops::multiply_forward(ctx, st::test::to_tensor(a, s), st::test::to_tensor(b, s), y);
    const auto yv = st::test::to_vector(y);
    double sum = 0;
    for (std::size_t i = 0; i < yv.size(); ++i) sum += yv[i] * r[i];
    return sum;
  };
  st::Tensor da = nan_tensor(s), db = nan_tensor(s);
  st::ops::multiply_backward(ctx, st::test::to_tensor(a, s), st::test::to_tensor(b, s), st::test::to_tensor(r, s), da,
                             db);
  ST_CHECK_CLOSE_VECTORS(st::test::to_vector(da), st::test::numeric_gradient(f, a, 1e-2), 1e-5, 1e-5);
  ST_CHECK_CLOSE_VECTORS(st::test::to_vector(db), st::test::numeric_gradient(f, b, 1e-2), 1e-5, 1e-5);
}

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
