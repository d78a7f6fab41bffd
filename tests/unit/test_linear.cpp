// linear: a small example exact in float32, the float64 reference's backward against central
// finite differences, and the argument checks. The kernels against the reference (forward, input,
// weight and bias gradients, and without dx) on odd, all-ones and long-reduction shapes are op
// cases (tests/support/op_cases.cpp).
#include <boost/test/unit_test.hpp>
#include <string>

#include "scaletrain/core/error.hpp"
#include "scaletrain/ops/linear.hpp"
#include "support/gradcheck.hpp"
#include "support/reference_linear.hpp"

namespace st = scaletrain;
using scaletrain::test::nan_tensor;

BOOST_AUTO_TEST_SUITE(linear)

BOOST_AUTO_TEST_CASE(exact_small_example) {
  // y = x w^T + b with small integers: every value is exact in float32.
  st::Context ctx;
  const st::Tensor x = st::test::to_tensor({1, 2, 3, -1, 0, 2}, {2, 3});
  const st::Tensor w = st::test::to_tensor({1, 0, -1, 2, 1, 0}, {2, 3});
  const st::Tensor b = st::test::to_tensor({10, -10}, {2});
  st::Tensor y = nan_tensor({2, 2});
  st::ops::linear_forward(ctx, x, w, b, y);
  BOOST_TEST(st::test::to_vector(y) == (std::vector<double>{8, -6, 7, -12}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(reference_backward_matches_finite_differences) {
  const int64_t n = 4, in = 5, out = 3;
  auto x = st::test::random_vector(n * in, 1), w = st::test::random_vector(out * in, 2);
  auto b = st::test::random_vector(out, 3);
  const auto r = st::test::random_vector(n * out, 4);
  auto loss = [&] {  // L = sum(y * r), so dL/dy = r
    const auto y = st::test::reference_linear_forward(n, in, out, x, w, b);
    double s = 0;
    for (std::size_t i = 0; i < y.size(); ++i) s += y[i] * r[i];
    return s;
  };
  const auto g = st::test::reference_linear_backward(n, in, out, x, w, r);
  ST_CHECK_CLOSE_VECTORS(g.dx, st::test::numeric_gradient(loss, x), 1e-7, 1e-6);
  ST_CHECK_CLOSE_VECTORS(g.dw, st::test::numeric_gradient(loss, w), 1e-7, 1e-6);
  ST_CHECK_CLOSE_VECTORS(g.db, st::test::numeric_gradient(loss, b), 1e-7, 1e-6);
}

BOOST_AUTO_TEST_CASE(bad_arguments_are_reported) {
  st::Context ctx;
  auto mentions = [](const char* text) {
    return [text](const st::Error& e) { return std::string(e.what()).find(text) != std::string::npos; };
  };
  const st::Tensor x = st::Tensor::zeros({4, 6}), w = st::Tensor::zeros({3, 5}), b = st::Tensor::zeros({3});
  st::Tensor y = st::Tensor::zeros({4, 3});
  BOOST_CHECK_EXCEPTION(st::ops::linear_forward(ctx, x, w, b, y), st::Error, mentions("has 6 features"));
  const st::Tensor w6 = st::Tensor::zeros({3, 6}), b4 = st::Tensor::zeros({4});
  BOOST_CHECK_EXCEPTION(st::ops::linear_forward(ctx, x, w6, b4, y), st::Error, mentions("b has shape [4]"));
  st::Tensor dx = st::Tensor::zeros({4, 6}), dw = st::Tensor::zeros({3, 6}), db = st::Tensor::zeros({3});
  const st::Tensor dy_wrong = st::Tensor::zeros({5, 3});
  BOOST_CHECK_EXCEPTION(st::ops::linear_backward(ctx, x, w6, dy_wrong, dx, dw, db), st::Error,
                        mentions("dy has shape [5, 3], expected [4, 3]"));
}

BOOST_AUTO_TEST_SUITE_END()
