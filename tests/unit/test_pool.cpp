// Pooling: max pooling's ties (to the first maximum) and padding, at random and by hand; the
// float64 reference's max-pool backward, and the kernel's, against central differences of the
// reference's forward; output shapes (floor and ceil) and argument checks; average and adaptive
// pooling against values PyTorch 1.13 gives (torch.nn.functional.avg_pool2d, adaptive_avg_pool2d,
// max_pool2d with ceil_mode, quoted below); the AvgPool2d and AdaptiveAvgPool2d layers. The
// kernels against the reference on odd, overlapping, padded, ceil-mode, 1x1 and large geometries,
// and every backward against central differences, are op cases (tests/support/op_cases.cpp).
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <limits>
#include <string>

#include "scaletrain/core/error.hpp"
#include "scaletrain/nn/layers.hpp"
#include "scaletrain/nn/pooling.hpp"
#include "scaletrain/ops/pool.hpp"
#include "support/gradcheck.hpp"
#include "support/reference_pool.hpp"

namespace st = scaletrain;
using scaletrain::test::nan_tensor;
using scaletrain::test::random_floats;
using st::test::PoolGeometry;

namespace {

st::ops::MaxPool2dParams params(const PoolGeometry& g) {
  return {static_cast<int>(g.kernel), static_cast<int>(g.stride), static_cast<int>(g.padding), g.ceil_mode};
}

st::ops::AvgPool2dParams avg_params(const PoolGeometry& g) {
  return {static_cast<int>(g.kernel), static_cast<int>(g.stride), static_cast<int>(g.padding), g.ceil_mode,
          g.count_include_pad};
}

// A float32 tensor of `shape` filled with v.
st::Tensor filled(const st::Shape& shape, float v) {
  st::Tensor t = st::Tensor::empty(shape);
  t.fill(v);
  return t;
}

// 0, 1, 2, ...: an image (1, H, W, 1) in row-major order.
std::vector<double> iota(int64_t n) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<double>(i);
  return v;
}

// The last `count` values of v.
std::vector<double> tail(const std::vector<double>& v, std::size_t count) {
  return std::vector<double>(v.end() - static_cast<std::ptrdiff_t>(count), v.end());
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

// PyTorch's ceil rule (torch 1.13 gives the same sizes): round up, then drop a last window that
// would start beyond the input and its left padding.
BOOST_AUTO_TEST_CASE(ceil_mode_output_shapes) {
  using st::ops::avg_pool2d_output_shape;
  using st::ops::max_pool2d_output_shape;
  BOOST_TEST(max_pool2d_output_shape({3, 2, 0, true}, {1, 112, 112, 64}) == (st::Shape{1, 56, 56, 64}));
  BOOST_TEST(max_pool2d_output_shape({3, 2, 0, false}, {1, 112, 112, 64}) == (st::Shape{1, 55, 55, 64}));
  BOOST_TEST(max_pool2d_output_shape({3, 2, 0, true}, {1, 8, 8, 1}) == (st::Shape{1, 4, 4, 1}));
  BOOST_TEST(max_pool2d_output_shape({2, 2, 0, true}, {1, 15, 14, 1}) == (st::Shape{1, 8, 7, 1}));
  BOOST_TEST(max_pool2d_output_shape({3, 1, 1, true}, {1, 6, 7, 1}) == (st::Shape{1, 6, 7, 1}));
  BOOST_TEST(max_pool2d_output_shape({3, 2, 0, true}, {1, 14, 14, 1}) == (st::Shape{1, 7, 7, 1}));  // GoogLeNet
  BOOST_TEST(max_pool2d_output_shape({2, 2, 0, true}, {1, 7, 7, 1}) == (st::Shape{1, 4, 4, 1}));
  // (OH - 1) * s >= H + p drops the last window: H = 5, k 2, s 3, p 1: ceil(4 / 3) + 1 = 3, but
  // window 2 would start at 5 = H, inside the right padding only.
  BOOST_TEST(max_pool2d_output_shape({2, 3, 1, true}, {1, 5, 5, 1}) == (st::Shape{1, 2, 2, 1}));
  BOOST_TEST(avg_pool2d_output_shape({5, 3, 0, true, true}, {1, 13, 13, 1}) == (st::Shape{1, 4, 4, 1}));
  BOOST_TEST(avg_pool2d_output_shape({5, 3, 0, false, true}, {1, 17, 17, 1}) == (st::Shape{1, 5, 5, 1}));
  BOOST_TEST(avg_pool2d_output_shape({3, 2, 1, true, true}, {1, 8, 8, 1}) == (st::Shape{1, 5, 5, 1}));
  BOOST_TEST(avg_pool2d_output_shape({3, 1, 1}, {2, 35, 35, 192}) == (st::Shape{2, 35, 35, 192}));
  BOOST_CHECK_THROW(avg_pool2d_output_shape({3, 1, 2}, {1, 8, 8, 1}), st::Error);  // padding > kernel / 2
  BOOST_CHECK_THROW(avg_pool2d_output_shape({5, 3, 0}, {1, 4, 8, 1}), st::Error);  // kernel > input
  BOOST_CHECK_THROW(avg_pool2d_output_shape({3, 0, 1}, {1, 8, 8, 1}), st::Error);
  using st::ops::adaptive_avg_pool2d_output_shape;
  BOOST_TEST(adaptive_avg_pool2d_output_shape({6, 6}, {2, 1, 1, 256}) == (st::Shape{2, 6, 6, 256}));
  BOOST_TEST(adaptive_avg_pool2d_output_shape({4, 5}, {1, 9, 6, 3}) == (st::Shape{1, 4, 5, 3}));
  BOOST_CHECK_THROW(adaptive_avg_pool2d_output_shape({0, 6}, {1, 8, 8, 1}), st::Error);
  BOOST_CHECK_THROW(adaptive_avg_pool2d_output_shape({6, 6}, {1, 0, 8, 1}), st::Error);
  BOOST_CHECK_THROW(adaptive_avg_pool2d_output_shape({6, 6}, {8, 8, 1}), st::Error);
}

// Values from torch 1.13 on an 8x8 image holding 0..63 (x = torch.arange(64.).reshape(1, 1, 8, 8)).
BOOST_AUTO_TEST_CASE(ceil_mode_matches_pytorch) {
  st::Context ctx;
  const st::Shape xs{1, 8, 8, 1};
  const st::Tensor x = st::test::to_tensor(iota(64), xs);
  // F.max_pool2d(x, 3, 2, ceil_mode=True)[0, 0, -1]: the last window holds columns 6 and 7 only.
  st::Tensor y = nan_tensor({1, 4, 4, 1});
  st::ops::max_pool2d_forward(ctx, {3, 2, 0, true}, x, y);
  BOOST_TEST(tail(st::test::to_vector(y), 4) == (std::vector<double>{58, 60, 62, 63}));
  // F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=True)[0, 0, -1]:
  // [18.8333, 29, 30, 31, 15.75]. The last window starts at row and column 7 and ends at
  // min(7 + 3, 8 + 1) = 9: it counts one padded row and column (divisor 2 x 2, not 3 x 3).
  st::Tensor ya = nan_tensor({1, 5, 5, 1});
  st::ops::avg_pool2d_forward(ctx, {3, 2, 1, true, true}, x, ya);
  ST_CHECK_CLOSE_VECTORS(tail(st::test::to_vector(ya), 5), (std::vector<double>{113.0 / 6, 29, 30, 31, 15.75}), 1e-6,
                         1e-6);
  // count_include_pad=False: [56.5, 58, 60, 62, 63].
  st::ops::avg_pool2d_forward(ctx, {3, 2, 1, true, false}, x, ya);
  BOOST_TEST(tail(st::test::to_vector(ya), 5) == (std::vector<double>{56.5, 58, 60, 62, 63}));
  // The gradient of y.sum() with count_include_pad=True on that geometry, last row of x:
  // [0.2778, 0.5556, 0.2778, 0.5556, 0.2778, 0.5556, 0.2778, 0.6944] (5/18, 10/18, ..., 1/9 + 1/6 + 1/6 + 1/4).
  st::Tensor dx = nan_tensor(xs);
  st::ops::avg_pool2d_backward(ctx, {3, 2, 1, true, true}, filled({1, 5, 5, 1}, 1.0f), dx);
  const double a = 5.0 / 18, b = 10.0 / 18, c = 1.0 / 9 + 1.0 / 6 + 1.0 / 6 + 1.0 / 4;
  ST_CHECK_CLOSE_VECTORS(tail(st::test::to_vector(dx), 8), (std::vector<double>{a, b, a, b, a, b, a, c}), 1e-6, 1e-6);
}

// Values from torch 1.13: F.adaptive_avg_pool2d on a 1x5 and a 1x13 row holding 0, 1, 2, ...
BOOST_AUTO_TEST_CASE(adaptive_pooling_matches_pytorch) {
  st::Context ctx;
  // 5 -> 6: windows [0,1), [0,2), [1,3), [2,4), [3,5), [4,5); y.sum()'s gradient [1.5, 1, 1, 1, 1.5].
  const st::Tensor x5 = st::test::to_tensor(iota(5), {1, 1, 5, 1});
  st::Tensor y = nan_tensor({1, 1, 6, 1}), dx = nan_tensor({1, 1, 5, 1});
  st::ops::adaptive_avg_pool2d_forward(ctx, {1, 6}, x5, y);
  BOOST_TEST(st::test::to_vector(y) == (std::vector<double>{0, 0.5, 1.5, 2.5, 3.5, 4}));
  st::ops::adaptive_avg_pool2d_backward(ctx, {1, 6}, filled({1, 1, 6, 1}, 1.0f), dx);
  BOOST_TEST(st::test::to_vector(dx) == (std::vector<double>{1.5, 1, 1, 1, 1.5}));
  // 13 -> 6 (AlexNet at 224 px): windows of 3, overlapping by one: [1, 3, 5, 7, 9, 11].
  const st::Tensor x13 = st::test::to_tensor(iota(13), {1, 1, 13, 1});
  st::ops::adaptive_avg_pool2d_forward(ctx, {1, 6}, x13, y);
  BOOST_TEST(st::test::to_vector(y) == (std::vector<double>{1, 3, 5, 7, 9, 11}));
  // 1x1 -> 6x6: every output is the one input; the gradient is the sum of dy.
  const st::Tensor x1 = st::test::to_tensor({2.5}, {1, 1, 1, 1});
  st::Tensor y36 = nan_tensor({1, 6, 6, 1}), dx1 = nan_tensor({1, 1, 1, 1});
  st::ops::adaptive_avg_pool2d_forward(ctx, {6, 6}, x1, y36);
  BOOST_TEST(st::test::to_vector(y36) == std::vector<double>(36, 2.5));
  st::ops::adaptive_avg_pool2d_backward(ctx, {6, 6}, filled({1, 6, 6, 1}, 0.5f), dx1);
  BOOST_TEST(st::test::to_vector(dx1) == (std::vector<double>{18}));
}

// Average pooling by hand on channels: each channel pooled on its own, and a window's padding
// counted or not.
BOOST_AUTO_TEST_CASE(avg_pool_channels_and_padding) {
  st::Context ctx;
  for (bool include : {true, false}) {
    BOOST_TEST_CONTEXT("count_include_pad " << include) {
      const PoolGeometry g{2, 5, 4, 3, 3, 1, 1, false, include};
      const auto x = random_floats(g.n * g.h * g.w * g.c, 71);
      const auto dy = random_floats(g.n * g.oh() * g.ow() * g.c, 72);
      st::Tensor y = nan_tensor(out_shape(g)), dx = nan_tensor(in_shape(g));
      st::ops::avg_pool2d_forward(ctx, avg_params(g), st::test::to_tensor(x, in_shape(g)), y);
      st::ops::avg_pool2d_backward(ctx, avg_params(g), st::test::to_tensor(dy, out_shape(g)), dx);
      ST_CHECK_CLOSE_VECTORS(st::test::to_vector(y), st::test::reference_avg_pool2d_forward(g, x), 1e-7, 1e-6);
      ST_CHECK_CLOSE_VECTORS(st::test::to_vector(dx), st::test::reference_avg_pool2d_backward(g, dy), 1e-7, 1e-6);
      // The corner (0, 0) of channel 0 averages the 2x2 inputs it sees over 9 or 4 positions.
      const double corner = (x[0] + x[3] + x[4 * 3] + x[5 * 3]) / (include ? 9.0 : 4.0);
      BOOST_TEST(std::fabs(st::test::to_vector(y)[0] - corner) < 1e-6);
    }
  }
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
  const st::ops::AvgPool2dParams a{3, 2, 1};
  BOOST_CHECK_THROW(st::ops::avg_pool2d_forward(ctx, a, x, y_bad), st::Error);
  BOOST_CHECK_THROW(st::ops::avg_pool2d_forward(ctx, a, x3, y), st::Error);
  BOOST_CHECK_THROW(st::ops::avg_pool2d_backward(ctx, a, y_bad, dx), st::Error);
  BOOST_CHECK_THROW(st::ops::avg_pool2d_backward(ctx, a, y, x3), st::Error);
  BOOST_CHECK_NO_THROW(st::ops::avg_pool2d_backward(ctx, a, y, dx));
  const st::ops::AdaptiveAvgPool2dParams ad{3, 3};
  BOOST_CHECK_THROW(st::ops::adaptive_avg_pool2d_forward(ctx, ad, x, y_bad), st::Error);
  BOOST_CHECK_THROW(st::ops::adaptive_avg_pool2d_forward(ctx, {0, 3}, x, y), st::Error);
  BOOST_CHECK_THROW(st::ops::adaptive_avg_pool2d_backward(ctx, ad, y_bad, dx), st::Error);
  BOOST_CHECK_NO_THROW(st::ops::adaptive_avg_pool2d_backward(ctx, ad, y, dx));
  st::test::check_throws(
      [&] {
        st::ops::adaptive_avg_pool2d_forward(ctx, {0, 3}, x, y);
      },
      {"adaptive_avg_pool2d", "0x3"});
  st::test::check_throws([&] { st::ops::avg_pool2d_forward(ctx, {3, 1, 2}, x, y); }, {"avg_pool2d", "padding", "2"});
  try {
    st::ops::max_pool2d_forward(ctx, p, x, y_bad);
  } catch (const st::Error& e) {
    const std::string msg = e.what();
    BOOST_TEST(msg.find("[2, 3, 3, 3]") != std::string::npos, msg);
  }
}

// The layers: output shapes, the ops they list, a smaller second batch (buffers reused), and a
// chain MaxPool2d(ceil) -> AvgPool2d(ceil, padding) -> AdaptiveAvgPool2d whose backward matches
// central differences of the float64 references composed.
BOOST_AUTO_TEST_CASE(pooling_layers) {
  st::Context ctx;
  const PoolGeometry mg{2, 9, 9, 3, 3, 2, 0, true};        // 9 -> 4
  const PoolGeometry ag{2, 4, 4, 3, 3, 2, 1, true, true};  // 4 -> 3, the last window overhangs
  const st::test::AdaptiveGeometry dg{2, 3, 3, 3, 2, 5};   // 3x3 -> 2x5
  st::nn::Sequential seq;
  seq.emplace<st::nn::MaxPool2d>(params(mg));
  seq.emplace<st::nn::AvgPool2d>(avg_params(ag));
  seq.emplace<st::nn::AdaptiveAvgPool2d>(2, 5);
  st::ops::OpNames eval_ops, train_ops;
  seq.list_ops(eval_ops, false);
  seq.list_ops(train_ops, true);
  BOOST_TEST(eval_ops == (st::ops::OpNames{"max_pool2d_forward", "avg_pool2d_forward", "adaptive_avg_pool2d_forward"}));
  BOOST_TEST(train_ops.size() == 6u);
  BOOST_TEST(train_ops.count("avg_pool2d_backward") == 1u);
  BOOST_TEST(train_ops.count("adaptive_avg_pool2d_backward") == 1u);

  auto x = random_floats(mg.n * mg.h * mg.w * mg.c, 81);
  const auto r = random_floats(dg.n * dg.oh * dg.ow * dg.c, 82);
  const st::Tensor y = seq.forward(ctx, st::test::to_tensor(x, in_shape(mg)), true);
  BOOST_TEST(y.shape() == (st::Shape{2, 2, 5, 3}));
  const st::Tensor dx = seq.backward(ctx, st::test::to_tensor(r, y.shape()), true);
  BOOST_TEST(dx.shape() == in_shape(mg));
  auto f = [&] {
    const auto y1 = st::test::reference_max_pool2d_forward(mg, x);
    const auto y2 = st::test::reference_avg_pool2d_forward(ag, y1);
    return dot(st::test::reference_adaptive_avg_pool2d_forward(dg, y2), r);
  };
  ST_CHECK_CLOSE_VECTORS(st::test::to_vector(dx), st::test::numeric_gradient(f, x), 1e-5, 1e-5);

  // A smaller batch takes views of the same buffers.
  const st::Tensor y_small = seq.forward(ctx, st::Tensor::zeros({1, 9, 9, 3}), true);
  BOOST_TEST(y_small.shape() == (st::Shape{1, 2, 5, 3}));
  BOOST_TEST(seq.backward(ctx, st::Tensor::zeros(y_small.shape()), true).shape() == (st::Shape{1, 9, 9, 3}));
  BOOST_TEST(!seq.backward(ctx, st::Tensor::zeros(y_small.shape()), false).defined());

  st::nn::AvgPool2d fresh;
  BOOST_CHECK_THROW(fresh.backward(ctx, st::Tensor::zeros({1, 2, 2, 1})), st::Error);
  BOOST_CHECK_THROW(fresh.forward(ctx, st::Tensor::zeros({2, 2, 1}), true), st::Error);
  st::nn::AdaptiveAvgPool2d fresh_adaptive(6, 6);
  BOOST_CHECK_THROW(fresh_adaptive.backward(ctx, st::Tensor::zeros({1, 6, 6, 1})), st::Error);
  BOOST_TEST(fresh_adaptive.forward(ctx, st::Tensor::zeros({3, 1, 1, 8}), false).shape() == (st::Shape{3, 6, 6, 8}));
}

BOOST_AUTO_TEST_SUITE_END()
