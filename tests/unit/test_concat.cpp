// Feature concatenation of two 2-D tensors and its split: exact against the float64 reference on
// odd and large shapes, the split as the gradient of the concatenation by central differences,
// argument checks.
#include <boost/test/unit_test.hpp>
#include <limits>
#include <string>

#include "scaletrain/core/error.hpp"
#include "scaletrain/ops/concat.hpp"
#include "support/gradcheck.hpp"
#include "support/reference_concat.hpp"

namespace st = scaletrain;
using scaletrain::test::nan_tensor;
using scaletrain::test::random_floats;

namespace {

struct Case {
  int64_t n, wa, wb;
};

}  // namespace

BOOST_AUTO_TEST_SUITE(concat)

BOOST_AUTO_TEST_CASE(matches_reference) {
  st::Context ctx;
  const Case cases[] = {{1, 1, 1}, {5, 3, 7}, {13, 1, 64}, {4099, 64, 128}, {2, 17, 2}};
  uint64_t seed = 1;
  for (const Case& c : cases) {
    BOOST_TEST_CONTEXT("N " << c.n << ", A " << c.wa << ", B " << c.wb) {
      const auto a = random_floats(c.n * c.wa, seed++), b = random_floats(c.n * c.wb, seed++);
      const auto dy = random_floats(c.n * (c.wa + c.wb), seed++);
      st::Tensor y = nan_tensor({c.n, c.wa + c.wb}), da = nan_tensor({c.n, c.wa}), db = nan_tensor({c.n, c.wb});
      st::ops::concat_features_forward(ctx, st::test::to_tensor(a, {c.n, c.wa}), st::test::to_tensor(b, {c.n, c.wb}),
                                       y);
      BOOST_TEST(st::test::to_vector(y) == st::test::reference_concat_features(c.n, c.wa, c.wb, a, b));
      st::ops::concat_features_backward(ctx, st::test::to_tensor(dy, {c.n, c.wa + c.wb}), da, db);
      std::vector<double> want_da, want_db;
      st::test::reference_split_features(c.n, c.wa, c.wb, dy, want_da, want_db);
      BOOST_TEST(st::test::to_vector(da) == want_da);
      BOOST_TEST(st::test::to_vector(db) == want_db);
    }
  }
}

// d/da and d/db of sum(concat(a, b) * r) by central differences of the fp32 forward.
BOOST_AUTO_TEST_CASE(backward_matches_finite_differences) {
  st::Context ctx;
  const int64_t n = 3, wa = 2, wb = 5;
  auto a = random_floats(n * wa, 11), b = random_floats(n * wb, 12);
  const auto r = random_floats(n * (wa + wb), 13);
  auto f = [&] {
    st::Tensor y = nan_tensor({n, wa + wb});
    st::ops::concat_features_forward(ctx, st::test::to_tensor(a, {n, wa}), st::test::to_tensor(b, {n, wb}), y);
    const auto yv = st::test::to_vector(y);
    double sum = 0;
    for (std::size_t i = 0; i < yv.size(); ++i) sum += yv[i] * r[i];
    return sum;
  };
  st::Tensor da = nan_tensor({n, wa}), db = nan_tensor({n, wb});
  st::ops::concat_features_backward(ctx, st::test::to_tensor(r, {n, wa + wb}), da, db);
  ST_CHECK_CLOSE_VECTORS(st::test::to_vector(da), st::test::numeric_gradient(f, a, 1.0 / 64), 1e-6, 1e-6);
  ST_CHECK_CLOSE_VECTORS(st::test::to_vector(db), st::test::numeric_gradient(f, b, 1.0 / 64), 1e-6, 1e-6);
}

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
