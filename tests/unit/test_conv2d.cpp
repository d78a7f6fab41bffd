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
         std::to_string(d.c) + "), w (" + std::to_string(d.o) + ", " + std::to_string(d.group_channels()) + ", " +
         std::to_string(d.kh) + ", " + std::to_string(d.kw) + "), stride " + std::to_string(d.stride_h) + "x" +
         std::to_string(d.stride_w) + ", padding " + std::to_string(d.pad_top) + "," + std::to_string(d.pad_bottom) +
         "," + std::to_string(d.pad_left) + "," + std::to_string(d.pad_right) + ", groups " + std::to_string(d.groups);
}

st::ops::Conv2dParams params_of(const RefConv2dDims& d) {
  return st::ops::Conv2dParams::per_side(static_cast<int>(d.stride_h), static_cast<int>(d.stride_w),
                                         static_cast<int>(d.pad_top), static_cast<int>(d.pad_bottom),
                                         static_cast<int>(d.pad_left), static_cast<int>(d.pad_right),
                                         static_cast<int>(d.groups));
}

// Runs the three kernels on random data of shape `d` (with a bias when `bias`) and compares them
// with the reference.
void check_against_reference(st::Context& ctx, const RefConv2dDims& d, uint64_t seed, bool bias = false) {
  BOOST_TEST_CONTEXT(describe(d) << (bias ? ", bias" : "")) {
    const st::Shape xs{d.n, d.h, d.w, d.c}, ws{d.o, d.group_channels(), d.kh, d.kw}, ys{d.n, d.oh(), d.ow(), d.o};
    const st::ops::Conv2dParams p = params_of(d);
    BOOST_TEST(st::ops::conv2d_output_shape(p, xs, ws) == ys);

    const auto x = random_floats(st::shape_numel(xs), seed);
    const auto w = random_floats(st::shape_numel(ws), seed + 1);
    const auto dy = random_floats(st::shape_numel(ys), seed + 2);
    const auto b = bias ? random_floats(d.o, seed + 3) : std::vector<double>{};
    const st::Tensor xt = st::test::to_tensor(x, xs), wt = st::test::to_tensor(w, ws);
    const st::Tensor dyt = st::test::to_tensor(dy, ys);
    const st::Tensor bt = bias ? st::test::to_tensor(b, {d.o}) : st::Tensor();

    st::Tensor y = nan_tensor(ys), dx = nan_tensor(xs), dw = nan_tensor(ws);
    st::Tensor db = bias ? nan_tensor({d.o}) : st::Tensor();
    st::ops::conv2d_forward(ctx, p, xt, wt, bt, y);
    st::ops::conv2d_backward_data(ctx, p, dyt, wt, dx);
    st::ops::conv2d_backward_filter(ctx, p, xt, dyt, dw, db);

    ST_CHECK_CLOSE_VECTORS(st::test::to_vector(y), st::test::reference_conv2d_forward(d, x, w, b), 1e-4, 1e-4);
    ST_CHECK_CLOSE_VECTORS(st::test::to_vector(dx), st::test::reference_conv2d_backward_data(d, dy, w), 1e-4, 1e-4);
    ST_CHECK_CLOSE_VECTORS(st::test::to_vector(dw), st::test::reference_conv2d_backward_filter(d, x, dy), 1e-4, 1e-4);
    if (bias)
      ST_CHECK_CLOSE_VECTORS(st::test::to_vector(db), st::test::reference_conv2d_backward_bias(d, dy), 1e-4, 1e-4);
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
  const RefConv2dDims a = RefConv2dDims::square(2, 6, 5, 4, 3, 3, 3, 1, 1),
                      b = RefConv2dDims::square(2, 6, 5, 4, 3, 3, 3, 2, 1);
  check_against_reference(ctx, a, 1);
  check_against_reference(ctx, b, 2);
  check_against_reference(ctx, a, 3);
  // The same shapes with a bias, and with groups: other primitives (the key names both), which
  // must not be mistaken for the ones above.
  const RefConv2dDims grouped = RefConv2dDims::square(2, 6, 5, 4, 4, 3, 3, 1, 1, 2);
  check_against_reference(ctx, a, 4, true);
  check_against_reference(ctx, grouped, 5, true);
  check_against_reference(ctx, grouped, 6);
  check_against_reference(ctx, a, 7);
  check_against_reference(ctx, a, 8, true);
}

BOOST_AUTO_TEST_CASE(reference_backward_matches_finite_differences) {
  // {n, h, w, c, o, kh, kw, stride_h, stride_w, pad_top, pad_bottom, pad_left, pad_right, groups}
  const RefConv2dDims cases[] = {
      RefConv2dDims::square(2, 5, 6, 3, 4, 3, 3, 1, 1), RefConv2dDims::square(2, 6, 5, 2, 3, 3, 3, 2, 0),
      RefConv2dDims::square(1, 9, 8, 2, 3, 7, 7, 2, 3), RefConv2dDims::square(2, 4, 5, 3, 2, 1, 1, 2, 0),
      {2, 6, 7, 4, 6, 1, 3, 1, 2, 0, 0, 1, 1, 2},  // 1x3, strides 1x2, groups 2
      {2, 7, 6, 3, 3, 3, 2, 2, 1, 2, 0, 0, 1, 3},  // 3x2, every side padded differently, depthwise
  };
  uint64_t seed = 7;
  for (const auto& d : cases) {
    BOOST_TEST_CONTEXT(describe(d)) {
      auto x = st::test::random_vector(d.n * d.h * d.w * d.c, ++seed);
      auto w = st::test::random_vector(d.o * d.group_channels() * d.kh * d.kw, ++seed);
      auto b = st::test::random_vector(d.o, ++seed);
      const auto r = st::test::random_vector(d.n * d.oh() * d.ow() * d.o, ++seed);
      // Scalar loss L = sum(y * r), so dL/dy = r.
      auto loss = [&] {
        const auto y = st::test::reference_conv2d_forward(d, x, w, b);
        double s = 0;
        for (std::size_t i = 0; i < y.size(); ++i) s += y[i] * r[i];
        return s;
      };
      ST_CHECK_CLOSE_VECTORS(st::test::reference_conv2d_backward_data(d, r, w), st::test::numeric_gradient(loss, x),
                             1e-7, 1e-6);
      ST_CHECK_CLOSE_VECTORS(st::test::reference_conv2d_backward_filter(d, x, r), st::test::numeric_gradient(loss, w),
                             1e-7, 1e-6);
      ST_CHECK_CLOSE_VECTORS(st::test::reference_conv2d_backward_bias(d, r), st::test::numeric_gradient(loss, b), 1e-7,
                             1e-6);
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
  const st::Tensor none;  // no bias
  auto mentions = [](const char* text) {
    return [text](const st::Error& e) { return std::string(e.what()).find(text) != std::string::npos; };
  };
  BOOST_CHECK_EXCEPTION(st::ops::conv2d_forward(ctx, p, x, w, none, y), st::Error, mentions("has 3 channels"));
  const st::Tensor w3 = st::Tensor::zeros({4, 3, 3, 3});
  st::Tensor y_wrong = st::Tensor::zeros({2, 4, 5, 4});
  BOOST_CHECK_EXCEPTION(st::ops::conv2d_forward(ctx, p, x, w3, none, y_wrong), st::Error,
                        mentions("expected [2, 5, 5, 4]"));
  const st::Tensor x_int = st::Tensor::zeros({2, 5, 5, 3}, st::DType::i32);
  BOOST_CHECK_EXCEPTION(st::ops::conv2d_forward(ctx, p, x_int, w3, none, y), st::Error, mentions("must be float32"));
  BOOST_CHECK_EXCEPTION(st::ops::conv2d_output_shape({1, 0}, {1, 2, 2, 3}, {4, 3, 3, 3}), st::Error,
                        mentions("larger than the padded input"));
  BOOST_CHECK_EXCEPTION(st::ops::conv2d_output_shape({0, 0}, {1, 5, 5, 3}, {4, 3, 3, 3}), st::Error,
                        mentions("stride must be >= 1"));
  // Groups: both channel counts must divide, and the weight holds C / groups input channels.
  BOOST_CHECK_EXCEPTION(st::ops::conv2d_output_shape({1, 1, 2}, {1, 5, 5, 3}, {4, 1, 3, 3}), st::Error,
                        mentions("3 channels are not divisible by groups 2"));
  BOOST_CHECK_EXCEPTION(st::ops::conv2d_output_shape({1, 1, 2}, {1, 5, 5, 4}, {5, 2, 3, 3}), st::Error,
                        mentions("5 output channels, not divisible by groups 2"));
  BOOST_CHECK_EXCEPTION(st::ops::conv2d_output_shape({1, 1, 2}, {1, 5, 5, 4}, {4, 4, 3, 3}), st::Error,
                        mentions("expects 8 (groups 2)"));
  BOOST_CHECK_EXCEPTION(st::ops::conv2d_output_shape({1, 1, 0}, {1, 5, 5, 4}, {4, 4, 3, 3}), st::Error,
                        mentions("groups must be >= 1, got 0"));
  BOOST_CHECK_EXCEPTION(
      st::ops::conv2d_output_shape(st::ops::Conv2dParams::per_side(1, 1, 0, -1, 0, 0), {1, 5, 5, 3}, {4, 3, 3, 3}),
      st::Error, mentions("bottom -1"));
  // A bias (or its gradient) has one value per output channel.
  const st::Tensor b_wrong = st::Tensor::zeros({3});
  BOOST_CHECK_EXCEPTION(st::ops::conv2d_forward(ctx, p, x, w3, b_wrong, y), st::Error,
                        mentions("conv2d_forward: b has shape [3], expected [4]"));
  st::Tensor dw = st::Tensor::zeros({4, 3, 3, 3}), db_wrong = st::Tensor::zeros({5});
  BOOST_CHECK_EXCEPTION(st::ops::conv2d_backward_filter(ctx, p, x, y, dw, db_wrong), st::Error,
                        mentions("conv2d_backward_filter: db has shape [5], expected [4]"));
}

BOOST_AUTO_TEST_CASE(output_shape_of_rectangular_grouped_and_padded_per_side) {
  using st::ops::Conv2dParams;
  // Inception's 1x7 and 7x1 with per-dimension padding keep the size.
  BOOST_TEST(st::ops::conv2d_output_shape(Conv2dParams::per_dim(1, 1, 0, 3), {2, 17, 17, 128}, {128, 128, 1, 7}) ==
             (st::Shape{2, 17, 17, 128}));
  BOOST_TEST(st::ops::conv2d_output_shape(Conv2dParams::per_dim(1, 1, 3, 0), {2, 17, 17, 128}, {192, 128, 7, 1}) ==
             (st::Shape{2, 17, 17, 192}));
  // AlexNet's conv1 (k11 s4 p2) at 224, and Caffe's grouped conv2 (256 outputs, 48 inputs per group).
  BOOST_TEST(st::ops::conv2d_output_shape({4, 2}, {1, 224, 224, 3}, {64, 3, 11, 11}) == (st::Shape{1, 55, 55, 64}));
  BOOST_TEST(st::ops::conv2d_output_shape({1, 2, 2}, {1, 27, 27, 96}, {256, 48, 5, 5}) == (st::Shape{1, 27, 27, 256}));
  // Per side: top 1 bottom 0 left 2 right 1 with strides 2 and 1.
  BOOST_TEST(st::ops::conv2d_output_shape(Conv2dParams::per_side(2, 1, 1, 0, 2, 1), {1, 7, 8, 3}, {2, 3, 3, 3}) ==
             (st::Shape{1, 3, 9, 2}));
  BOOST_TEST(Conv2dParams(2, 3).symmetric_padding());
  BOOST_TEST(!Conv2dParams::per_side(1, 1, 1, 0, 1, 1).symmetric_padding());
}

BOOST_AUTO_TEST_CASE(per_side_padding_bias_and_groups_against_the_reference) {
  st::Context ctx;
  check_against_reference(ctx, {2, 7, 8, 4, 6, 3, 3, 2, 1, 1, 0, 2, 1, 2}, 11, true);
  check_against_reference(ctx, {1, 5, 6, 4, 4, 2, 3, 1, 1, 0, 1, 1, 1, 4}, 12, true);
  check_against_reference(ctx, RefConv2dDims::square(2, 19, 19, 3, 8, 11, 11, 4, 2), 13, true);
}

BOOST_AUTO_TEST_SUITE_END()
