// sigmoid_bce_with_logits: hand-derived values, the float64 reference (written from the
// definition, not the stable form), central finite differences, stability at large logits, a
// loss that does not depend on the number of threads, and the argument checks.
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <limits>
#include <string>

#include "scaletrain/core/error.hpp"
#include "scaletrain/ops/sigmoid_bce.hpp"
#include "support/gradcheck.hpp"
#include "support/reference_sigmoid_bce.hpp"

namespace st = scaletrain;
using scaletrain::test::nan_tensor;

namespace {

// Targets 0 or 1 (NCF's labels), every third one positive.
std::vector<double> binary_targets(std::size_t n) {
  std::vector<double> y(n);
  for (std::size_t i = 0; i < n; ++i) y[i] = i % 3 == 0 ? 1.0 : 0.0;
  return y;
}

std::vector<double> random_floats(std::size_t n, uint64_t seed, double lo, double hi) {
  auto v = st::test::random_vector(n, seed, lo, hi);
  for (auto& x : v) x = static_cast<float>(x);
  return v;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(sigmoid_bce)

// x = 0: loss log 2 whatever y; x = log 3 (s = 3/4), y = 1: -log(3/4); y = 0: -log(1/4); y = 0.5:
// -(log(3/4) + log(1/4)) / 2. Gradients (s - y) / N with N = 4.
BOOST_AUTO_TEST_CASE(hand_derived_values) {
  st::Context ctx;
  const float l3 = static_cast<float>(std::log(3.0));
  const st::Tensor x = st::test::to_tensor({0.0, l3, l3, l3}, {4, 1});
  const st::Tensor y = st::test::to_tensor({1.0, 1.0, 0.0, 0.5}, {4, 1});
  st::Tensor d = nan_tensor({4, 1});
  const double s = 1.0 / (1.0 + std::exp(-static_cast<double>(l3)));  // 3/4 to float rounding of log 3
  const double want = (std::log(2.0) - std::log(s) - std::log(1 - s) - (std::log(s) + std::log(1 - s)) / 2) / 4;
  BOOST_TEST(st::ops::sigmoid_bce_with_logits(ctx, x, y, d) == want, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(st::test::to_vector(d) == (std::vector<double>{-0.125, (s - 1) / 4, s / 4, (s - 0.5) / 4}),
             boost::test_tools::tolerance(1e-6) << boost::test_tools::per_element());
  BOOST_TEST(std::fabs(s - 0.75) < 1e-7);
}

// The CPU's loss to 1e-10 of the reference, as it computes in double (the op cases allow any
// backend fp32-level error), with soft targets, both shapes of logits and a sum over many chunks.
BOOST_AUTO_TEST_CASE(kernel_matches_float64_reference) {
  st::Context ctx;
  uint64_t seed = 3;
  for (int64_t n : {1, 2, 7, 4097, 100003}) {
    BOOST_TEST_CONTEXT("N " << n) {
      const auto x = random_floats(n, seed++, -8.0, 8.0);
      auto y = binary_targets(n);
      if (n == 7) y = random_floats(n, seed++, 0.0, 1.0);  // soft targets too
      std::vector<double> want_d;
      const double want = st::test::reference_sigmoid_bce(x, y, &want_d);
      for (const st::Shape& s : {st::Shape{n}, st::Shape{n, 1}}) {
        st::Tensor d = nan_tensor(s);
        const double got =
            st::ops::sigmoid_bce_with_logits(ctx, st::test::to_tensor(x, s), st::test::to_tensor(y, s), d);
        BOOST_TEST(got == want, boost::test_tools::tolerance(1e-10));
        ST_CHECK_CLOSE_VECTORS(st::test::to_vector(d), want_d, 1e-12, 1e-6);
      }
    }
  }
}

// d(mean loss)/dx by central differences of the kernel's own loss, taken from the loss-only call
// (no dlogits): the one check in this file of that call's loss.
BOOST_AUTO_TEST_CASE(gradient_matches_finite_differences) {
  st::Context ctx;
  const int64_t n = 9;
  auto x = random_floats(n, 21, -3.0, 3.0);
  const auto y = binary_targets(n);
  const st::Tensor ty = st::test::to_tensor(y, {n});
  auto f = [&] {
    st::Tensor none;
    return st::ops::sigmoid_bce_with_logits(ctx, st::test::to_tensor(x, {n}), ty, none);
  };
  st::Tensor d = nan_tensor({n});
  st::ops::sigmoid_bce_with_logits(ctx, st::test::to_tensor(x, {n}), ty, d);
  // x +- h rounds to float (a relative error of ~1e-4 in the step), hence the tolerance.
  ST_CHECK_CLOSE_VECTORS(st::test::to_vector(d), st::test::numeric_gradient(f, x, 1e-3), 1e-7, 1e-3);
}

// Where exp(|x|) overflows a float (|x| > 88) or a double (> 709), the stable form stays exact:
// loss = max(x, 0) - x y + log1p(exp(-|x|)) and the gradient saturates at (0 or 1) - y.
BOOST_AUTO_TEST_CASE(stable_at_large_logits) {
  st::Context ctx;
  const st::Tensor x = st::test::to_tensor({100.0, -100.0, 1000.0, -1000.0, 1e30}, {5});
  const st::Tensor y = st::test::to_tensor({1.0, 1.0, 0.0, 0.0, 1.0}, {5});
  st::Tensor d = nan_tensor({5});
  const double loss = st::ops::sigmoid_bce_with_logits(ctx, x, y, d);
  // Per sample: ~exp(-100), 100 + exp(-100), 1000, ~0, 0.
  BOOST_TEST(loss == 1100.0 / 5, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(st::test::to_vector(d) == (std::vector<double>{0.0, -0.2, 0.2, 0.0, 0.0}),
             boost::test_tools::tolerance(1e-7) << boost::test_tools::per_element());
}

// The mean is summed in fixed chunks in order: the same bits for any number of threads.
BOOST_AUTO_TEST_CASE(loss_independent_of_thread_count) {
  const int64_t n = 300001;
  const auto x = random_floats(n, 31, -5.0, 5.0);
  const st::Tensor tx = st::test::to_tensor(x, {n}), ty = st::test::to_tensor(binary_targets(n), {n});
  const int original = st::Context().threads();
  double first = 0.0;
  std::vector<double> first_d;
  for (int threads : {1, 2, 5}) {
    st::Context ctx(st::Device::cpu, threads);
    st::Tensor d = nan_tensor({n});
    const double loss = st::ops::sigmoid_bce_with_logits(ctx, tx, ty, d);
    if (threads == 1) {
      first = loss;
      first_d = st::test::to_vector(d);
    }
    BOOST_TEST(loss == first);
    BOOST_TEST((st::test::to_vector(d) == first_d));
  }
  st::Context restore(st::Device::cpu, original);
}

BOOST_AUTO_TEST_CASE(argument_checks) {
  st::Context ctx;
  st::Tensor x = st::Tensor::zeros({4, 1}), y = st::Tensor::zeros({4, 1}), none;
  st::Tensor y_flat = st::Tensor::zeros({4}), x_wide = st::Tensor::zeros({4, 2}), empty = st::Tensor::zeros({0});
  st::Tensor yi = st::Tensor::zeros({4, 1}, st::DType::i32), d_wrong = st::Tensor::zeros({5, 1});
  BOOST_CHECK_THROW(st::ops::sigmoid_bce_with_logits(ctx, x_wide, x_wide, none), st::Error);
  BOOST_CHECK_THROW(st::ops::sigmoid_bce_with_logits(ctx, x, yi, none), st::Error);
  BOOST_CHECK_THROW(st::ops::sigmoid_bce_with_logits(ctx, x, y, d_wrong), st::Error);
  BOOST_CHECK_THROW(st::ops::sigmoid_bce_with_logits(ctx, empty, empty, none), st::Error);
  try {
    st::ops::sigmoid_bce_with_logits(ctx, x, y_flat, none);
    BOOST_FAIL("no error");
  } catch (const st::Error& e) {
    const std::string msg = e.what();
    BOOST_TEST(msg.find("targets has shape [4], expected [4, 1]") != std::string::npos, msg);
  }
  try {
    st::ops::sigmoid_bce_with_logits(ctx, x_wide, x_wide, none);
  } catch (const st::Error& e) {
    const std::string msg = e.what();
    BOOST_TEST(msg.find("logits must be (N) or (N, 1), got [4, 2]") != std::string::npos, msg);
  }
}

BOOST_AUTO_TEST_SUITE_END()
