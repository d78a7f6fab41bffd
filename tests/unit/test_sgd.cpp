// SGD: hand-derived updates for one weight (momentum, weight decay, nesterov), then several steps
// on a small ParameterSet against a float64 loop written straight from the rule in sgd.hpp.
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <vector>

#include "scaletrain/core/error.hpp"
#include "scaletrain/nn/parameters.hpp"
#include "scaletrain/optim/sgd.hpp"
#include "support/gradcheck.hpp"

using scaletrain::nn::ParameterSet;
using scaletrain::optim::Sgd;
using scaletrain::optim::SgdOptions;

namespace {

// One parameter holding a single weight.
ParameterSet scalar_params(float w) {
  ParameterSet p;
  p.add_parameter("w", {1});
  p.finalize();
  p.value(0).data<float>()[0] = w;
  return p;
}

// A float64 reference of the rule, for every element at once.
struct ReferenceSgd {
  SgdOptions o;
  std::vector<double> v;
  void step(std::vector<double>& w, const std::vector<double>& grad, double lr) {
    if (v.empty()) v.assign(w.size(), 0.0);
    for (std::size_t i = 0; i < w.size(); ++i) {
      double g = grad[i] + o.weight_decay * w[i];
      v[i] = o.momentum * v[i] + g;
      double d = o.nesterov ? g + o.momentum * v[i] : v[i];
      w[i] -= lr * d;
    }
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(sgd)

// w = 1, grad = 0.5 on both steps, lr 0.1, mu 0.9, wd 0.1:
//   step 1: g = 0.5 + 0.1*1 = 0.6; v = 0.6; w = 1 - 0.1*0.6 = 0.94
//   step 2: g = 0.5 + 0.1*0.94 = 0.594; v = 0.9*0.6 + 0.594 = 1.134; w = 0.94 - 0.1134 = 0.8266
BOOST_AUTO_TEST_CASE(momentum_and_weight_decay_by_hand) {
  ParameterSet p = scalar_params(1.0f);
  Sgd opt(p, SgdOptions{0.9, 0.1, false});
  p.grad(0).data<float>()[0] = 0.5f;
  opt.step(scaletrain::test::cpu_context(), 0.1);
  BOOST_TEST(p.value(0).data<float>()[0] == 0.94, boost::test_tools::tolerance(1e-6));
  BOOST_TEST(opt.momentum_buffer().data<float>()[0] == 0.6, boost::test_tools::tolerance(1e-6));
  opt.step(scaletrain::test::cpu_context(), 0.1);
  BOOST_TEST(p.value(0).data<float>()[0] == 0.8266, boost::test_tools::tolerance(1e-6));
  BOOST_TEST(opt.momentum_buffer().data<float>()[0] == 1.134, boost::test_tools::tolerance(1e-6));
  BOOST_TEST(opt.steps() == 2);
}

// Same inputs with nesterov (the update uses g + mu*v):
//   step 1: g = 0.6; v = 0.6; d = 0.6 + 0.54 = 1.14; w = 1 - 0.114 = 0.886
//   step 2: g = 0.5 + 0.0886 = 0.5886; v = 0.54 + 0.5886 = 1.1286;
//           d = 0.5886 + 0.9*1.1286 = 1.60434; w = 0.886 - 0.160434 = 0.725566
BOOST_AUTO_TEST_CASE(nesterov_by_hand) {
  ParameterSet p = scalar_params(1.0f);
  Sgd opt(p, SgdOptions{0.9, 0.1, true});
  p.grad(0).data<float>()[0] = 0.5f;
  opt.step(scaletrain::test::cpu_context(), 0.1);
  BOOST_TEST(p.value(0).data<float>()[0] == 0.886, boost::test_tools::tolerance(1e-6));
  opt.step(scaletrain::test::cpu_context(), 0.1);
  BOOST_TEST(p.value(0).data<float>()[0] == 0.725566, boost::test_tools::tolerance(1e-6));
  BOOST_TEST(opt.momentum_buffer().data<float>()[0] == 1.1286, boost::test_tools::tolerance(1e-6));
}

// Without momentum and weight decay: plain w -= lr * grad, exact for these binary fractions.
BOOST_AUTO_TEST_CASE(plain_sgd_is_exact) {
  ParameterSet p = scalar_params(2.0f);
  Sgd opt(p, SgdOptions{0.0, 0.0, false});
  p.grad(0).data<float>()[0] = 0.75f;
  opt.step(scaletrain::test::cpu_context(), 0.5);
  BOOST_TEST(p.value(0).data<float>()[0] == 1.625f);
  opt.step(scaletrain::test::cpu_context(), 0.25);
  BOOST_TEST(p.value(0).data<float>()[0] == 1.4375f);
}

BOOST_AUTO_TEST_CASE(several_steps_against_float64) {
  for (bool nesterov : {false, true}) {
    ParameterSet p;
    p.add_parameter("layer.weight", {3, 5});
    p.add_parameter("layer.bias", {3});
    p.add_buffer("bn.running_mean", {3});
    p.add_parameter("fc.weight", {2, 7});
    p.finalize();
    const int64_t n = p.flat_values().numel();
    BOOST_REQUIRE(n == 15 + 3 + 14);
    std::vector<double> w(n), grad(n);
    for (int64_t i = 0; i < n; ++i) {
      w[i] = 0.25 * static_cast<double>((i * 7) % 11) - 1.0;
      p.flat_values().data<float>()[i] = static_cast<float>(w[i]);
    }
    p.buffer(0).fill(3.0f);
    SgdOptions options{0.9, 5e-4, nesterov};
    Sgd opt(p, options);
    ReferenceSgd ref{options, {}};
    const double lrs[] = {0.1, 0.05, 0.2, 0.1, 0.01};
    for (int s = 0; s < 5; ++s) {
      for (int64_t i = 0; i < n; ++i) {
        grad[i] = 0.125 * static_cast<double>(((i + 3 * s) % 9) - 4);
        p.flat_grads().data<float>()[i] = static_cast<float>(grad[i]);
      }
      opt.step(scaletrain::test::cpu_context(), lrs[s]);
      ref.step(w, grad, lrs[s]);
    }
    int bad = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (std::abs(p.flat_values().data<float>()[i] - w[i]) > 1e-6 * (1.0 + std::abs(w[i]))) ++bad;
      if (std::abs(opt.momentum_buffer().data<float>()[i] - ref.v[i]) > 1e-6 * (1.0 + std::abs(ref.v[i]))) ++bad;
    }
    BOOST_TEST(bad == 0, "nesterov=" << nesterov << ": " << bad << " elements differ from the float64 rule");
    // Buffers are not parameters: untouched.
    BOOST_TEST(p.buffer(0).data<float>()[2] == 3.0f);
    // Per-parameter momentum views share the flat buffer.
    scaletrain::Tensor fc = opt.momentum_view(2);
    BOOST_TEST(fc.shape() == (scaletrain::Shape{2, 7}));
    BOOST_TEST(fc.data<float>()[0] == opt.momentum_buffer().data<float>()[18]);
  }
}

BOOST_AUTO_TEST_CASE(invalid_options) {
  ParameterSet p = scalar_params(1.0f);
  BOOST_CHECK_THROW(Sgd(p, SgdOptions{-0.1, 0.0, false}), scaletrain::Error);
  BOOST_CHECK_THROW(Sgd(p, SgdOptions{0.9, -1.0, false}), scaletrain::Error);
  BOOST_CHECK_THROW(Sgd(p, SgdOptions{0.0, 0.0, true}), scaletrain::Error);
  ParameterSet unfinished;
  unfinished.add_parameter("w", {1});
  BOOST_CHECK_THROW(Sgd(unfinished, SgdOptions{}), scaletrain::Error);
}

BOOST_AUTO_TEST_SUITE_END()
