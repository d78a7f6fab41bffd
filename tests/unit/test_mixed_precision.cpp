// Mixed precision on the CPU (docs/mixed-precision.md): under amp-fp16 or amp-bf16 an op rounds
// the activations it writes to the 16-bit format (each equal to the fp32 result rounded once, by
// core/half.hpp's conversions, which torch.torch_half checks against PyTorch's), and leaves fp32
// what the table says stays fp32: batch norm's running and saved statistics and its parameters'
// gradients, the optimizer's weights and state. HalfWeights rounds the weights of two or more
// dimensions for a step and puts the fp32 masters back.
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <vector>

#include "scaletrain/backend/context.hpp"
#include "scaletrain/core/half.hpp"
#include "scaletrain/nn/parameters.hpp"
#include "scaletrain/ops/activation.hpp"
#include "scaletrain/ops/batch_norm.hpp"
#include "scaletrain/ops/sgd.hpp"
#include "scaletrain/train/mixed_precision.hpp"
#include "support/gradcheck.hpp"

namespace st = scaletrain;
using st::Context;
using st::HalfFormat;
using st::Precision;
using st::Tensor;

namespace {

std::vector<double> random_values(std::size_t n, uint64_t seed) {
  std::vector<double> v(n);
  uint64_t s = seed;
  for (double& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = (static_cast<double>(s >> 11) / 9007199254740992.0 - 0.5) * 6.0;  // [-3, 3)
  }
  return v;
}

// Elements that a float holds but the format does not: a rounding leaves none of them.
int64_t not_representable(HalfFormat f, const Tensor& t) {
  int64_t n = 0;
  for (int64_t i = 0; i < t.numel(); ++i) n += st::round_to(f, t.data<float>()[i]) != t.data<float>()[i] ? 1 : 0;
  return n;
}

// Batch norm training forward on (8, 3, 3, 5) in `precision`; returns y, running mean, saved mean.
std::vector<Tensor> batch_norm_in(Precision precision, const std::vector<double>& x) {
  Context ctx;
  ctx.set_precision(precision);
  const int64_t c = 5;
  Tensor in = st::test::to_tensor(x, {8, 3, 3, c});
  Tensor gamma = st::test::to_tensor(random_values(c, 3), {c});
  Tensor beta = st::test::to_tensor(random_values(c, 4), {c});
  Tensor running_mean = Tensor::zeros({c}), running_var = Tensor::zeros({c});
  running_var.fill(1.0f);
  Tensor y = Tensor::empty(in.shape()), saved_mean = Tensor::empty({c}), saved_inv_std = Tensor::empty({c});
  st::ops::batch_norm_forward_training(ctx, st::ops::BatchNormParams{}, in, gamma, beta, running_mean, running_var, y,
                                       saved_mean, saved_inv_std);
  return {y, running_mean, saved_mean};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(mixed_precision)

BOOST_AUTO_TEST_CASE(an_activation_is_the_fp32_result_rounded_once) {
  const std::vector<double> x = random_values(4096, 1);
  Context fp32;
  Tensor in = st::test::to_tensor(x, {4096});
  Tensor y32 = Tensor::empty({4096});
  st::ops::relu_forward(fp32, in, y32);
  BOOST_TEST(not_representable(HalfFormat::bf16, y32) > 1000);  // the inputs are plain floats
  for (auto [precision, format] :
       {std::pair{Precision::amp_fp16, HalfFormat::fp16}, std::pair{Precision::amp_bf16, HalfFormat::bf16}}) {
    BOOST_TEST_CONTEXT(st::precision_name(precision)) {
      Context amp;
      amp.set_precision(precision);
      Tensor y = Tensor::empty({4096});
      st::ops::relu_forward(amp, in, y);
      int64_t wrong = 0;
      for (int64_t i = 0; i < 4096; ++i)
        wrong += y.data<float>()[i] != st::round_to(format, y32.data<float>()[i]) ? 1 : 0;
      BOOST_TEST(wrong == 0);
    }
  }
}

BOOST_AUTO_TEST_CASE(batch_norm_rounds_its_output_but_not_its_statistics) {
  const std::vector<double> x = random_values(8 * 3 * 3 * 5, 2);
  const std::vector<Tensor> f = batch_norm_in(Precision::fp32, x);
  const std::vector<Tensor> h = batch_norm_in(Precision::amp_fp16, x);
  BOOST_TEST(not_representable(HalfFormat::fp16, h[0]) == 0);  // y
  int64_t y_wrong = 0;
  for (int64_t i = 0; i < f[0].numel(); ++i)
    y_wrong += h[0].data<float>()[i] != st::round_to(HalfFormat::fp16, f[0].data<float>()[i]) ? 1 : 0;
  BOOST_TEST(y_wrong == 0);
  // The statistics are the fp32 run's, bit for bit, and not fp16 values.
  BOOST_TEST(st::test::to_vector(h[1]) == st::test::to_vector(f[1]), boost::test_tools::per_element());
  BOOST_TEST(st::test::to_vector(h[2]) == st::test::to_vector(f[2]), boost::test_tools::per_element());
  BOOST_TEST(not_representable(HalfFormat::fp16, h[1]) > 0);
}

BOOST_AUTO_TEST_CASE(the_optimizer_keeps_fp32_weights) {
  Context amp;
  amp.set_precision(Precision::amp_bf16);
  Tensor w = st::test::to_tensor(random_values(1000, 5), {1000});
  Tensor g = st::test::to_tensor(random_values(1000, 6), {1000});
  Tensor m = Tensor::zeros({1000});
  st::ops::SgdUpdateParams p;
  p.lr = 0.01f;
  p.momentum = 0.9f;
  st::ops::sgd_update(amp, p, w, g, m);
  BOOST_TEST(not_representable(HalfFormat::bf16, w) > 900);
  BOOST_TEST(not_representable(HalfFormat::bf16, m) > 900);
}

BOOST_AUTO_TEST_CASE(half_weights_round_matrices_for_a_step_and_put_the_masters_back) {
  st::nn::ParameterSet params;
  params.add_parameter("conv.weight", {4, 3, 3, 3});
  params.add_parameter("bn.weight", {4});
  params.finalize();
  const std::vector<double> w = random_values(108, 7), b = random_values(4, 8);
  params.value(0).copy_from(st::test::to_tensor(w, {4, 3, 3, 3}));
  params.value(1).copy_from(st::test::to_tensor(b, {4}));
  const std::vector<double> before = st::test::to_vector(params.flat_values());
  BOOST_TEST(not_representable(HalfFormat::bf16, params.value(0)) > 90);
  Tensor master;
  {
    Context amp;
    amp.set_precision(Precision::amp_bf16);
    const st::train::HalfWeights half(amp, params, master);
    BOOST_TEST(not_representable(HalfFormat::bf16, params.value(0)) == 0);  // the kernel: 16-bit
    for (int64_t i = 0; i < 108; ++i)
      BOOST_TEST_REQUIRE(params.value(0).data<float>()[i] == st::round_to(HalfFormat::bf16, static_cast<float>(w[i])));
    for (int64_t i = 0; i < 4; ++i)  // 1-D: fp32, as set
      BOOST_TEST(params.value(1).data<float>()[i] == static_cast<float>(b[i]));
  }
  BOOST_TEST(st::test::to_vector(params.flat_values()) == before, boost::test_tools::per_element());
  {
    Context fp32;  // fp32: nothing happens
    const st::train::HalfWeights half(fp32, params, master);
    BOOST_TEST(st::test::to_vector(params.flat_values()) == before, boost::test_tools::per_element());
  }
}

BOOST_AUTO_TEST_CASE(rounding_in_place_is_the_elementwise_rounding) {
  std::vector<float> v = {1.0f + 0x1p-11f, 65520.0f, 65519.0f, 0x1p-25f, -0x1.8p-24f, 3.14159265f, 1e-40f};
  std::vector<float> r = v;
  st::round_in_place(HalfFormat::fp16, r.data(), static_cast<int64_t>(r.size()));
  BOOST_TEST(r[0] == 1.0f);       // a tie: to even
  BOOST_TEST(std::isinf(r[1]));   // rounds past the largest fp16
  BOOST_TEST(r[2] == 65504.0f);   // the largest fp16
  BOOST_TEST(r[3] == 0.0f);       // half the smallest subnormal: a tie, to even (zero)
  BOOST_TEST(r[4] == -0x1p-23f);  // 1.5 subnormal units: a tie, to even (2)
  for (std::size_t i = 0; i < v.size(); ++i) {
    const float one = st::round_to(HalfFormat::fp16, v[i]);
    BOOST_TEST((r[i] == one || (std::isnan(r[i]) && std::isnan(one))));
  }
  std::vector<float> b = {1.0f + 0x1p-8f, 1.0f + 0x1.8p-8f};
  st::round_in_place(HalfFormat::bf16, b.data(), 2);
  BOOST_TEST(b[0] == 1.0f);            // a tie: to even
  BOOST_TEST(b[1] == 1.0f + 0x1p-7f);  // above the tie
}

BOOST_AUTO_TEST_SUITE_END()
