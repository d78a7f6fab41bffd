// Max pooling and global average pooling: max pooling's ties (to the first maximum) and padding,
// at random and by hand; the float64 reference's max-pool backward, and the kernel's, against
// central differences of the reference's forward; output shapes and argument checks. The kernels
// against the reference on odd, overlapping, padded, 1x1 and large geometries, and global average
// pooling's backward against central differences, are op cases (tests/support/op_cases.cpp).
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <limits>
#include <string>

#include "scaletrain/core/error.hpp"
#include "scaletrain/ops/pool.hpp"
#include "support/gradcheck.hpp"
#include "support/reference_pool.hpp"

namespace st = scaletrain;
using scaletrain::test::nan_tensor;
using scaletrain::test::random_floats;
using st::test::PoolGeometry;

namespace {

st::ops::MaxPool2dParams params(const PoolGeometry& g) {
  return {static_cast<int>(g.kernel), static_cast<int>(g.stride), static_cast<int>(g.padding)};
}

st::Shape in_shape(const PoolGeometry& g) { return {g.n, g.h, g.w, g.c}; }
st::Shape out_shape(const PoolGeometry& g) { return {g.n, g.oh(), g.ow(), g.c}; }

std::string describe(const PoolGeometry& g) {
  return "x " + st::shape_string(in_shape(g)) + ", kernel " + std::to_string(g.kernel) + ", stride " +
         std::to_string(g.stride) + ", padding " + std::to_string(g.padding);
}

struct MaxPoolOut {
  std::vector<double> y, dx;
};

MaxPoolOut run_max_pool(st::Context& ctx, const PoolGeometry& g, const std::vector<double>& x,
                        const std::vector<double>& dy) {
  const st::Tensor xt = st::test::to_tensor(x, in_shape(g));
  st::Tensor y = nan_tensor(out_shape(g)), dx = nan_tensor(in_shape(g));
  st::ops::max_pool2d_forward(ctx, params(g), xt, y);
  st::ops::max_pool2d_backward(ctx, params(g), xt, y, st::test::to_tensor(dy, out_shape(g)), dx);
  return {st::test::to_vector(y), st::test::to_vector(dx)};
}

const std::vector<PoolGeometry>& geometries() {
  static const std::vector<PoolGeometry> g = {
      {3, 5, 7, 3, 3, 2, 1},     // odd sizes, ResNet's stem pool
      {2, 6, 6, 16, 2, 2, 0},    // non-overlapping
      {1, 5, 5, 1, 3, 1, 1},     // stride 1: heavy overlap, one channel
      {2, 9, 8, 5, 3, 3, 0},     // floor: the last column is dropped
      {2, 4, 4, 3, 4, 1, 2},     // padding of half the kernel
      {2, 8, 7, 40, 3, 2, 1},    // many channels
      {1, 3, 3, 2, 1, 1, 0},     // 1x1: identity
      {4, 16, 16, 40, 3, 2, 1},  // large enough for the threaded path
  };
  return g;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(pool)

BOOST_AUTO_TEST_CASE(max_pool_output_shape) {
  using st::ops::max_pool2d_output_shape;
  BOOST_TEST(max_pool2d_output_shape({3, 2, 1}, {2, 112, 112, 64}) == (st::Shape{2, 56, 56, 64}));
  BOOST_TEST(max_pool2d_output_shape({3, 2, 1}, {1, 5, 7, 3}) == (st::Shape{1, 3, 4, 3}));
  BOOST_TEST(max_pool2d_output_shape({2, 2, 0}, {1, 5, 7, 3}) == (st::Shape{1, 2, 3, 3}));  // floor
  BOOST_TEST(max_pool2d_output_shape({3, 1, 1}, {1, 1, 1, 1}) == (st::Shape{1, 1, 1, 1}));
  BOOST_CHECK_THROW(max_pool2d_output_shape({3, 2, 2}, {1, 8, 8, 1}), st::Error);  // padding > kernel / 2
  BOOST_CHECK_THROW(max_pool2d_output_shape({5, 1, 0}, {1, 4, 8, 1}), st::Error);  // kernel > input
  BOOST_CHECK_THROW(max_pool2d_output_shape({3, 0, 1}, {1, 8, 8, 1}), st::Error);
  BOOST_CHECK_THROW(max_pool2d_output_shape({3, 2, 1}, {8, 8, 1}), st::Error);
}

// Few distinct values, so most windows hold ties: the gradient goes to the first maximum in
// row-major order within each window.
BOOST_AUTO_TEST_CASE(max_pool_ties_go_to_the_first_maximum) {
  st::Context ctx;
  uint64_t seed = 50;
  for (const PoolGeometry& g : geometries()) {
    BOOST_TEST_CONTEXT(describe(g)) {
      auto x = st::test::random_vector(g.n * g.h * g.w * g.c, seed++);
      for (auto& v : x) v = std::floor(v * 1.5);  // -2, -1, 0, 1
      const auto dy = random_floats(g.n * g.oh() * g.ow() * g.c, seed++);
      const MaxPoolOut got = run_max_pool(ctx, g, x, dy);
      BOOST_TEST(got.y == st::test::reference_max_pool2d_forward(g, x));
      ST_CHECK_CLOSE_VECTORS(got.dx, st::test::reference_max_pool2d_backward(g, x, dy), 1e-6, 1e-6);
    }
  }
  // By hand: a constant 3x3 image of -1, kernel 3, stride 2, padding 1. Padding never wins
  // (the maximum is -1, not 0), and each window's gradient lands on its first valid position:
  // windows start at rows/columns -1 and 1, so their first inputs are (0, 0), (0, 1), (1, 0), (1, 1).
  const PoolGeometry g{1, 3, 3, 1, 3, 2, 1};
  const std::vector<double> x(9, -1.0), dy{1, 2, 3, 4};
  const MaxPoolOut got = run_max_pool(ctx, g, x, dy);
  BOOST_TEST(got.y == (std::vector<double>{-1, -1, -1, -1}));
  BOOST_TEST(got.dx == (std::vector<double>{1, 2, 0, 3, 4, 0, 0, 0, 0}));
  // Overlapping windows with stride 1 over a constant 2x3 image: kernel 2 gives windows at
  // columns 0 and 1, whose first positions are (0, 0) and (0, 1).
  const PoolGeometry g2{1, 2, 3, 1, 2, 1, 0};
  const MaxPoolOut got2 = run_max_pool(ctx, g2, std::vector<double>(6, 5.0), {10, 20});
  BOOST_TEST(got2.y == (std::vector<double>{5, 5}));
  BOOST_TEST(got2.dx == (std::vector<double>{10, 20, 0, 0, 0, 0}));
}

// Gradient of sum(y * r): the kernel's backward and the reference's against central differences
// of the float64 forward at distinct inputs (no ties, so the maximum is differentiable).
BOOST_AUTO_TEST_CASE(max_pool_backward_matches_finite_differences) {
  st::Context ctx;
  for (const PoolGeometry& g : {PoolGeometry{2, 5, 7, 3, 3, 2, 1}, PoolGeometry{1, 4, 5, 2, 2, 1, 1}}) {
    BOOST_TEST_CONTEXT(describe(g)) {
      auto x = random_floats(g.n * g.h * g.w * g.c, 61);
      const auto r = random_floats(g.n * g.oh() * g.ow() * g.c, 62);
      auto f = [&] { return dot(st::test::reference_max_pool2d_forward(g, x), r); };
      const auto numeric = st::test::numeric_gradient(f, x);
      ST_CHECK_CLOSE_VECTORS(st::test::reference_max_pool2d_backward(g, x, r), numeric, 1e-7, 1e-6);
      ST_CHECK_CLOSE_VECTORS(run_max_pool(ctx, g, x, r).dx, numeric, 1e-6, 1e-6);
    }
  }
}

BOOST_AUTO_TEST_CASE(argument_checks) {
  st::Context ctx;
  const st::ops::MaxPool2dParams p{3, 2, 1};
  st::Tensor x = st::Tensor::zeros({2, 5, 5, 3}), y = st::Tensor::zeros({2, 3, 3, 3});
  st::Tensor y_bad = st::Tensor::zeros({2, 2, 2, 3}), dx = st::Tensor::zeros({2, 5, 5, 3});
  st::Tensor x3 = st::Tensor::zeros({5, 5, 3});
  BOOST_CHECK_THROW(st::ops::max_pool2d_forward(ctx, p, x, y_bad), st::Error);
  BOOST_CHECK_THROW(st::ops::max_pool2d_forward(ctx, p, x3, y), st::Error);
  BOOST_CHECK_THROW(st::ops::max_pool2d_backward(ctx, p, x, y, y_bad, dx), st::Error);
  BOOST_CHECK_THROW(st::ops::max_pool2d_backward(ctx, p, x, y, y, y), st::Error);
  st::Tensor g = st::Tensor::zeros({2, 3}), g_bad = st::Tensor::zeros({3, 2});
  BOOST_CHECK_THROW(st::ops::global_avg_pool_forward(ctx, x, g_bad), st::Error);
  BOOST_CHECK_THROW(st::ops::global_avg_pool_forward(ctx, x3, g), st::Error);
  BOOST_CHECK_THROW(st::ops::global_avg_pool_backward(ctx, g_bad, dx), st::Error);
  try {
    st::ops::max_pool2d_forward(ctx, p, x, y_bad);
  } catch (const st::Error& e) {
    const std::string msg = e.what();
    BOOST_TEST(msg.find("[2, 3, 3, 3]") != std::string::npos, msg);
  }
}

BOOST_AUTO_TEST_SUITE_END()
