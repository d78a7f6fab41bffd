// LARS: the update by hand for one tensor, several steps on real parameter sets (a hand-built
// ResNet-like one and resnet20's) against a float64 implementation of the MLPerf reference rule
// written here, the batch-norm/bias exclusion, the zero-norm guard, and the thread count.
#include <omp.h>

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "scaletrain/core/error.hpp"
#include "scaletrain/core/rng.hpp"
#include "scaletrain/models/model.hpp"
#include "scaletrain/nn/parameters.hpp"
#include "scaletrain/optim/lars.hpp"
#include "scaletrain/optim/sgd.hpp"
#include "support/gradcheck.hpp"

using scaletrain::test::error_of;

using scaletrain::Rng;
using scaletrain::Tensor;
using scaletrain::nn::ParameterSet;
using scaletrain::optim::Lars;
using scaletrain::optim::LarsExclusion;
using scaletrain::optim::LarsOptions;
using scaletrain::optim::Optimizer;
using scaletrain::optim::Sgd;
using scaletrain::optim::SgdOptions;

namespace {

LarsOptions lars_options(double weight_decay, double epsilon, LarsExclusion exclusion) {
  LarsOptions o;
  o.momentum = 0.9;
  o.weight_decay = weight_decay;
  o.trust_coefficient = 0.001;
  o.epsilon = epsilon;
  o.exclusion = exclusion;
  return o;
}

// The reference's skip list ['batch_normalization', 'bias', 'bn'] said with torchvision's names:
// a downsample branch's batch norm is "downsample.1", which has no "bn" in its name.
bool mlperf_skips(const std::string& name) {
  return name.find("bn") != std::string::npos || name.find("downsample.1.") != std::string::npos ||
         name.find("bias") != std::string::npos;
}

// Conv weight, its batch norm, a downsample conv and batch norm, and an fc layer whose weight
// spans several of the optimizer's chunks; more than 32k elements so the threaded path runs.
ParameterSet small_resnet_params() {
  ParameterSet p;
  p.add_parameter("conv1.weight", {16, 8, 3, 3});
  p.add_parameter("bn1.weight", {16});
  p.add_parameter("bn1.bias", {16});
  p.add_parameter("layer1.0.downsample.0.weight", {32, 16, 1, 1});
  p.add_parameter("layer1.0.downsample.1.weight", {32});
  p.add_parameter("layer1.0.downsample.1.bias", {32});
  p.add_parameter("fc.weight", {100, 400});
  p.add_parameter("fc.bias", {100});
  p.add_buffer("bn1.running_mean", {16});
  p.finalize();
  return p;
}

void fill_uniform(Tensor& t, Rng& rng, double lo, double hi) {
  float* x = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) x[i] = static_cast<float>(rng.uniform(lo, hi));
}

// Random weights around the size He initialisation gives; batch-norm weights near 1.
void fill_weights(ParameterSet& p, uint64_t seed) {
  Rng rng(seed);
  for (int i = 0; i < p.num_parameters(); ++i) {
    const bool bn_weight =
        p.parameter_info(i).shape.size() == 1 && p.parameter_info(i).name.find("weight") != std::string::npos;
    if (bn_weight)
      fill_uniform(p.value(i), rng, 0.5, 1.5);
    else
      fill_uniform(p.value(i), rng, -0.5, 0.5);
  }
}

// Gradients a hundred times smaller than the weights, with a different scale per tensor so that
// the trust ratios differ between tensors.
void fill_grads(ParameterSet& p, uint64_t seed) {
  Rng rng(seed);
  for (int i = 0; i < p.num_parameters(); ++i) {
    const double scale = 0.01 * (1 + i % 4);
    fill_uniform(p.grad(i), rng, -scale, scale);
  }
}

std::vector<double> to_double(const Tensor& t) {
  const float* x = t.data<float>();
  return std::vector<double>(x, x + t.numel());
}

double norm(const std::vector<double>& x) {
  double s = 0.0;
  for (double e : x) s += e * e;
  return std::sqrt(s);
}

// The MLPerf reference rule (lars.hpp) in float64, one tensor at a time, with the exclusion
// decided from the names as the reference's skip list does.
struct ReferenceLars {
  LarsOptions o;
  std::vector<std::vector<double>> w, v;
  std::vector<bool> skipped;
  std::vector<double> trust;

  ReferenceLars(ParameterSet& p, const LarsOptions& options) : o(options) {
    for (int i = 0; i < p.num_parameters(); ++i) {
      w.push_back(to_double(p.value(i)));
      v.emplace_back(w.back().size(), 0.0);
      skipped.push_back(o.exclusion == LarsExclusion::bn_and_bias && mlperf_skips(p.parameter_info(i).name));
    }
    trust.assign(w.size(), 1.0);
  }

  void step(ParameterSet& p, double lr) {
    for (std::size_t t = 0; t < w.size(); ++t) {
      const std::vector<double> g = to_double(p.grad(static_cast<int>(t)));
      const double wn = norm(w[t]), gn = norm(g);
      const double wd = skipped[t] ? 0.0 : o.weight_decay;
      trust[t] = 1.0;
      if (!skipped[t] && wn > 0.0 && gn > 0.0)
        trust[t] = o.trust_coefficient * wn / (gn + o.weight_decay * wn + o.epsilon);
      for (std::size_t i = 0; i < g.size(); ++i) {
        v[t][i] = o.momentum * v[t][i] + lr * trust[t] * (g[i] + wd * w[t][i]);
        w[t][i] -= v[t][i];
      }
    }
  }
};

// max |got - want| / max |want|: the error relative to the tensor's own scale.
double relative_error(const Tensor& got, const std::vector<double>& want) {
  const float* x = got.data<float>();
  double err = 0.0, scale = 0.0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    err = std::max(err, std::abs(x[i] - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  return scale > 0.0 ? err / scale : err;
}

// Runs `lrs` steps of Lars and of the float64 reference with fresh gradients each step and
// checks weights, momentum and trust ratios per tensor to 1e-6 of the tensor's scale.
void check_against_reference(ParameterSet& p, const LarsOptions& options, const std::vector<double>& lrs) {
  Lars opt(p, options);
  ReferenceLars ref(p, options);
  for (std::size_t s = 0; s < lrs.size(); ++s) {
    fill_grads(p, 100 + s);
    opt.step(scaletrain::test::cpu_context(), lrs[s]);
    ref.step(p, lrs[s]);
  }
  BOOST_TEST(opt.steps() == static_cast<int64_t>(lrs.size()));
  double worst = 0.0;
  for (int t = 0; t < p.num_parameters(); ++t) {
    const std::string& name = p.parameter_info(t).name;
    BOOST_TEST(opt.adapted(t) == !ref.skipped[t], name);
    const double w_err = relative_error(p.value(t), ref.w[t]);
    const double v_err = relative_error(opt.momentum_view(t), ref.v[t]);
    BOOST_TEST(w_err < 1e-6, name << ": weights differ from float64 by " << w_err);
    BOOST_TEST(v_err < 1e-6, name << ": momentum differs from float64 by " << v_err);
    worst = std::max({worst, w_err, v_err});
    BOOST_TEST(std::abs(opt.trust_ratio(t) - ref.trust[t]) <= 1e-6 * ref.trust[t],
               name << ": trust ratio " << opt.trust_ratio(t) << ", float64 " << ref.trust[t]);
  }
  BOOST_TEST_MESSAGE(p.num_parameters() << " tensors, " << lrs.size() << " steps: largest relative error " << worst);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(lars)

// One adapted tensor, w = (3, 4), g = (0.6, 0.8): ||w|| = 5, ||g|| = 1; lr 2, wd 0.01, eta 0.001,
// eps 0, mu 0.9.
//   step 1: trust = 0.001 * 5 / (1 + 0.01 * 5) = 0.005 / 1.05; g' = g + 0.01 w = 1.05 * (0.6, 0.8)
//           v = 2 * trust * g' = 0.01 * (0.6, 0.8) = (0.006, 0.008); w = (2.994, 3.992)
//   step 2: w = 0.998 * (3, 4), ||w|| = 4.99; trust = 0.00499 / (1 + 0.0499); g' = 1.0499 * (0.6, 0.8)
//           v = 0.9 * (0.006, 0.008) + 2 * 0.00499 * (0.6, 0.8) = (0.011388, 0.015184)
//           w = (2.982612, 3.976816)
// SGD with the same lr and wd would move w to 3 - 2 * 0.63 = 1.74 in the first step.
BOOST_AUTO_TEST_CASE(trust_ratio_by_hand) {
  ParameterSet p;
  p.add_parameter("layer.weight", {1, 2});
  p.finalize();
  float* w = p.value(0).data<float>();
  float* g = p.grad(0).data<float>();
  w[0] = 3.0f;
  w[1] = 4.0f;
  g[0] = 0.6f;
  g[1] = 0.8f;
  Lars opt(p, lars_options(0.01, 0.0, LarsExclusion::bn_and_bias));
  BOOST_TEST(opt.adapted(0));
  opt.step(scaletrain::test::cpu_context(), 2.0);
  BOOST_TEST(opt.trust_ratio(0) == 0.005 / 1.05, boost::test_tools::tolerance(1e-6));
  BOOST_TEST(opt.momentum_buffer().data<float>()[0] == 0.006, boost::test_tools::tolerance(1e-5));
  BOOST_TEST(opt.momentum_buffer().data<float>()[1] == 0.008, boost::test_tools::tolerance(1e-5));
  BOOST_TEST(w[0] == 2.994, boost::test_tools::tolerance(1e-6));
  BOOST_TEST(w[1] == 3.992, boost::test_tools::tolerance(1e-6));
  opt.step(scaletrain::test::cpu_context(), 2.0);
  BOOST_TEST(opt.trust_ratio(0) == 0.00499 / 1.0499, boost::test_tools::tolerance(1e-6));
  BOOST_TEST(opt.momentum_buffer().data<float>()[0] == 0.011388, boost::test_tools::tolerance(1e-5));
  BOOST_TEST(opt.momentum_buffer().data<float>()[1] == 0.015184, boost::test_tools::tolerance(1e-5));
  BOOST_TEST(w[0] == 2.982612, boost::test_tools::tolerance(1e-6));
  BOOST_TEST(w[1] == 3.976816, boost::test_tools::tolerance(1e-6));
}

// Without weight decay and epsilon the first step of an adapted tensor has length
// lr * eta * ||w|| whatever the gradient's size: the property that makes LARS LARS, and one
// plain SGD does not have (its step grows with the gradient).
BOOST_AUTO_TEST_CASE(first_step_length_is_independent_of_gradient_scale) {
  for (double grad_scale : {1e-4, 1.0, 1e3}) {
    ParameterSet p;
    p.add_parameter("conv.weight", {4, 3, 3, 3});
    p.finalize();
    fill_weights(p, 7);
    Rng rng(8);
    fill_uniform(p.grad(0), rng, -grad_scale, grad_scale);
    const std::vector<double> w0 = to_double(p.value(0));
    Lars opt(p, lars_options(0.0, 0.0, LarsExclusion::bn_and_bias));
    opt.step(scaletrain::test::cpu_context(), 3.0);
    std::vector<double> delta = to_double(p.value(0));
    for (std::size_t i = 0; i < delta.size(); ++i) delta[i] -= w0[i];
    const double expected = 3.0 * 0.001 * norm(w0);
    BOOST_TEST_INFO("gradient scale " << grad_scale);
    BOOST_TEST(norm(delta) == expected, boost::test_tools::tolerance(1e-4));
  }
}

// A hand-built set with every kind of tensor, MLPerf-like learning rates (warmup to 10, decay).
BOOST_AUTO_TEST_CASE(several_steps_against_float64) {
  const std::vector<double> lrs = {0.5, 2.0, 6.0, 10.0, 8.0, 3.0};
  ParameterSet p = small_resnet_params();
  fill_weights(p, 1);
  p.buffer(0).fill(3.0f);
  check_against_reference(p, lars_options(1e-3, 0.0, LarsExclusion::bn_and_bias), lrs);
  BOOST_TEST(p.buffer(0).data<float>()[5] == 3.0f);  // buffers are not parameters: untouched
}

// Epsilon in the denominator and no exclusion (every tensor adapted and decayed).
BOOST_AUTO_TEST_CASE(epsilon_and_no_exclusion_against_float64) {
  ParameterSet p = small_resnet_params();
  fill_weights(p, 2);
  check_against_reference(p, lars_options(5e-4, 1e-3, LarsExclusion::none), {1.0, 4.0, 2.0});
}

// resnet20's real parameters (torchvision-style names, He-initialised weights).
BOOST_AUTO_TEST_CASE(resnet20_against_float64) {
  auto model = scaletrain::models::make_model("resnet20", 10, 3);
  model->initialize(11);
  check_against_reference(model->params(), lars_options(5e-5, 0.0, LarsExclusion::bn_and_bias), {2.0, 9.0, 5.0, 1.0});
}

// Excluded tensors take a plain momentum-SGD step without weight decay, whatever the weight decay:
// at a constant lr their weights match Sgd(momentum 0.9, wd 0), and their momentum is lr times
// Sgd's (the reference keeps lr inside the momentum). Adapted tensors move differently.
BOOST_AUTO_TEST_CASE(excluded_tensors_match_plain_momentum_sgd) {
  ParameterSet pl = small_resnet_params(), ps = small_resnet_params();
  fill_weights(pl, 3);
  fill_weights(ps, 3);
  Lars lars(pl, lars_options(0.05, 0.0, LarsExclusion::bn_and_bias));
  Sgd sgd(ps, SgdOptions{0.9, 0.0, false});
  const double lr = 0.1;
  for (int s = 0; s < 4; ++s) {
    fill_grads(pl, 200 + s);
    fill_grads(ps, 200 + s);
    lars.step(scaletrain::test::cpu_context(), lr);
    sgd.step(scaletrain::test::cpu_context(), lr);
  }
  int excluded = 0;
  for (int t = 0; t < pl.num_parameters(); ++t) {
    const std::string& name = pl.parameter_info(t).name;
    const std::vector<double> sgd_w = to_double(ps.value(t));
    std::vector<double> sgd_v_times_lr = to_double(sgd.momentum_view(t));
    for (double& x : sgd_v_times_lr) x *= lr;
    if (!lars.adapted(t)) {
      ++excluded;
      BOOST_TEST(lars.trust_ratio(t) == 1.0, name);
      BOOST_TEST(relative_error(pl.value(t), sgd_w) < 1e-6, name << " differs from momentum SGD");
      BOOST_TEST(relative_error(lars.momentum_view(t), sgd_v_times_lr) < 1e-6, name << " momentum != lr * SGD's");
    } else {
      BOOST_TEST(lars.trust_ratio(t) < 0.5, name << " trust ratio " << lars.trust_ratio(t));
      BOOST_TEST(relative_error(pl.value(t), sgd_w) > 1e-3, name << " moved like plain SGD");
    }
  }
  BOOST_TEST(excluded == 5);
}

// The rank rule picks exactly the tensors the reference's name list picks in torchvision's
// ResNet-50: 53 convolutions and the fc weight adapted; 53 batch norms (x2) and fc.bias not.
BOOST_AUTO_TEST_CASE(resnet50_exclusion_matches_the_reference_skip_list) {
  auto model = scaletrain::models::make_model("resnet50", 10, 3);
  ParameterSet& p = model->params();
  Lars opt(p, LarsOptions{});
  int adapted = 0;
  for (int t = 0; t < p.num_parameters(); ++t) {
    BOOST_TEST(opt.adapted(t) == !mlperf_skips(p.parameter_info(t).name), p.parameter_info(t).name);
    adapted += opt.adapted(t) ? 1 : 0;
  }
  BOOST_TEST(adapted == 54);
  BOOST_TEST(p.num_parameters() - adapted == 107);
  const scaletrain::Json d = opt.describe();
  BOOST_TEST(d.at("adapted_tensors").as_int() == 54);
  BOOST_TEST(d.at("excluded_tensors").as_int() == 107);
}

// Zero norms take ratio 1 as the reference does (no division by zero with epsilon 0), and weight
// decay still applies. lr 0.5, wd 0.1, mu 0.9, eta 0.001, the same gradient twice:
//   "zero_w" (w = 0, g != 0): step 1: ratio 1, v = 0.5 g, w = -0.5 g.
//       step 2: ||w|| = 0.5 ||g||, ratio = 0.0005 / (1 + 0.05) whatever g is;
//       v = 0.45 g + 0.5 * ratio * (g - 0.05 g), w = -0.5 g - v.
//   "zero_g" (g = 0, w != 0): ratio 1 both steps: v1 = 0.05 w0, w1 = 0.95 w0;
//       v2 = 0.9 * 0.05 w0 + 0.05 * 0.95 w0 = 0.0925 w0, w2 = 0.8575 w0.
//   "both_zero": stays exactly zero.
BOOST_AUTO_TEST_CASE(zero_weights_or_gradient_use_ratio_one) {
  ParameterSet p;
  const int zero_w = p.add_parameter("zero_w.weight", {2, 3});
  const int zero_g = p.add_parameter("zero_g.weight", {3, 2});
  const int both = p.add_parameter("both_zero.weight", {2, 2});
  p.finalize();
  Rng rng(5);
  fill_uniform(p.grad(zero_w), rng, -1.0, 1.0);
  fill_uniform(p.value(zero_g), rng, -1.0, 1.0);
  const std::vector<double> g = to_double(p.grad(zero_w)), w0 = to_double(p.value(zero_g));
  Lars opt(p, lars_options(0.1, 0.0, LarsExclusion::bn_and_bias));
  opt.step(scaletrain::test::cpu_context(), 0.5);
  BOOST_TEST(opt.trust_ratio(zero_w) == 1.0);
  BOOST_TEST(opt.trust_ratio(zero_g) == 1.0);
  BOOST_TEST(opt.trust_ratio(both) == 1.0);
  opt.step(scaletrain::test::cpu_context(), 0.5);
  const double ratio = 0.0005 / 1.05;
  BOOST_TEST(opt.trust_ratio(zero_w) == ratio, boost::test_tools::tolerance(1e-6));
  BOOST_TEST(opt.trust_ratio(zero_g) == 1.0);
  const float* wa = p.value(zero_w).data<float>();
  const float* wb = p.value(zero_g).data<float>();
  for (int i = 0; i < 6; ++i) {
    const double v2 = 0.45 * g[i] + 0.5 * ratio * 0.95 * g[i];
    BOOST_TEST(wa[i] == -0.5 * g[i] - v2, boost::test_tools::tolerance(1e-5));
    BOOST_TEST(wb[i] == 0.8575 * w0[i], boost::test_tools::tolerance(1e-5));
  }
  for (int i = 0; i < 4; ++i) {
    BOOST_TEST(p.value(both).data<float>()[i] == 0.0f);
    BOOST_TEST(opt.momentum_view(both).data<float>()[i] == 0.0f);
  }
}

// Norms are summed in fixed chunks in a fixed order: 1 and 3 threads give bit-identical
// weights and momentum, so ranks with equal averaged gradients never drift apart.
BOOST_AUTO_TEST_CASE(same_bits_for_any_thread_count) {
  const int saved = omp_get_max_threads();
  std::vector<std::vector<float>> results;
  for (int threads : {1, 3}) {
    omp_set_num_threads(threads);
    ParameterSet p = small_resnet_params();
    fill_weights(p, 4);
    Lars opt(p, lars_options(5e-5, 0.0, LarsExclusion::bn_and_bias));
    for (int s = 0; s < 3; ++s) {
      fill_grads(p, 300 + s);
      opt.step(scaletrain::test::cpu_context(), 5.0);
    }
    const int64_t n = p.flat_values().numel();
    std::vector<float> out(p.flat_values().data<float>(), p.flat_values().data<float>() + n);
    out.insert(out.end(), opt.momentum_buffer().data<float>(), opt.momentum_buffer().data<float>() + n);
    results.push_back(out);
  }
  omp_set_num_threads(saved);
  BOOST_TEST(std::memcmp(results[0].data(), results[1].data(), results[0].size() * sizeof(float)) == 0);
}

// Sgd and Lars behind the interface the trainer holds.
BOOST_AUTO_TEST_CASE(both_optimizers_through_the_interface) {
  ParameterSet ps = small_resnet_params(), pl = small_resnet_params();
  std::vector<std::unique_ptr<Optimizer>> opts;
  opts.push_back(std::make_unique<Sgd>(ps, SgdOptions{0.9, 5e-5, false}));
  opts.push_back(std::make_unique<Lars>(pl, lars_options(5e-5, 0.0, LarsExclusion::bn_and_bias)));
  BOOST_TEST(std::string(opts[0]->name()) == "sgd");
  BOOST_TEST(std::string(opts[1]->name()) == "lars");
  for (auto& opt : opts) {
    fill_weights(opt->params(), 6);
    fill_grads(opt->params(), 7);
    opt->step(scaletrain::test::cpu_context(), 0.1);
    BOOST_TEST(opt->steps() == 1);
    BOOST_TEST(opt->momentum_view(6).shape() == (scaletrain::Shape{100, 400}));
    BOOST_TEST(opt->momentum_buffer().numel() == opt->params().parameter_count());
  }
  const scaletrain::Json sgd = opts[0]->describe(), lars = opts[1]->describe();
  BOOST_TEST(sgd.at("name").as_string() == "sgd");
  BOOST_TEST(sgd.at("weight_decay").as_double() == 5e-5);
  BOOST_TEST(lars.at("name").as_string() == "lars");
  BOOST_TEST(lars.at("momentum").as_double() == 0.9);
  BOOST_TEST(lars.at("weight_decay").as_double() == 5e-5);
  BOOST_TEST(lars.at("trust_coefficient").as_double() == 0.001);
  BOOST_TEST(lars.at("epsilon").as_double() == 0.0);
  BOOST_TEST(lars.at("exclusion").as_string() == "bn_and_bias");
  BOOST_TEST(lars.at("adapted_tensors").as_int() == 3);
  BOOST_TEST(lars.at("excluded_tensors").as_int() == 5);
}

BOOST_AUTO_TEST_CASE(invalid_options_name_the_option) {
  ParameterSet p = small_resnet_params();
  auto with = [](auto change) {
    LarsOptions o;
    change(o);
    return o;
  };
  BOOST_TEST(error_of([&] { (void)Lars(p, with([](LarsOptions& o) { o.momentum = -0.1; })); }).find("--momentum") !=
             std::string::npos);
  BOOST_TEST(error_of([&] {
               (void)Lars(p, with([](LarsOptions& o) { o.weight_decay = -1.0; }));
             }).find("--weight-decay") != std::string::npos);
  BOOST_TEST(error_of([&] {
               (void)Lars(p, with([](LarsOptions& o) { o.trust_coefficient = 0.0; }));
             }).find("--lars-trust-coefficient") != std::string::npos);
  BOOST_TEST(error_of([&] {
               (void)Lars(p, with([](LarsOptions& o) { o.trust_coefficient = NAN; }));
             }).find("--lars-trust-coefficient") != std::string::npos);
  BOOST_TEST(error_of([&] { (void)Lars(p, with([](LarsOptions& o) { o.epsilon = -1e-9; })); }).find("--lars-epsilon") !=
             std::string::npos);
  Lars ok(p, LarsOptions{});
  BOOST_TEST(error_of([&] { ok.step(scaletrain::test::cpu_context(), INFINITY); }).find("not finite") !=
             std::string::npos);
  BOOST_TEST(ok.steps() == 0);
  ParameterSet unfinished;
  unfinished.add_parameter("w", {1});
  BOOST_TEST(error_of([&] { (void)Lars(unfinished, LarsOptions{}); }).find("finalized") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
