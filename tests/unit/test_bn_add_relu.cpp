// The fused batch norm + add + ReLU (ops::batch_norm_add_relu_forward_training and its backward,
// --fuse bn-add-relu) on the CPU, the reference for cuDNN's fused kernel, against the unfused ops
// it replaces (batch_norm_forward_training, add_forward, relu_forward; relu_backward,
// batch_norm_backward):
//   - fp32: every output bit for bit, forward and backward;
//   - amp-fp16 and amp-bf16: y within one unit of the format at |y|'s largest (one rounding
//     against three), the statistics bit for bit (computed from the same x), backward bit for
//     bit from the same y; 16-bit storage gives the bits of fp32 tensors holding the values;
//   - the argument checks: y overlapping z, a reserve of another dtype.
// And the fused batch norm + ReLU (ops::batch_norm_relu_forward_training and its backward, --fuse
// bn-relu) against batch norm and the ReLU: every output bit for bit in fp32, amp-fp16 and amp-bf16
// (one rounding against two that commute with the ReLU), 16-bit storage alike; its argument checks.
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstring>

#include "scaletrain/backend/context.hpp"
#include "scaletrain/core/rng.hpp"
#include "scaletrain/ops/activation.hpp"
#include "scaletrain/ops/batch_norm.hpp"
#include "scaletrain/ops/cast.hpp"

namespace st = scaletrain;
namespace ops = st::ops;

namespace {

st::Tensor random_tensor(const st::Shape& shape, uint64_t seed, double scale) {
  st::Rng rng(seed);
  st::Tensor t = st::Tensor::empty(shape, st::DType::f32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(scale * (2 * rng.uniform() - 1));
  return t;
}

st::Tensor filled(int64_t c, float v) {
  st::Tensor t = st::Tensor::empty({c}, st::DType::f32);
  t.fill(v);
  return t;
}

// t's values (16-bit values already) in a tensor of the 16-bit type `half`.
st::Tensor half_copy(st::Context& ctx, const st::Tensor& t, st::DType half) {
  st::Tensor h = st::Tensor::empty(t.shape(), half);
  ops::cast_to_half(ctx, t, h);
  return h;
}

bool same_bits(const st::Tensor& a, const st::Tensor& b) {
  return a.numel() == b.numel() && std::memcmp(a.raw(), b.raw(), a.bytes()) == 0;
}

// Everything one forward and backward write, fused or not.
struct Run {
  st::Tensor y, rm, rv, sm, si, dx, dz, dg, db;
};

constexpr int64_t kC = 6;
const st::Shape kShape{3, 4, 5, kC};

// The inputs: x, z, dy (rounded to the precision's format under AMP), gamma, beta.
struct Inputs {
  st::Tensor x, z, dy, gamma, beta;
};

Inputs make_inputs(st::Context& ctx) {
  Inputs in{random_tensor(kShape, 1, 3.0), random_tensor(kShape, 2, 1.5), random_tensor(kShape, 3, 1.0),
            random_tensor({kC}, 4, 1.0), random_tensor({kC}, 5, 0.5)};
  if (const auto f = st::storage_format(ctx.precision()))
    for (st::Tensor* t : {&in.x, &in.z, &in.dy}) st::round_in_place(*f, t->data<float>(), t->numel());
  return in;
}

Run fresh_run() {
  Run r;
  r.y = st::Tensor::empty(kShape, st::DType::f32);
  r.rm = filled(kC, 0.0f);
  r.rv = filled(kC, 1.0f);
  r.sm = filled(kC, 0.0f);
  r.si = filled(kC, 0.0f);
  r.dx = st::Tensor::empty(kShape, st::DType::f32);
  r.dz = st::Tensor::empty(kShape, st::DType::f32);
  r.dg = filled(kC, 0.0f);
  r.db = filled(kC, 0.0f);
  return r;
}

Run unfused(st::Context& ctx, const Inputs& in) {
  const ops::BatchNormParams p;
  Run r = fresh_run();
  ops::batch_norm_forward_training(ctx, p, in.x, in.gamma, in.beta, r.rm, r.rv, r.y, r.sm, r.si);
  ops::add_forward(ctx, r.y, in.z, r.y);
  ops::relu_forward(ctx, r.y, r.y);
  ops::relu_backward(ctx, r.y, in.dy, r.dz);
  ops::batch_norm_backward(ctx, p, in.x, r.dz, in.gamma, r.sm, r.si, r.dx, r.dg, r.db);
  return r;
}

// The fused forward; its backward from the y given (the fused run's own, or the unfused one's).
Run fused(st::Context& ctx, const Inputs& in, const st::Tensor* backward_y = nullptr) {
  const ops::BatchNormParams p;
  Run r = fresh_run();
  st::Tensor reserve;
  ops::batch_norm_add_relu_forward_training(ctx, p, in.x, in.z, in.gamma, in.beta, r.rm, r.rv, r.y, r.sm, r.si,
                                            reserve);
  BOOST_TEST(!reserve.defined());  // the CPU keeps none
  const st::Tensor& y = backward_y ? *backward_y : r.y;
  ops::batch_norm_add_relu_backward(ctx, p, in.x, y, in.dy, in.gamma, in.beta, r.sm, r.si, reserve, r.dx, r.dz, r.dg,
                                    r.db);
  return r;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(bn_add_relu)

BOOST_AUTO_TEST_CASE(fp32_gives_the_bits_of_the_three_ops) {
  st::Context ctx;
  const Inputs in = make_inputs(ctx);
  const Run a = unfused(ctx, in), b = fused(ctx, in);
  BOOST_TEST(same_bits(a.y, b.y));
  BOOST_TEST(same_bits(a.rm, b.rm));
  BOOST_TEST(same_bits(a.rv, b.rv));
  BOOST_TEST(same_bits(a.sm, b.sm));
  BOOST_TEST(same_bits(a.si, b.si));
  BOOST_TEST(same_bits(a.dz, b.dz));
  BOOST_TEST(same_bits(a.dx, b.dx));
  BOOST_TEST(same_bits(a.dg, b.dg));
  BOOST_TEST(same_bits(a.db, b.db));
  // Some outputs are clipped by the ReLU and some are not: the mask is exercised.
  int zeros = 0;
  for (int64_t i = 0; i < b.y.numel(); ++i) zeros += b.y.data<float>()[i] == 0.0f;
  BOOST_TEST(zeros > 0);
  BOOST_TEST(zeros < b.y.numel());
}

BOOST_AUTO_TEST_CASE(mixed_precision_rounds_once) {
  for (const st::Precision precision : {st::Precision::amp_fp16, st::Precision::amp_bf16}) {
    st::Context ctx;
    ctx.set_precision(precision);
    const double unit = precision == st::Precision::amp_fp16 ? 1.0 / 1024 : 1.0 / 128;
    const Inputs in = make_inputs(ctx);
    const Run a = unfused(ctx, in), b = fused(ctx, in, &a.y);
    double largest = 0.0, worst = 0.0;
    for (int64_t i = 0; i < a.y.numel(); ++i) {
      largest = std::max(largest, std::fabs(double(a.y.data<float>()[i])));
      worst = std::max(worst, std::fabs(double(a.y.data<float>()[i]) - b.y.data<float>()[i]));
    }
    BOOST_TEST(worst <= unit * largest, precision_name(precision) << ": y " << worst << " apart");
    BOOST_TEST(same_bits(a.rm, b.rm));
    BOOST_TEST(same_bits(a.si, b.si));
    BOOST_TEST(same_bits(a.dz, b.dz));  // backward from the same y
    BOOST_TEST(same_bits(a.dx, b.dx));
    BOOST_TEST(same_bits(a.dg, b.dg));
    // 16-bit storage: the fused op on 16-bit x, z, y, dy, dx, dz gives the same bits.
    const st::DType half = precision == st::Precision::amp_fp16 ? st::DType::f16 : st::DType::bf16;
    auto to_half = [&](const st::Tensor& t) { return half_copy(ctx, t, half); };
    Inputs h = in;
    h.x = to_half(in.x), h.z = to_half(in.z), h.dy = to_half(in.dy);
    const ops::BatchNormParams p;
    Run c = fresh_run();
    st::Tensor y16 = st::Tensor::empty(kShape, half), dx16 = st::Tensor::empty(kShape, half),
               dz16 = st::Tensor::empty(kShape, half), reserve;
    ops::batch_norm_add_relu_forward_training(ctx, p, h.x, h.z, h.gamma, h.beta, c.rm, c.rv, y16, c.sm, c.si, reserve);
    ops::batch_norm_add_relu_backward(ctx, p, h.x, y16, h.dy, h.gamma, h.beta, c.sm, c.si, reserve, dx16, dz16, c.dg,
                                      c.db);
    const Run own = fused(ctx, in);
    BOOST_TEST(same_bits(ops::as_f32(ctx, y16), own.y));
    BOOST_TEST(same_bits(ops::as_f32(ctx, dx16), own.dx));
    BOOST_TEST(same_bits(ops::as_f32(ctx, dz16), own.dz));
    BOOST_TEST(same_bits(c.dg, own.dg));
  }
}

BOOST_AUTO_TEST_CASE(bad_arguments_name_the_op) {
  st::Context ctx;
  const Inputs in = make_inputs(ctx);
  Run r = fresh_run();
  st::Tensor reserve;
  const ops::BatchNormParams p;
  st::Tensor y = in.z;  // y over z
  BOOST_CHECK_EXCEPTION(ops::batch_norm_add_relu_forward_training(ctx, p, in.x, in.z, in.gamma, in.beta, r.rm, r.rv, y,
                                                                  r.sm, r.si, reserve),
                        std::exception, [](const std::exception& e) {
                          return std::string(e.what()).find("batch_norm_add_relu_forward_training: y overlaps z") !=
                                 std::string::npos;
                        });
  st::Tensor bad_reserve = st::Tensor::empty({4}, st::DType::f32);
  BOOST_CHECK_EXCEPTION(ops::batch_norm_add_relu_forward_training(ctx, p, in.x, in.z, in.gamma, in.beta, r.rm, r.rv,
                                                                  r.y, r.sm, r.si, bad_reserve),
                        std::exception, [](const std::exception& e) {
                          return std::string(e.what()).find("reserve must be u8") != std::string::npos;
                        });
}

BOOST_AUTO_TEST_SUITE_END()

// ---- batch norm + ReLU ----

namespace {

Run unfused_bn_relu(st::Context& ctx, const Inputs& in) {
  const ops::BatchNormParams p;
  Run r = fresh_run();
  ops::batch_norm_forward_training(ctx, p, in.x, in.gamma, in.beta, r.rm, r.rv, r.y, r.sm, r.si);
  ops::relu_forward(ctx, r.y, r.y);
  ops::relu_backward(ctx, r.y, in.dy, r.dz);
  ops::batch_norm_backward(ctx, p, in.x, r.dz, in.gamma, r.sm, r.si, r.dx, r.dg, r.db);
  return r;
}

Run fused_bn_relu(st::Context& ctx, const Inputs& in) {
  const ops::BatchNormParams p;
  Run r = fresh_run();
  st::Tensor reserve;
  ops::batch_norm_relu_forward_training(ctx, p, in.x, in.gamma, in.beta, r.rm, r.rv, r.y, r.sm, r.si, reserve);
  BOOST_TEST(!reserve.defined());  // the CPU keeps none
  ops::batch_norm_relu_backward(ctx, p, in.x, r.y, in.dy, in.gamma, in.beta, r.sm, r.si, reserve, r.dx, r.dg, r.db);
  return r;
}

void expect_same_outputs(const Run& a, const Run& b) {
  BOOST_TEST(same_bits(a.y, b.y));
  BOOST_TEST(same_bits(a.rm, b.rm));
  BOOST_TEST(same_bits(a.rv, b.rv));
  BOOST_TEST(same_bits(a.sm, b.sm));
  BOOST_TEST(same_bits(a.si, b.si));
  BOOST_TEST(same_bits(a.dx, b.dx));
  BOOST_TEST(same_bits(a.dg, b.dg));
  BOOST_TEST(same_bits(a.db, b.db));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(bn_relu)

BOOST_AUTO_TEST_CASE(gives_the_bits_of_the_two_ops_in_every_precision) {
  for (const st::Precision precision : {st::Precision::fp32, st::Precision::amp_fp16, st::Precision::amp_bf16}) {
    BOOST_TEST_CONTEXT(precision_name(precision)) {
      st::Context ctx;
      ctx.set_precision(precision);
      const Inputs in = make_inputs(ctx);
      const Run a = unfused_bn_relu(ctx, in), b = fused_bn_relu(ctx, in);
      expect_same_outputs(a, b);
      // Some outputs are clipped by the ReLU and some are not: the mask is exercised.
      int zeros = 0;
      for (int64_t i = 0; i < b.y.numel(); ++i) zeros += b.y.data<float>()[i] == 0.0f;
      BOOST_TEST(zeros > 0);
      BOOST_TEST(zeros < b.y.numel());
    }
  }
}

BOOST_AUTO_TEST_CASE(half_storage_gives_the_bits_of_fp32_tensors) {
  for (const st::Precision precision : {st::Precision::amp_fp16, st::Precision::amp_bf16}) {
    BOOST_TEST_CONTEXT(precision_name(precision)) {
      st::Context ctx;
      ctx.set_precision(precision);
      const Inputs in = make_inputs(ctx);
      const st::DType half = precision == st::Precision::amp_fp16 ? st::DType::f16 : st::DType::bf16;
      auto to_half = [&](const st::Tensor& t) { return half_copy(ctx, t, half); };
      const st::Tensor x16 = to_half(in.x), dy16 = to_half(in.dy);
      const ops::BatchNormParams p;
      Run c = fresh_run();
      st::Tensor y16 = st::Tensor::empty(kShape, half), dx16 = st::Tensor::empty(kShape, half), reserve;
      ops::batch_norm_relu_forward_training(ctx, p, x16, in.gamma, in.beta, c.rm, c.rv, y16, c.sm, c.si, reserve);
      ops::batch_norm_relu_backward(ctx, p, x16, y16, dy16, in.gamma, in.beta, c.sm, c.si, reserve, dx16, c.dg, c.db);
      const Run own = fused_bn_relu(ctx, in);
      BOOST_TEST(same_bits(ops::as_f32(ctx, y16), own.y));
      BOOST_TEST(same_bits(ops::as_f32(ctx, dx16), own.dx));
      BOOST_TEST(same_bits(c.dg, own.dg));
      BOOST_TEST(same_bits(c.db, own.db));
    }
  }
}

BOOST_AUTO_TEST_CASE(bad_arguments_name_the_op) {
  st::Context ctx;
  const Inputs in = make_inputs(ctx);
  Run r = fresh_run();
  st::Tensor reserve;
  const ops::BatchNormParams p;
  st::Tensor y = in.x;  // y over x, which backward reads
  BOOST_CHECK_EXCEPTION(
      ops::batch_norm_relu_forward_training(ctx, p, in.x, in.gamma, in.beta, r.rm, r.rv, y, r.sm, r.si, reserve),
      std::exception, [](const std::exception& e) {
        return std::string(e.what()).find("batch_norm_relu_forward_training: y overlaps x") != std::string::npos;
      });
  ops::batch_norm_relu_forward_training(ctx, p, in.x, in.gamma, in.beta, r.rm, r.rv, r.y, r.sm, r.si, reserve);
  st::Tensor dx = in.dy;  // dx over dy
  BOOST_CHECK_EXCEPTION(
      ops::batch_norm_relu_backward(ctx, p, in.x, r.y, in.dy, in.gamma, in.beta, r.sm, r.si, reserve, dx, r.dg, r.db),
      std::exception, [](const std::exception& e) {
        return std::string(e.what()).find("batch_norm_relu_backward: dx overlaps dy") != std::string::npos;
      });
  st::Tensor bad_reserve = st::Tensor::empty({4}, st::DType::f32);
  BOOST_CHECK_EXCEPTION(
      ops::batch_norm_relu_forward_training(ctx, p, in.x, in.gamma, in.beta, r.rm, r.rv, r.y, r.sm, r.si, bad_reserve),
      std::exception, [](const std::exception& e) {
        return std::string(e.what()).find("batch_norm_relu_forward_training: reserve must be u8") != std::string::npos;
      });
}

BOOST_AUTO_TEST_SUITE_END()
