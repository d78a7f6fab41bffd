// softmax_cross_entropy and count_correct: hand-derived values, the float64 reference, central
// finite differences of the reference, numerical stability at large logits, and the label checks.
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <limits>
#include <string>

#include "scaletrain/core/error.hpp"
#include "scaletrain/core/rng.hpp"
#include "scaletrain/ops/loss.hpp"
#include "support/gradcheck.hpp"
#include "support/reference_loss.hpp"

namespace st = scaletrain;
using scaletrain::test::nan_tensor;

namespace {

st::Tensor labels_tensor(const std::vector<int32_t>& v) {
  st::Tensor t = st::Tensor::empty({static_cast<int64_t>(v.size())}, st::DType::i32);
  std::copy(v.begin(), v.end(), t.data<int32_t>());
  return t;
}

auto mentions(const char* text) {
  return [text](const st::Error& e) { return std::string(e.what()).find(text) != std::string::npos; };
}

}  // namespace

BOOST_AUTO_TEST_SUITE(loss)

BOOST_AUTO_TEST_CASE(uniform_logits_give_log_k) {
  // Every class has p = 1/K, so every -log p_k = log K whatever the smoothing; the gradient is
  // (1/K - q_k) / N.
  st::Context ctx;
  const int64_t n = 3, k = 7;
  st::Tensor logits = st::Tensor::empty({n, k});
  logits.fill(2.5f);
  const st::Tensor labels = labels_tensor({0, 6, 3});
  for (float eps : {0.0f, 0.1f}) {
    st::Tensor d = nan_tensor({n, k});
    const double loss = st::ops::softmax_cross_entropy(ctx, logits, labels, eps, d);
    BOOST_TEST(loss == std::log(7.0), boost::test_tools::tolerance(1e-12));
    const float* g = d.data<float>();
    BOOST_TEST(g[0] == (1.0 / 7 - (1 - eps) - eps / 7.0) / 3, boost::test_tools::tolerance(1e-6));
    BOOST_TEST(g[1] == (1.0 / 7 - eps / 7.0) / 3, boost::test_tools::tolerance(1e-6));
  }
}

BOOST_AUTO_TEST_CASE(hand_derived_values) {
  // logits (0, log 2, log 3): p = (1/6, 2/6, 3/6), label 2.
  // eps 0: loss = log 2.  eps 0.1: 0.9 log 2 + 0.1 (log 6 + log 3 + log 2) / 3.
  st::Context ctx;
  const st::Tensor logits = st::test::to_tensor({0.0, std::log(2.0), std::log(3.0)}, {1, 3});
  const st::Tensor labels = labels_tensor({2});
  st::Tensor d = nan_tensor({1, 3});
  BOOST_TEST(st::ops::softmax_cross_entropy(ctx, logits, labels, 0.0f, d) == std::log(2.0),
             boost::test_tools::tolerance(1e-7));
  BOOST_TEST(st::test::to_vector(d) == (std::vector<double>{1.0 / 6, 2.0 / 6, -0.5}),
             boost::test_tools::tolerance(1e-6) << boost::test_tools::per_element());
  const double eps = static_cast<double>(0.1f);
  const double expected = (1 - eps) * std::log(2.0) + eps * std::log(36.0) / 3;
  BOOST_TEST(st::ops::softmax_cross_entropy(ctx, logits, labels, 0.1f, d) == expected,
             boost::test_tools::tolerance(1e-7));
  BOOST_TEST(
      st::test::to_vector(d) == (std::vector<double>{1.0 / 6 - eps / 3, 2.0 / 6 - eps / 3, 0.5 - (1 - eps) - eps / 3}),
      boost::test_tools::tolerance(1e-6) << boost::test_tools::per_element());
}

// The CPU's loss to 1e-9 of the reference, as it sums in double (the op cases allow any backend
// fp32-level error), with K = 1 and 2, and the loss-only call (no dlogits) giving the same loss.
BOOST_AUTO_TEST_CASE(kernel_matches_float64_reference) {
  st::Context ctx;
  const std::pair<int64_t, int64_t> shapes[] = {{3, 5}, {64, 10}, {7, 1000}, {1, 1}, {9, 2}};
  uint64_t seed = 11;
  for (auto [n, k] : shapes) {
    auto x = st::test::random_vector(n * k, ++seed, -8.0, 8.0);
    for (auto& v : x) v = static_cast<float>(v);
    st::Rng rng(++seed);
    std::vector<int32_t> y(n);
    for (auto& l : y) l = static_cast<int32_t>(rng.below(k));
    for (float eps : {0.0f, 0.1f}) {
      BOOST_TEST_CONTEXT("N " << n << ", K " << k << ", label smoothing " << eps) {
        std::vector<double> expected_grad;
        const double expected = st::test::reference_softmax_cross_entropy(n, k, x, y, eps, &expected_grad);
        st::Tensor d = nan_tensor({n, k});
        const double loss =
            st::ops::softmax_cross_entropy(ctx, st::test::to_tensor(x, {n, k}), labels_tensor(y), eps, d);
        BOOST_TEST(loss == expected, boost::test_tools::tolerance(1e-9));
        ST_CHECK_CLOSE_VECTORS(st::test::to_vector(d), expected_grad, 1e-8, 1e-5);
        st::Tensor none;  // loss only
        BOOST_TEST(st::ops::softmax_cross_entropy(ctx, st::test::to_tensor(x, {n, k}), labels_tensor(y), eps, none) ==
                   loss);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(reference_gradient_matches_finite_differences) {
  const int64_t n = 4, k = 6;
  auto x = st::test::random_vector(n * k, 5, -3.0, 3.0);
  const std::vector<int32_t> y{1, 5, 0, 1};
  for (double eps : {0.0, 0.1}) {
    BOOST_TEST_CONTEXT("label smoothing " << eps) {
      std::vector<double> grad;
      st::test::reference_softmax_cross_entropy(n, k, x, y, eps, &grad);
      auto f = [&] { return st::test::reference_softmax_cross_entropy(n, k, x, y, eps); };
      ST_CHECK_CLOSE_VECTORS(grad, st::test::numeric_gradient(f, x), 1e-8, 1e-6);
    }
  }
}

BOOST_AUTO_TEST_CASE(large_logits_stay_finite) {
  // exp(1000) overflows; log-sum-exp does not: loss = 0 for the right class, 1000 for the other.
  st::Context ctx;
  const st::Tensor logits = st::test::to_tensor({1000, 0, 1000, 0}, {2, 2});
  st::Tensor d = nan_tensor({2, 2});
  const double loss = st::ops::softmax_cross_entropy(ctx, logits, labels_tensor({0, 1}), 0.0f, d);
  BOOST_TEST(loss == 500.0, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(st::test::to_vector(d) == (std::vector<double>{0, 0, 0.5, -0.5}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(out_of_range_labels_are_named) {
  st::Context ctx;
  const st::Tensor logits = st::Tensor::zeros({3, 10});
  st::Tensor d = st::Tensor::zeros({3, 10});
  BOOST_CHECK_EXCEPTION(st::ops::softmax_cross_entropy(ctx, logits, labels_tensor({0, 10, 2}), 0.0f, d), st::Error,
                        mentions("label 10 of sample 1 is outside the 10 classes [0, 10)"));
  BOOST_CHECK_EXCEPTION(st::ops::softmax_cross_entropy(ctx, logits, labels_tensor({0, 1, -1}), 0.0f, d), st::Error,
                        mentions("label -1 of sample 2"));
  BOOST_CHECK_EXCEPTION(st::ops::count_correct(ctx, logits, labels_tensor({0, 1, 12})), st::Error,
                        mentions("label 12 of sample 2"));
  BOOST_CHECK_EXCEPTION(st::ops::softmax_cross_entropy(ctx, logits, labels_tensor({0, 1}), 0.0f, d), st::Error,
                        mentions("labels must be (3)"));
  const st::Tensor float_labels = st::Tensor::zeros({3});
  BOOST_CHECK_EXCEPTION(st::ops::softmax_cross_entropy(ctx, logits, float_labels, 0.0f, d), st::Error,
                        mentions("labels must be int32"));
}

BOOST_AUTO_TEST_CASE(count_correct_takes_the_first_maximum) {
  st::Context ctx;
  const st::Tensor logits = st::test::to_tensor(
      {
          1, 3, 3,    // tie: class 1 wins
          5, 0, -1,   // class 0
          0, 0, 0,    // all tied: class 0
          -2, -1, -3  // class 1
      },
      {4, 3});
  BOOST_TEST(st::ops::count_correct(ctx, logits, labels_tensor({1, 0, 0, 1})) == 4);
  BOOST_TEST(st::ops::count_correct(ctx, logits, labels_tensor({2, 0, 1, 1})) == 2);
  BOOST_TEST(st::ops::count_correct(ctx, logits, labels_tensor({2, 1, 2, 0})) == 0);
}

BOOST_AUTO_TEST_CASE(count_correct_nan_rule_and_empty_batch) {
  // The scan's rule, which every device's kernel follows: a NaN at class 0 stays the maximum
  // (nothing compares greater), a NaN elsewhere never becomes it.
  st::Context ctx;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const st::Tensor logits = st::test::to_tensor({nan, 1, 2, 1, nan, 2, 3, nan, 3}, {3, 3});
  BOOST_TEST(st::ops::count_correct(ctx, logits, labels_tensor({0, 2, 0})) == 3);
  BOOST_TEST(st::ops::count_correct(ctx, st::Tensor::zeros({0, 5}), labels_tensor({})) == 0);
}

BOOST_AUTO_TEST_SUITE_END()
