// 16-bit storage at the op dispatch (ops/op.hpp, Context::activation_dtype): under amp-fp16 and
// amp-bf16 an op given f16 or bf16 tensors (activations stored in 16 bits) writes the bits that
// the same op gives on fp32 tensors holding the same 16-bit values, its outputs rounded (the
// emulation every AMP test before checked). Covered: an element-wise op, an in-place one, a
// convolution forward and both backwards (fp32 weight gradients beside 16-bit activations), batch
// norm (fp32 statistics), pooling, a loss with its returned value, and the channel concatenation
// whose backward writes through a const vector of tensors. And: fp32 refuses 16-bit tensors,
// naming the op; the precision sets the activation dtype.
#include <boost/test/unit_test.hpp>
#include <cstring>
#include <vector>

#include "scaletrain/backend/context.hpp"
#include "scaletrain/core/rng.hpp"
#include "scaletrain/ops/activation.hpp"
#include "scaletrain/ops/batch_norm.hpp"
#include "scaletrain/ops/cast.hpp"
#include "scaletrain/ops/concat.hpp"
#include "scaletrain/ops/conv2d.hpp"
#include "scaletrain/ops/loss.hpp"
#include "scaletrain/ops/pool.hpp"

namespace st = scaletrain;
namespace ops = st::ops;

namespace {

struct Amp {
  st::Precision precision;
  st::DType dtype;
};
const Amp kAmps[] = {{st::Precision::amp_fp16, st::DType::f16}, {st::Precision::amp_bf16, st::DType::bf16}};

// Random values in [-2, 2), rounded to the format: an fp32 tensor and its 16-bit twin.
struct Pair {
  st::Tensor wide, half;
};
Pair random_pair(st::Context& ctx, const st::Shape& shape, st::DType dtype, uint64_t seed) {
  st::Rng rng(seed);
  st::Tensor f = st::Tensor::empty(shape, st::DType::f32);
  for (int64_t i = 0; i < f.numel(); ++i) f.data<float>()[i] = static_cast<float>(4.0 * rng.uniform() - 2.0);
  Pair p{st::Tensor::empty(shape, st::DType::f32), st::Tensor::empty(shape, dtype)};
  ops::cast_to_half(ctx, f, p.half);
  ops::cast_from_half(ctx, p.half, p.wide);
  return p;
}

st::Tensor empty_half(const st::Shape& shape, st::DType dtype) { return st::Tensor::empty(shape, dtype); }

// The 16-bit tensor's values equal the fp32 tensor's, bit for bit.
void check_same(st::Context& ctx, const st::Tensor& half, const st::Tensor& wide, const char* what) {
  BOOST_TEST_REQUIRE((half.dtype() != st::DType::f32));
  st::Tensor back = st::Tensor::empty(half.shape(), st::DType::f32);
  ops::cast_from_half(ctx, half, back);
  BOOST_TEST(std::memcmp(back.raw(), wide.raw(), wide.bytes()) == 0, what << ": 16-bit storage differs");
}

void check_same_f32(const st::Tensor& a, const st::Tensor& b, const char* what) {
  BOOST_TEST(std::memcmp(a.raw(), b.raw(), a.bytes()) == 0, what << ": fp32 outputs differ");
}

}  // namespace

BOOST_AUTO_TEST_SUITE(half_storage)

BOOST_AUTO_TEST_CASE(the_precision_sets_the_activation_dtype) {
  st::Context ctx;
  BOOST_TEST((ctx.activation_dtype() == st::DType::f32));
  ctx.set_precision(st::Precision::amp_fp16);
  BOOST_TEST((ctx.activation_dtype() == st::DType::f16));
  ctx.set_precision(st::Precision::amp_bf16);
  BOOST_TEST((ctx.activation_dtype() == st::DType::bf16));
  ctx.set_precision(st::Precision::fp32);
  BOOST_TEST((ctx.activation_dtype() == st::DType::f32));
}

BOOST_AUTO_TEST_CASE(elementwise_and_in_place_ops) {
  for (const Amp& amp : kAmps) {
    st::Context ctx;
    ctx.set_precision(amp.precision);
    const st::Shape shape{3, 5, 7};
    Pair x = random_pair(ctx, shape, amp.dtype, 1), y = random_pair(ctx, shape, amp.dtype, 2);
    st::Tensor out_w = st::Tensor::empty(shape, st::DType::f32), out_h = empty_half(shape, amp.dtype);
    ops::relu_forward(ctx, x.wide, out_w);
    ops::relu_forward(ctx, x.half, out_h);
    check_same(ctx, out_h, out_w, "relu_forward");
    // add_inplace: y += x, its sum rounded once.
    ops::add_inplace(ctx, y.wide, x.wide);
    ops::add_inplace(ctx, y.half, x.half);
    check_same(ctx, y.half, y.wide, "add_inplace");
  }
}

BOOST_AUTO_TEST_CASE(convolution_forward_and_backward_with_fp32_weight_gradients) {
  for (const Amp& amp : kAmps) {
    st::Context ctx;
    ctx.set_precision(amp.precision);
    const ops::Conv2dParams p(1, 1);
    Pair x = random_pair(ctx, {2, 6, 6, 3}, amp.dtype, 3);
    Pair w = random_pair(ctx, {4, 3, 3, 3}, amp.dtype, 4);  // the weight copy: fp32 holding 16-bit values
    st::Tensor b = st::Tensor::zeros({4}, st::DType::f32);
    const st::Shape ys = ops::conv2d_output_shape(p, x.wide.shape(), w.wide.shape());
    st::Tensor y_w = st::Tensor::empty(ys, st::DType::f32), y_h = empty_half(ys, amp.dtype);
    ops::conv2d_forward(ctx, p, x.wide, w.wide, b, y_w);
    ops::conv2d_forward(ctx, p, x.half, w.wide, b, y_h);
    check_same(ctx, y_h, y_w, "conv2d_forward");
    Pair dy = random_pair(ctx, ys, amp.dtype, 5);
    st::Tensor dx_w = st::Tensor::empty(x.wide.shape(), st::DType::f32), dx_h = empty_half(x.wide.shape(), amp.dtype);
    ops::conv2d_backward_data(ctx, p, dy.wide, w.wide, dx_w);
    ops::conv2d_backward_data(ctx, p, dy.half, w.wide, dx_h);
    check_same(ctx, dx_h, dx_w, "conv2d_backward_data");
    st::Tensor dw1 = st::Tensor::empty(w.wide.shape(), st::DType::f32), db1 = st::Tensor::empty({4}, st::DType::f32);
    st::Tensor dw2 = st::Tensor::empty(w.wide.shape(), st::DType::f32), db2 = st::Tensor::empty({4}, st::DType::f32);
    ops::conv2d_backward_filter(ctx, p, x.wide, dy.wide, dw1, db1);
    ops::conv2d_backward_filter(ctx, p, x.half, dy.half, dw2, db2);
    check_same_f32(dw1, dw2, "conv2d_backward_filter dw");
    check_same_f32(db1, db2, "conv2d_backward_filter db");
  }
}

BOOST_AUTO_TEST_CASE(batch_norm_keeps_fp32_statistics_beside_16_bit_activations) {
  for (const Amp& amp : kAmps) {
    st::Context ctx;
    ctx.set_precision(amp.precision);
    const ops::BatchNormParams p;
    Pair x = random_pair(ctx, {4, 3, 3, 5}, amp.dtype, 6);
    st::Tensor gamma = st::Tensor::empty({5}, st::DType::f32), beta = st::Tensor::zeros({5}, st::DType::f32);
    gamma.fill(1.5f);
    st::Tensor rm[2], rv[2], sm[2], si[2];
    for (int k = 0; k < 2; ++k) {
      rm[k] = st::Tensor::zeros({5}, st::DType::f32);
      rv[k] = st::Tensor::empty({5}, st::DType::f32);
      rv[k].fill(1.0f);
      sm[k] = st::Tensor::empty({5}, st::DType::f32);
      si[k] = st::Tensor::empty({5}, st::DType::f32);
    }
    st::Tensor y_w = st::Tensor::empty(x.wide.shape(), st::DType::f32), y_h = empty_half(x.wide.shape(), amp.dtype);
    ops::batch_norm_forward_training(ctx, p, x.wide, gamma, beta, rm[0], rv[0], y_w, sm[0], si[0]);
    ops::batch_norm_forward_training(ctx, p, x.half, gamma, beta, rm[1], rv[1], y_h, sm[1], si[1]);
    check_same(ctx, y_h, y_w, "batch_norm_forward_training y");
    check_same_f32(rm[0], rm[1], "running mean");
    check_same_f32(rv[0], rv[1], "running var");
    check_same_f32(si[0], si[1], "saved inverse std");
    Pair dy = random_pair(ctx, x.wide.shape(), amp.dtype, 7);
    st::Tensor dx_w = st::Tensor::empty(x.wide.shape(), st::DType::f32), dx_h = empty_half(x.wide.shape(), amp.dtype);
    st::Tensor dg[2] = {st::Tensor::empty({5}, st::DType::f32), st::Tensor::empty({5}, st::DType::f32)};
    st::Tensor dbt[2] = {st::Tensor::empty({5}, st::DType::f32), st::Tensor::empty({5}, st::DType::f32)};
    ops::batch_norm_backward(ctx, p, x.wide, dy.wide, gamma, sm[0], si[0], dx_w, dg[0], dbt[0]);
    ops::batch_norm_backward(ctx, p, x.half, dy.half, gamma, sm[1], si[1], dx_h, dg[1], dbt[1]);
    check_same(ctx, dx_h, dx_w, "batch_norm_backward dx");
    check_same_f32(dg[0], dg[1], "dgamma");
    check_same_f32(dbt[0], dbt[1], "dbeta");
  }
}

BOOST_AUTO_TEST_CASE(pooling_loss_and_channel_concatenation) {
  for (const Amp& amp : kAmps) {
    st::Context ctx;
    ctx.set_precision(amp.precision);
    Pair x = random_pair(ctx, {2, 4, 4, 3}, amp.dtype, 8);
    st::Tensor g_w = st::Tensor::empty({2, 3}, st::DType::f32), g_h = empty_half({2, 3}, amp.dtype);
    ops::global_avg_pool_forward(ctx, x.wide, g_w);
    ops::global_avg_pool_forward(ctx, x.half, g_h);
    check_same(ctx, g_h, g_w, "global_avg_pool_forward");

    Pair logits = random_pair(ctx, {6, 10}, amp.dtype, 9);
    st::Tensor labels = st::Tensor::empty({6}, st::DType::i32);
    for (int i = 0; i < 6; ++i) labels.data<int32_t>()[i] = (3 * i) % 10;
    st::Tensor d_w = st::Tensor::empty({6, 10}, st::DType::f32), d_h = st::Tensor::empty({6, 10}, st::DType::f32);
    const double loss_w = ops::softmax_cross_entropy(ctx, logits.wide, labels, 0.1f, d_w, 1024.0);
    const double loss_h = ops::softmax_cross_entropy(ctx, logits.half, labels, 0.1f, d_h, 1024.0);
    BOOST_TEST(loss_w == loss_h);
    check_same_f32(d_w, d_h, "softmax_cross_entropy dlogits");

    Pair a = random_pair(ctx, {2, 3, 3, 2}, amp.dtype, 10), b = random_pair(ctx, {2, 3, 3, 4}, amp.dtype, 11);
    st::Tensor c_w = st::Tensor::empty({2, 3, 3, 6}, st::DType::f32), c_h = empty_half({2, 3, 3, 6}, amp.dtype);
    ops::concat_channels_forward(ctx, {a.wide, b.wide}, c_w);
    ops::concat_channels_forward(ctx, {a.half, b.half}, c_h);
    check_same(ctx, c_h, c_w, "concat_channels_forward");
    // Backward writes through the const vector's handles: each part is dy's slice.
    Pair dc = random_pair(ctx, {2, 3, 3, 6}, amp.dtype, 12);
    st::Tensor da_w = st::Tensor::empty(a.wide.shape(), st::DType::f32),
               db_w = st::Tensor::empty(b.wide.shape(), st::DType::f32);
    st::Tensor da_h = empty_half(a.wide.shape(), amp.dtype), db_h = empty_half(b.wide.shape(), amp.dtype);
    ops::concat_channels_backward(ctx, dc.wide, {da_w, db_w});
    ops::concat_channels_backward(ctx, dc.half, {da_h, db_h});
    check_same(ctx, da_h, da_w, "concat_channels_backward a");
    check_same(ctx, db_h, db_w, "concat_channels_backward b");
  }
}

BOOST_AUTO_TEST_CASE(fp32_refuses_16_bit_tensors_naming_the_op) {
  st::Context ctx;
  st::Tensor x = st::Tensor::zeros({4}, st::DType::f16), y = st::Tensor::empty({4}, st::DType::f32);
  try {
    ops::relu_forward(ctx, x, y);
    BOOST_FAIL("an f16 tensor in fp32 ran");
  } catch (const std::exception& e) {
    BOOST_TEST(std::string(e.what()).find("relu_forward: x must be float32, got float16") != std::string::npos,
               e.what());
  }
  // Under amp-bf16, an f16 tensor is the wrong format.
  ctx.set_precision(st::Precision::amp_bf16);
  try {
    ops::relu_forward(ctx, x, y);
    BOOST_FAIL("an f16 tensor in amp-bf16 ran");
  } catch (const std::exception& e) {
    BOOST_TEST(std::string(e.what()).find("must be float32 or bfloat16 (amp-bf16), got float16") != std::string::npos,
               e.what());
  }
}

BOOST_AUTO_TEST_SUITE_END()
