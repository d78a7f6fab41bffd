// Gradient accumulation (train/gradient_accumulation.hpp): K micro-batches of b give the gradient
// of one batch of K*b (a network without batch norm: Linear -> ReLU -> Linear -> cross-entropy),
// each gradient reaches the reducer exactly once, in the last micro-batch, and K = 1 changes nothing.
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <vector>

#include "scaletrain/backend/context.hpp"
#include "scaletrain/nn/layers.hpp"
#include "scaletrain/ops/loss.hpp"
#include "scaletrain/train/gradient_accumulation.hpp"
#include "support/gradcheck.hpp"

using namespace scaletrain;
using scaletrain::test::random_vector;
using scaletrain::test::to_tensor;

namespace {

constexpr int kIn = 6, kHidden = 5, kClasses = 3;

struct Net {
  nn::ParameterSet params;
  nn::Sequential seq;
  Net() {
    seq.emplace<nn::Linear>(params, "fc1", kIn, kHidden);
    seq.emplace<nn::ReLU>(false);
    seq.emplace<nn::Linear>(params, "fc2", kHidden, kClasses);
    params.finalize();
    const std::vector<double> w = random_vector(params.parameter_count(), 7);
    float* p = params.flat_values().data<float>();
    for (std::size_t i = 0; i < w.size(); ++i) p[i] = static_cast<float>(w[i]);
  }
  // Forward, loss and backward of rows [first, first + n) of (x, labels).
  void forward_backward(Context& ctx, const Tensor& x, const std::vector<int32_t>& labels, int first, int n) {
    Tensor xb = Tensor::view_of(x, static_cast<int64_t>(first) * kIn, {n, kIn});
    Tensor lb = Tensor::empty({n}, DType::i32);
    for (int i = 0; i < n; ++i) lb.data<int32_t>()[i] = labels[first + i];
    Tensor logits = seq.forward(ctx, xb, true);
    Tensor dlogits = Tensor::empty(logits.shape());
    ops::softmax_cross_entropy(ctx, logits, lb, 0.0f, dlogits);
    seq.backward(ctx, dlogits, false);
  }
  std::vector<float> grads() {
    const Tensor& g = params.flat_grads();
    return std::vector<float>(g.data<float>(), g.data<float>() + g.numel());
  }
};

std::vector<int32_t> random_labels(int n) {
  std::vector<int32_t> labels(n);
  const std::vector<double> r = random_vector(n, 11, 0.0, kClasses - 1e-9);
  for (int i = 0; i < n; ++i) labels[i] = static_cast<int32_t>(r[i]);
  return labels;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(gradient_accumulation)

BOOST_AUTO_TEST_CASE(micro_batches_equal_one_large_batch) {
  Context ctx;
  const int k = 4, b = 3, n = k * b;
  const Tensor x = to_tensor(random_vector(n * kIn, 5), {n, kIn});
  const std::vector<int32_t> labels = random_labels(n);

  Net whole;
  whole.forward_backward(ctx, x, labels, 0, n);
  const std::vector<float> expected = whole.grads();

  Net parts;
  std::vector<int> announced(parts.params.num_parameters(), 0);
  int announced_early = 0;
  train::GradientAccumulator acc(ctx, parts.params, k, [&](int i) { ++announced[i]; });
  parts.params.set_grad_ready_hook([&](int i) { acc.on_grad_ready(i); });
  for (int m = 0; m < k; ++m) {
    acc.start_micro_batch(m);
    parts.forward_backward(ctx, x, labels, m * b, b);
    if (m < k - 1)
      for (int c : announced) announced_early += c;
  }
  BOOST_TEST(announced_early == 0);  // nothing reaches the reducer before the last micro-batch
  for (int c : announced) BOOST_TEST(c == 1);
  const std::vector<float> got = parts.grads();
  BOOST_REQUIRE_EQUAL(got.size(), expected.size());
  double worst = 0.0;
  for (std::size_t i = 0; i < got.size(); ++i)
    worst = std::max(worst, std::abs(got[i] - expected[i]) / (1e-6 + std::abs(expected[i])));
  BOOST_TEST(worst < 1e-4, "largest relative difference " << worst);
}

// A micro-batch's gradient alone is not the batch's: the test above would fail on an accumulator
// that dropped the earlier micro-batches.
BOOST_AUTO_TEST_CASE(one_micro_batch_differs_from_the_batch) {
  Context ctx;
  const int n = 8;
  const Tensor x = to_tensor(random_vector(n * kIn, 5), {n, kIn});
  const std::vector<int32_t> labels = random_labels(n);
  Net whole, half;
  whole.forward_backward(ctx, x, labels, 0, n);
  half.forward_backward(ctx, x, labels, n / 2, n / 2);
  const std::vector<float> a = whole.grads(), c = half.grads();
  double largest = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) largest = std::max(largest, static_cast<double>(std::abs(a[i] - c[i])));
  BOOST_TEST(largest > 1e-3);
}

BOOST_AUTO_TEST_CASE(one_micro_batch_passes_gradients_through) {
  Context ctx;
  const int n = 4;
  const Tensor x = to_tensor(random_vector(n * kIn, 9), {n, kIn});
  const std::vector<int32_t> labels = random_labels(n);
  Net plain, hooked;
  plain.forward_backward(ctx, x, labels, 0, n);
  int calls = 0;
  train::GradientAccumulator acc(ctx, hooked.params, 1, [&](int) { ++calls; });
  hooked.params.set_grad_ready_hook([&](int i) { acc.on_grad_ready(i); });
  acc.start_micro_batch(0);
  hooked.forward_backward(ctx, x, labels, 0, n);
  BOOST_TEST(calls == hooked.params.num_parameters());
  BOOST_TEST(hooked.grads() == plain.grads());
}

BOOST_AUTO_TEST_SUITE_END()
