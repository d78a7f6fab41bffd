// Layer-level checks: the wiring of layers to ops and to the ParameterSet (names, buffers,
// gradients written and marked ready), Sequential chaining against a float64 computation, and
// the reuse of output/gradient buffers when the batch size changes (the last, smaller batch).
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <functional>
#include <tuple>
#include <vector>

#include "scaletrain/backend/context.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/core/rng.hpp"
#include "scaletrain/nn/layers.hpp"
#include "support/gradcheck.hpp"
#include "support/reference_conv2d.hpp"

using namespace scaletrain;
using scaletrain::test::central_difference;
using scaletrain::test::random_vector;
using scaletrain::test::to_tensor;
using scaletrain::test::to_vector;
using scaletrain::test::weighted_sum;

namespace {

void set_values(Tensor& t, const std::vector<double>& v) {
  BOOST_REQUIRE_EQUAL(static_cast<int64_t>(v.size()), t.numel());
  float* p = t.data<float>();
  for (std::size_t i = 0; i < v.size(); ++i) p[i] = static_cast<float>(v[i]);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(layers)

BOOST_AUTO_TEST_CASE(reuse_buffer_grows_only_when_needed) {
  Tensor buf;
  Tensor a = nn::reuse_buffer(buf, {4, 3});
  BOOST_TEST(a.shape() == (Shape{4, 3}));
  void* storage = a.raw();
  Tensor b = nn::reuse_buffer(buf, {3, 3});  // smaller: a view of the same storage
  BOOST_TEST(b.shape() == (Shape{3, 3}));
  BOOST_TEST(b.raw() == storage);
  Tensor c = nn::reuse_buffer(buf, {2, 6});  // same size, other shape
  BOOST_TEST(c.raw() == storage);
  BOOST_TEST(c.shape() == (Shape{2, 6}));
  Tensor d = nn::reuse_buffer(buf, {5, 3});  // larger: reallocated
  BOOST_TEST(d.shape() == (Shape{5, 3}));
  BOOST_TEST(buf.numel() == 15);
  BOOST_TEST(nn::join_name("", "conv1") == "conv1");
  BOOST_TEST(nn::join_name("layer1.0", "conv1") == "layer1.0.conv1");
}

// Linear -> ReLU -> Linear against the same network written out in float64, forward and backward.
BOOST_AUTO_TEST_CASE(sequential_chains_forward_and_backward) {
  const int n = 3, in = 4, hid = 5, out = 2;
  nn::ParameterSet ps;
  nn::Sequential seq;
  seq.emplace<nn::Linear>(ps, "fc1", in, hid);
  seq.emplace<nn::ReLU>(false);
  seq.emplace<nn::Linear>(ps, "fc2", hid, out);
  ps.finalize();
  BOOST_REQUIRE_EQUAL(ps.num_parameters(), 4);
  BOOST_TEST(ps.parameter_info(0).name == "fc1.weight");
  BOOST_TEST(ps.parameter_info(3).name == "fc2.bias");
  BOOST_TEST(ps.parameter_info(2).shape == (Shape{out, hid}));

  const auto w1 = random_vector(hid * in, 1), b1 = random_vector(hid, 2);
  const auto w2 = random_vector(out * hid, 3), b2 = random_vector(out, 4);
  const auto x = random_vector(n * in, 5), r = random_vector(n * out, 6);
  set_values(ps.value(0), w1);
  set_values(ps.value(1), b1);
  set_values(ps.value(2), w2);
  set_values(ps.value(3), b2);

  // float64 reference.
  std::vector<double> z(n * hid), h(n * hid), y(n * out);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < hid; ++j) {
      double s = b1[j];
      for (int k = 0; k < in; ++k) s += x[i * in + k] * w1[j * in + k];
      z[i * hid + j] = s;
      h[i * hid + j] = s > 0 ? s : 0;
    }
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < out; ++j) {
      double s = b2[j];
      for (int k = 0; k < hid; ++k) s += h[i * hid + k] * w2[j * hid + k];
      y[i * out + j] = s;
    }
  std::vector<double> dw2(out * hid, 0), db2(out, 0), dh(n * hid, 0), dw1(hid * in, 0), db1(hid, 0), dx(n * in, 0);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < out; ++j) {
      db2[j] += r[i * out + j];
      for (int k = 0; k < hid; ++k) {
        dw2[j * hid + k] += r[i * out + j] * h[i * hid + k];
        dh[i * hid + k] += r[i * out + j] * w2[j * hid + k];
      }
    }
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < hid; ++j) {
      const double dz = z[i * hid + j] > 0 ? dh[i * hid + j] : 0;
      db1[j] += dz;
      for (int k = 0; k < in; ++k) {
        dw1[j * in + k] += dz * x[i * in + k];
        dx[i * in + k] += dz * w1[j * in + k];
      }
    }

  Context ctx;
  std::vector<int> ready;
  ps.set_grad_ready_hook([&](int i) { ready.push_back(i); });
  const Tensor xt = to_tensor(x, {n, in});
  const std::vector<double> x_before = to_vector(xt);
  Tensor yt = seq.forward(ctx, xt, true);
  BOOST_TEST(yt.shape() == (Shape{n, out}));
  ST_CHECK_CLOSE_VECTORS(to_vector(yt), y, 1e-5, 1e-5);
  BOOST_TEST(to_vector(xt) == x_before, "the input must not be modified");

  Tensor dxt = seq.backward(ctx, to_tensor(r, {n, out}), true);
  BOOST_TEST(dxt.shape() == (Shape{n, in}));
  ST_CHECK_CLOSE_VECTORS(to_vector(dxt), dx, 1e-5, 1e-5);
  ST_CHECK_CLOSE_VECTORS(to_vector(ps.grad(0)), dw1, 1e-5, 1e-5);
  ST_CHECK_CLOSE_VECTORS(to_vector(ps.grad(1)), db1, 1e-5, 1e-5);
  ST_CHECK_CLOSE_VECTORS(to_vector(ps.grad(2)), dw2, 1e-5, 1e-5);
  ST_CHECK_CLOSE_VECTORS(to_vector(ps.grad(3)), db2, 1e-5, 1e-5);
  // Every parameter marked once, the second layer's before the first's.
  std::vector<int> sorted = ready;
  std::sort(sorted.begin(), sorted.end());
  BOOST_TEST(sorted == (std::vector<int>{0, 1, 2, 3}));
  BOOST_REQUIRE_EQUAL(ready.size(), 4u);
  BOOST_TEST(ready[0] >= 2);
  BOOST_TEST(ready[1] >= 2);

  // need_dx=false: no input gradient, parameter gradients still written.
  ps.flat_grads().zero();
  Tensor none = seq.backward(ctx, to_tensor(r, {n, out}), false);
  BOOST_TEST(!none.defined());
  ST_CHECK_CLOSE_VECTORS(to_vector(ps.grad(0)), dw1, 1e-5, 1e-5);
}

BOOST_AUTO_TEST_CASE(batch_norm_registers_buffers_and_tracks_statistics) {
  const int c = 3;
  nn::ParameterSet ps;
  nn::BatchNorm2d bn(ps, "layer1.0.bn1", c);
  ps.finalize();
  BOOST_REQUIRE_EQUAL(ps.num_parameters(), 2);
  BOOST_REQUIRE_EQUAL(ps.num_buffers(), 2);
  BOOST_TEST(ps.parameter_info(0).name == "layer1.0.bn1.weight");
  BOOST_TEST(ps.parameter_info(1).name == "layer1.0.bn1.bias");
  BOOST_TEST(ps.buffer_info(0).name == "layer1.0.bn1.running_mean");
  BOOST_TEST(ps.buffer_info(1).name == "layer1.0.bn1.running_var");
  BOOST_TEST(ps.buffer_info(1).shape == (Shape{c}));
  BOOST_TEST(ps.parameter_count() == 2 * c);

  Rng rng(1);
  bn.initialize(rng);
  BOOST_TEST(to_vector(ps.value(0)) == std::vector<double>(c, 1.0));
  BOOST_TEST(to_vector(ps.value(1)) == std::vector<double>(c, 0.0));
  BOOST_TEST(to_vector(ps.buffer(0)) == std::vector<double>(c, 0.0));
  BOOST_TEST(to_vector(ps.buffer(1)) == std::vector<double>(c, 1.0));

  const int m = 2 * 2 * 3;  // values per channel: N=2, H=2, W=3
  const auto x = random_vector(m * c, 7, -2.0, 3.0);
  Context ctx;
  Tensor y = bn.forward(ctx, to_tensor(x, {2, 2, 3, c}), true);
  std::vector<double> mean(c, 0), var(c, 0);
  for (int i = 0; i < m; ++i)
    for (int k = 0; k < c; ++k) mean[k] += x[i * c + k] / m;
  for (int i = 0; i < m; ++i)
    for (int k = 0; k < c; ++k) var[k] += (x[i * c + k] - mean[k]) * (x[i * c + k] - mean[k]) / m;
  std::vector<double> expect_y(m * c), expect_rm(c), expect_rv(c);
  for (int i = 0; i < m; ++i)
    for (int k = 0; k < c; ++k) expect_y[i * c + k] = (x[i * c + k] - mean[k]) / std::sqrt(var[k] + 1e-5);
  for (int k = 0; k < c; ++k) {
    expect_rm[k] = 0.1 * mean[k];
    expect_rv[k] = 0.9 + 0.1 * var[k] * m / (m - 1);  // unbiased variance in the running estimate
  }
  ST_CHECK_CLOSE_VECTORS(to_vector(y), expect_y, 1e-5, 1e-4);
  ST_CHECK_CLOSE_VECTORS(to_vector(ps.buffer(0)), expect_rm, 1e-6, 1e-5);
  ST_CHECK_CLOSE_VECTORS(to_vector(ps.buffer(1)), expect_rv, 1e-6, 1e-5);

  // Evaluation mode normalises with the running statistics and leaves them alone.
  Tensor ye = bn.forward(ctx, to_tensor(x, {2, 2, 3, c}), false);
  std::vector<double> expect_ye(m * c);
  for (int i = 0; i < m; ++i)
    for (int k = 0; k < c; ++k) expect_ye[i * c + k] = (x[i * c + k] - expect_rm[k]) / std::sqrt(expect_rv[k] + 1e-5);
  ST_CHECK_CLOSE_VECTORS(to_vector(ye), expect_ye, 1e-5, 1e-4);
  ST_CHECK_CLOSE_VECTORS(to_vector(ps.buffer(0)), expect_rm, 1e-6, 1e-5);
  // Backward after an evaluation-mode forward has no batch statistics to use.
  BOOST_CHECK_THROW(bn.backward(ctx, to_tensor(x, {2, 2, 3, c})), Error);
}

// A smaller batch (the last one of an epoch) reuses the output storage of the larger one and gives
// the same per-sample results; a larger batch reallocates. Input gradients are fresh tensors: the
// last one stays valid, unchanged, through the next backward.
BOOST_AUTO_TEST_CASE(buffers_are_reused_across_batch_sizes) {
  const int c = 2, o = 3, hw = 5;
  nn::ParameterSet ps;
  nn::Conv2d conv(ps, "conv1", c, o, 3, 1, 1);
  ps.finalize();
  Rng rng(3);
  conv.initialize(rng);
  Context ctx;
  const int per_in = hw * hw * c, per_out = hw * hw * o;
  const auto x4 = random_vector(4 * per_in, 11);
  const auto dy4 = random_vector(4 * per_out, 12);

  Tensor y4 = conv.forward(ctx, to_tensor(x4, {4, hw, hw, c}), true);
  BOOST_TEST(y4.shape() == (Shape{4, hw, hw, o}));
  const std::vector<double> y4_values = to_vector(y4);
  void* y_storage = y4.raw();
  Tensor dx4 = conv.backward(ctx, to_tensor(dy4, {4, hw, hw, o}));
  const std::vector<double> dx4_values = to_vector(dx4);

  const std::vector<double> x3(x4.begin(), x4.begin() + 3 * per_in);
  const std::vector<double> dy3(dy4.begin(), dy4.begin() + 3 * per_out);
  Tensor y3 = conv.forward(ctx, to_tensor(x3, {3, hw, hw, c}), true);
  BOOST_TEST(y3.shape() == (Shape{3, hw, hw, o}));
  BOOST_TEST(y3.raw() == y_storage);
  ST_CHECK_CLOSE_VECTORS(to_vector(y3), std::vector<double>(y4_values.begin(), y4_values.begin() + 3 * per_out), 1e-6,
                         1e-6);
  Tensor dx3 = conv.backward(ctx, to_tensor(dy3, {3, hw, hw, o}));
  BOOST_TEST(dx3.shape() == (Shape{3, hw, hw, c}));
  BOOST_TEST(dx3.raw() != dx4.raw());
  BOOST_TEST(to_vector(dx4) == dx4_values);
  ST_CHECK_CLOSE_VECTORS(to_vector(dx3), std::vector<double>(dx4_values.begin(), dx4_values.begin() + 3 * per_in), 1e-6,
                         1e-6);

  // Back to the full batch: same storage, same results as the first time.
  Tensor y4b = conv.forward(ctx, to_tensor(x4, {4, hw, hw, c}), true);
  BOOST_TEST(y4b.raw() == y_storage);
  ST_CHECK_CLOSE_VECTORS(to_vector(y4b), y4_values, 1e-6, 1e-6);

  // Batch norm on the smaller batch matches a fresh layer given the same batch.
  nn::ParameterSet ps_a, ps_b;
  nn::BatchNorm2d bn_a(ps_a, "bn", o), bn_b(ps_b, "bn", o);
  ps_a.finalize();
  ps_b.finalize();
  bn_a.initialize(rng);
  bn_b.initialize(rng);
  bn_a.forward(ctx, to_tensor(dy4, {4, hw, hw, o}), true);
  Tensor ya = bn_a.forward(ctx, to_tensor(dy3, {3, hw, hw, o}), true);
  Tensor yb = bn_b.forward(ctx, to_tensor(dy3, {3, hw, hw, o}), true);
  ST_CHECK_CLOSE_VECTORS(to_vector(ya), to_vector(yb), 1e-6, 1e-6);
  const auto g3 = random_vector(3 * per_out, 13);
  Tensor dxa = bn_a.backward(ctx, to_tensor(g3, {3, hw, hw, o}));
  Tensor dxb = bn_b.backward(ctx, to_tensor(g3, {3, hw, hw, o}));
  ST_CHECK_CLOSE_VECTORS(to_vector(dxa), to_vector(dxb), 1e-6, 1e-6);
  ST_CHECK_CLOSE_VECTORS(to_vector(ps_a.grad(0)), to_vector(ps_b.grad(0)), 1e-6, 1e-6);
}

// conv -> bn -> relu -> maxpool -> global average pool -> linear: analytic gradients of the input
// and of the conv weight against central differences (this chain covers the layers ResNet-20 does
// not use, max pooling in particular).
BOOST_AUTO_TEST_CASE(conv_pool_chain_gradient_check) {
  const int n = 2, c = 2, hw = 7, o = 4, k = 3;
  nn::ParameterSet ps;
  nn::Sequential seq;
  auto& conv = seq.emplace<nn::Conv2d>(ps, "conv1", c, o, 3, 2, 1);
  seq.emplace<nn::BatchNorm2d>(ps, "bn1", o);
  seq.emplace<nn::ReLU>(true);
  seq.emplace<nn::MaxPool2d>(ops::MaxPool2dParams{3, 2, 1});
  seq.emplace<nn::GlobalAvgPool>();
  seq.emplace<nn::Linear>(ps, "fc", o, k);
  ps.finalize();
  Rng rng(5);
  seq.initialize(rng);
  Context ctx;
  const auto x = random_vector(n * hw * hw * c, 21);
  const auto r = random_vector(n * k, 22);
  Tensor xt = to_tensor(x, {n, hw, hw, c});
  auto loss = [&]() { return weighted_sum(seq.forward(ctx, xt, true), r); };

  Tensor y = seq.forward(ctx, xt, true);
  BOOST_TEST(y.shape() == (Shape{n, k}));
  Tensor dx = seq.backward(ctx, to_tensor(r, {n, k}), true);
  const std::vector<double> dx_values = to_vector(dx);
  const std::vector<double> dw_values = to_vector(ps.grad(conv.weight_index()));

  const float h = 1e-2f;
  std::vector<double> num_dx, ana_dx, num_dw, ana_dw;
  float* xp = xt.data<float>();
  for (int64_t i = 0; i < xt.numel(); i += 5) {
    num_dx.push_back(central_difference(loss, xp + i, h));
    ana_dx.push_back(dx_values[i]);
  }
  float* wp = ps.value(conv.weight_index()).data<float>();
  for (int64_t i = 0; i < ps.value(conv.weight_index()).numel(); i += 3) {
    num_dw.push_back(central_difference(loss, wp + i, h));
    ana_dw.push_back(dw_values[i]);
  }
  ST_CHECK_CLOSE_VECTORS(ana_dx, num_dx, 2e-3, 5e-2);
  ST_CHECK_CLOSE_VECTORS(ana_dw, num_dw, 2e-3, 5e-2);
}

BOOST_AUTO_TEST_CASE(layers_reject_wrong_shapes_clearly) {
  nn::ParameterSet ps;
  nn::Conv2d conv(ps, "layer1.0.conv1", 3, 8, 3, 1, 1);
  nn::Linear fc(ps, "fc", 8, 2);
  ps.finalize();
  Context ctx;
  try {
    conv.forward(ctx, Tensor::zeros({1, 4, 4, 1}), true);
    BOOST_FAIL("expected an error");
  } catch (const Error& e) {
    BOOST_TEST(std::string(e.what()).find("layer1.0.conv1 expects input (N, H, W, 3)") != std::string::npos, e.what());
  }
  BOOST_CHECK_THROW(fc.forward(ctx, Tensor::zeros({2, 7}), true), Error);
  BOOST_CHECK_THROW(conv.backward(ctx, Tensor::zeros({1, 4, 4, 8})), Error);  // no forward yet
}

namespace {

struct Stats {
  double mean = 0, std = 0, min = 0, max = 0;
};

Stats stats_of(const Tensor& t) {
  const std::vector<double> v = to_vector(t);
  Stats s{0, 0, v.at(0), v.at(0)};
  for (double x : v) s.mean += x, s.min = std::min(s.min, x), s.max = std::max(s.max, x);
  s.mean /= static_cast<double>(v.size());
  for (double x : v) s.std += (x - s.mean) * (x - s.mean);
  s.std = std::sqrt(s.std / static_cast<double>(v.size()));
  return s;
}

bool all_equal(const Tensor& t, float value) {
  const float* p = t.data<float>();
  return std::all_of(p, p + t.numel(), [&](float x) { return x == value; });
}

}  // namespace

BOOST_AUTO_TEST_CASE(conv_with_bias_and_groups_registers_weight_then_bias) {
  nn::ParameterSet ps;
  // Caffe AlexNet's conv2 in small: 6 -> 8 channels in 2 groups, 5x5, padding 2, with a bias.
  nn::Conv2d conv(ps, "features.3", 6, 8, nn::ConvSpec::square(5, 1, 2).with_groups(2).with_bias());
  nn::Conv2d plain(ps, "conv2", 8, 4, 3, 1, 1);
  nn::Conv2d rect(ps, "branch7x7_2", 4, 4, nn::ConvSpec::rect(1, 7, 0, 3));
  BOOST_TEST_REQUIRE(ps.num_parameters() == 4);
  BOOST_TEST(ps.parameter_info(0).name == "features.3.weight");
  BOOST_TEST(ps.parameter_info(0).shape == (Shape{8, 3, 5, 5}));
  BOOST_TEST(ps.parameter_info(1).name == "features.3.bias");
  BOOST_TEST(ps.parameter_info(1).shape == (Shape{8}));
  BOOST_TEST(ps.parameter_info(2).name == "conv2.weight");
  BOOST_TEST(ps.parameter_info(3).shape == (Shape{4, 4, 1, 7}));
  BOOST_TEST(conv.bias_index() == 1);
  BOOST_TEST(plain.bias_index() == -1);
  BOOST_CHECK_THROW(nn::Conv2d(ps, "bad", 6, 8, nn::ConvSpec::square(3).with_groups(4)), Error);
  ps.finalize();
  Rng rng(3);
  conv.initialize(rng);
  set_values(ps.value(conv.bias_index()), random_vector(8, 30));

  // Forward adds the bias; backward writes db = sum of dy and marks the bias ready before the weight.
  Context ctx;
  const auto d = test::RefConv2dDims::square(2, 6, 5, 6, 8, 5, 5, 1, 2, 2);
  const auto x = random_vector(2 * 6 * 5 * 6, 31), dy = random_vector(2 * 6 * 5 * 8, 32);
  const Tensor y = conv.forward(ctx, to_tensor(x, {2, 6, 5, 6}), true);
  ST_CHECK_CLOSE_VECTORS(
      to_vector(y), test::reference_conv2d_forward(d, x, to_vector(ps.value(0)), to_vector(ps.value(1))), 1e-5, 1e-4);
  std::vector<int> ready;
  ps.set_grad_ready_hook([&](int i) { ready.push_back(i); });
  conv.backward(ctx, to_tensor(dy, {2, 6, 5, 8}), false);
  BOOST_TEST(ready == (std::vector<int>{1, 0}), boost::test_tools::per_element());
  ST_CHECK_CLOSE_VECTORS(to_vector(ps.grad(1)), test::reference_conv2d_backward_bias(d, dy), 1e-5, 1e-5);
  ST_CHECK_CLOSE_VECTORS(to_vector(ps.grad(0)), test::reference_conv2d_backward_filter(d, x, dy), 1e-5, 1e-4);
}

// Each init choice on a grouped conv (fan_in = 32 * 9 = 288, fan_out = 128 * 9 = 1152; 36,864
// weights) and on a linear layer (fan_in 300, fan_out 200; 60,000 weights): bounds exactly, the
// standard deviation within 3% (the sampling error is about 0.4%).
BOOST_AUTO_TEST_CASE(init_choices_give_their_distributions) {
  struct Layer {
    double fan_in, fan_out;
    std::function<std::pair<Tensor, Tensor>(nn::ParameterSet&, const nn::Init&)> make;
  };
  std::vector<Layer> layers = {
      {288, 1152,
       [](nn::ParameterSet& ps, const nn::Init& init) {
         nn::Conv2d conv(ps, "conv", 64, 128, nn::ConvSpec::square(3, 1, 1).with_groups(2).with_bias().with_init(init));
         ps.finalize();
         Rng rng(11);
         conv.initialize(rng);
         return std::make_pair(ps.value(conv.weight_index()), ps.value(conv.bias_index()));
       }},
      {300, 200,
       [](nn::ParameterSet& ps, const nn::Init& init) {
         nn::Linear fc(ps, "fc", 300, 200, init);
         ps.finalize();
         Rng rng(11);
         fc.initialize(rng);
         return std::make_pair(ps.value(fc.weight_index()), ps.value(fc.bias_index()));
       }},
  };
  for (const Layer& layer : layers) {
    BOOST_TEST_CONTEXT("fan_in " << layer.fan_in) {
      auto run = [&](const nn::Init& init) {
        nn::ParameterSet ps;
        auto [w, b] = layer.make(ps, init);
        return std::make_tuple(stats_of(w), stats_of(b), w.clone(), b.clone());
      };
      auto near = [](double got, double want) { return std::fabs(got - want) <= 0.03 * want; };
      {
        const auto [w, b, wt, bt] = run(nn::Init::kaiming_normal_fan_out());
        BOOST_TEST(near(w.std, std::sqrt(2.0 / layer.fan_out)), w.std);
        BOOST_TEST(std::fabs(w.mean) < 0.05 * w.std);
        BOOST_TEST(all_equal(bt, 0.0f));
      }
      {
        const auto [w, b, wt, bt] = run(nn::Init::torch_default());
        const double bound = 1.0 / std::sqrt(layer.fan_in);
        BOOST_TEST((w.min >= -bound && w.max <= bound && w.max > 0.99 * bound && w.min < -0.99 * bound));
        BOOST_TEST(near(w.std, bound / std::sqrt(3.0)), w.std);
        BOOST_TEST((b.min >= -bound && b.max <= bound && b.std > 0));
      }
      {
        const auto [w, b, wt, bt] = run(nn::Init::trunc_normal(0.02));
        BOOST_TEST(near(w.std, 0.02), w.std);
        BOOST_TEST((b.min >= -1.0 / std::sqrt(layer.fan_in) && b.max <= 1.0 / std::sqrt(layer.fan_in)));
        // The truncation is at absolute +-2: at std 1.5 it cuts, and nothing lies beyond.
        const auto [wide, b2, wt2, bt2] = run(nn::Init::trunc_normal(1.5));
        BOOST_TEST((wide.min >= -2.0 && wide.max <= 2.0 && wide.max > 1.95 && wide.min < -1.95));
        // A normal of std 1.5 truncated at +-2 (beta = 4/3) has std 1.5 * sqrt(1 - 2 beta phi(beta) / (2 Phi(beta) -
        // 1)).
        const double beta = 2.0 / 1.5, phi = std::exp(-beta * beta / 2) / std::sqrt(2 * M_PI);
        BOOST_TEST(near(wide.std, 1.5 * std::sqrt(1 - 2 * beta * phi / std::erf(beta / std::sqrt(2.0)))), wide.std);
      }
      {
        const auto [w, b, wt, bt] = run(nn::Init::gaussian(0.01, 0.1));
        BOOST_TEST(near(w.std, 0.01), w.std);
        BOOST_TEST(all_equal(bt, 0.1f));
      }
      {
        const auto [w, b, wt, bt] = run(nn::Init::xavier_fan_in(0.2));
        const double bound = std::sqrt(3.0 / layer.fan_in);
        BOOST_TEST((w.min >= -bound && w.max <= bound && w.max > 0.99 * bound && w.min < -0.99 * bound));
        BOOST_TEST(near(w.std, bound / std::sqrt(3.0)), w.std);
        BOOST_TEST(all_equal(bt, 0.2f));
      }
    }
  }
}

// ResNet's checkpoints and the PyTorch cross-check depend on the exact draws of the default inits:
// Conv2d's kaiming_normal fan_out (std * normal per weight) and Linear's U(+-1/sqrt(in)) (weight,
// then bias), from the same Rng.
BOOST_AUTO_TEST_CASE(default_inits_keep_their_draws) {
  nn::ParameterSet ps;
  nn::Conv2d conv(ps, "conv1", 3, 16, 3, 1, 1);
  nn::Linear fc(ps, "fc", 64, 10);
  ps.finalize();
  Rng rng(42), expect(42);
  conv.initialize(rng);
  fc.initialize(rng);
  const double std = std::sqrt(2.0 / (16.0 * 3 * 3));
  const float* w = ps.value(conv.weight_index()).data<float>();
  for (int64_t i = 0; i < 16 * 3 * 3 * 3; ++i) BOOST_TEST_REQUIRE(w[i] == static_cast<float>(std * expect.normal()));
  const double bound = 1.0 / std::sqrt(64.0);
  for (int index : {fc.weight_index(), fc.bias_index()}) {
    const Tensor& t = ps.value(index);
    for (int64_t i = 0; i < t.numel(); ++i)
      BOOST_TEST_REQUIRE(t.data<float>()[i] == static_cast<float>(expect.uniform(-bound, bound)));
  }
}

BOOST_AUTO_TEST_SUITE_END()
