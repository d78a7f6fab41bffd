// conv2d: the oneDNN primitive cache against new buffers, the float64 reference's backward against
// central finite differences, the output shape and the argument checks. The kernels against the
// reference on odd and ResNet-like shapes are op cases (tests/support/op_cases.cpp).
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <limits>
#include <string>

#include "scaletrain/core/error.hpp"
#include "scaletrain/ops/conv2d.hpp"
#include "support/gradcheck.hpp"
#include "support/reference_conv2d.hpp"

namespace st = scaletrain;
using scaletrain::test::nan_tensor;
using scaletrain::test::random_floats;
using st::test::RefConv2dDims;

namespace {

std::string describe(const RefConv2dDims& d) {
  return "x (" + std::to_string(d.n) + ", " + std::to_string(d.h) + ", " + std::to_string(d.w) + ", " +
         std::to_string(d.c) + "), w (" + std::to_string(d.o) + ", " + std::to_string(d.c) + ", " +
         std::to_string(d.kh) + ", " + std::to_string(d.kw) + "), stride " + std::to_string(d.stride) + ", padding " +
         std::to_string(d.padding);
}

// Runs the three kernels on random data of shape `d` and compares them with the reference.
void check_against_reference(st::Context& ctx, const RefConv2dDims& d, uint64_t seed) {
  BOOST_TEST_CONTEXT(describe(d)) {
    const st::Shape xs{d.n, d.h, d.w, d.c}, ws{d.o, d.c, d.kh, d.kw}, ys{d.n, d.oh(), d.ow(), d.o};
    const st::ops::Conv2dParams p{static_cast<int>(d.stride), static_cast<int>(d.padding)};
    BOOST_TEST(st::ops::conv2d_output_shape(p, xs, ws) == ys);

    const auto x = random_floats(st::shape_numel(xs), seed);
    const auto w = random_floats(st::shape_numel(ws), seed + 1);
    const auto dy = random_floats(st::shape_numel(ys), seed + 2);
    const st::Tensor xt = st::test::to_tensor(x, xs), wt = st::test::to_tensor(w, ws);
    const st::Tensor dyt = st::test::to_tensor(dy, ys);

    st::Tensor y = nan_tensor(ys), dx = nan_tensor(xs), dw = nan_tensor(ws);
    st::ops::conv2d_forward(ctx, p, xt, wt, y);
    st::ops::conv2d_backward_data(ctx, p, dyt, wt, dx);
    st::ops::conv2d_backward_filter(ctx, p, xt, dyt, dw);

    ST_CHECK_CLOSE_VECTORS(st::test::to_vector(y), st::test::reference_conv2d_forward(d, x, w), 1e-4, 1e-4);
    ST_CHECK_CLOSE_VECTORS(st::test::to_vector(dx), st::test::reference_conv2d_backward_data(d, dy, w), 1e-4, 1e-4);
    ST_CHECK_CLOSE_VECTORS(st::test::to_vector(dw), st::test::reference_conv2d_backward_filter(d, x, dy), 1e-4, 1e-4);
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(conv2d)

// The kernels against the float64 reference on odd and ResNet-like shapes are op cases
// (tests/support/op_cases.cpp: unit.backend_ops on the CPU, gpu.backend_ops on a GPU).

BOOST_AUTO_TEST_CASE(cached_primitives_follow_new_buffers) {
  // The same shapes again after another shape, with new data: cached primitives must read the
  // buffers of this call, not those of the call that built them.
  st::Context ctx;
  const RefConv2dDims a{2, 6, 5, 4, 3, 3, 3, 1, 1}, b{2, 6, 5, 4, 3, 3, 3, 2, 1};
  check_against_reference(ctx, a, 1);
  check_against_reference(ctx, b, 2);
  check_against_reference(ctx, a, 3);
}

BOOST_AUTO_TEST_CASE(reference_backward_matches_finite_differences) {
  const RefConv2dDims cases[] = {
      {2, 5, 6, 3, 4, 3, 3, 1, 1},
      {2, 6, 5, 2, 3, 3, 3, 2, 0},
      {1, 9, 8, 2, 3, 7, 7, 2, 3},
      {2, 4, 5, 3, 2, 1, 1, 2, 0},
  };
  uint64_t seed = 7;
  for (const auto& d : cases) {
    BOOST_TEST_CONTEXT(describe(d)) {
      auto x = st::test::random_vector(d.n * d.h * d.w * d.c, ++seed);
      auto w = st::test::random_vector(d.o * d.c * d.kh * d.kw, ++seed);
      const auto r = st::test::random_vector(d.n * d.oh() * d.ow() * d.o, ++seed);
      // Scalar loss L = sum(y * r), so dL/dy = r.
      auto loss = [&] {
        const auto y = st::test::reference_conv2d_forward(d, x, w);
        double s = 0;
        for (std::size_t i = 0; i < y.size(); ++i) s += y[i] * r[i];
        return s;
      };
      ST_CHECK_CLOSE_VECTORS(st::test::reference_conv2d_backward_data(d, r, w), st::test::numeric_gradient(loss, x),
                             1e-7, 1e-6);
      ST_CHECK_CLOSE_VECTORS(st::test::reference_conv2d_backward_filter(d, x, r), st::test::numeric_gradient(loss, w),
                             1e-7, 1e-6);
    }
  }
}

BOOST_AUTO_TEST_CASE(output_shape_follows_pytorch) {
  const st::ops::Conv2dParams stem{2, 3};
  BOOST_TEST(st::ops::conv2d_output_shape(stem, {8, 224, 224, 3}, {64, 3, 7, 7}) == (st::Shape{8, 112, 112, 64}));
  const st::ops::Conv2dParams down{2, 1};
  BOOST_TEST(st::ops::conv2d_output_shape(down, {4, 28, 28, 16}, {32, 16, 3, 3}) == (st::Shape{4, 14, 14, 32}));
  BOOST_TEST(st::ops::conv2d_output_shape(down, {4, 7, 7, 64}, {64, 64, 3, 3}) == (st::Shape{4, 4, 4, 64}));
  const st::ops::Conv2dParams valid{1, 0};
  BOOST_TEST(st::ops::conv2d_output_shape(valid, {1, 3, 3, 2}, {5, 2, 3, 3}) == (st::Shape{1, 1, 1, 5}));
}

BOOST_AUTO_TEST_CASE(bad_arguments_are_reported) {
  st::Context ctx;
  const st::ops::Conv2dParams p{1, 1};
  const st::Tensor x = st::Tensor::zeros({2, 5, 5, 3}), w = st::Tensor::zeros({4, 2, 3, 3});
  st::Tensor y = st::Tensor::zeros({2, 5, 5, 4});
  auto mentions = [](const char* text) {
    return [text](const st::Error& e) { return std::string(e.what()).find(text) != std::string::npos; };
  };
  BOOST_CHECK_EXCEPTION(st::ops::conv2d_forward(ctx, p, x, w, y), st::Error, mentions("has 3 channels"));
  const st::Tensor w3 = st::Tensor::zeros({4, 3, 3, 3});
  st::Tensor y_wrong = st::Tensor::zeros({2, 4, 5, 4});
  BOOST_CHECK_EXCEPTION(st::ops::conv2d_forward(ctx, p, x, w3, y_wrong), st::Error, mentions("expected [2, 5, 5, 4]"));
  const st::Tensor x_int = st::Tensor::zeros({2, 5, 5, 3}, st::DType::i32);
  BOOST_CHECK_EXCEPTION(st::ops::conv2d_forward(ctx, p, x_int, w3, y), st::Error, mentions("must be float32"));
  BOOST_CHECK_EXCEPTION(st::ops::conv2d_output_shape({1, 0}, {1, 2, 2, 3}, {4, 3, 3, 3}), st::Error,
                        mentions("larger than the padded input"));
  BOOST_CHECK_EXCEPTION(st::ops::conv2d_output_shape({0, 0}, {1, 5, 5, 3}, {4, 3, 3, 3}), st::Error,
                        mentions("stride must be >= 1"));
}

BOOST_AUTO_TEST_SUITE_END()
