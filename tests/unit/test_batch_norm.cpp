// batch norm: the fp32 kernels against the float64 reference (training forward with running
// statistics, evaluation forward, backward) where the mean dwarfs the spread, with the CPU's own
// tolerances (its mean to a millionth of the spread, however large the mean), and for the
// smallest batches (two samples in training, one in evaluation); backward against central finite
// differences, of the reference and of the kernels; the running-statistics update against
// hand-computed values; non-default momentum and eps; in-place aliasing; argument checks; the
// cuDNN descriptor's dimensions. The kernels against the reference on odd, one-channel, 2-D and
// large shapes are op cases (tests/support/op_cases.cpp).
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <limits>
#include <string>

#include "scaletrain/core/error.hpp"
#include "scaletrain/ops/batch_norm.hpp"
#include "support/gradcheck.hpp"
#include "support/reference_batch_norm.hpp"

namespace st = scaletrain;
using scaletrain::test::nan_tensor;
using scaletrain::test::random_floats;

namespace {

constexpr double kEps = 1e-5, kMomentum = 0.1;

// Inputs of one batch-norm test case; x is offset + scale * U(-1, 1).
struct Case {
  st::Shape shape;
  double offset = 0.0, scale = 1.0;
  uint64_t seed = 1;

  int64_t channels() const { return shape.back(); }
  std::size_t numel() const { return static_cast<std::size_t>(st::shape_numel(shape)); }
  std::vector<double> x() const { return random_floats(numel(), seed, offset - scale, offset + scale); }
  std::vector<double> dy() const { return random_floats(numel(), seed + 1); }
  std::vector<double> gamma() const { return random_floats(channels(), seed + 2, 0.5, 1.5); }
  std::vector<double> beta() const { return random_floats(channels(), seed + 3); }
  std::vector<double> running_mean() const { return random_floats(channels(), seed + 4); }
  std::vector<double> running_var() const { return random_floats(channels(), seed + 5, 0.5, 2.0); }
  std::string describe() const {
    return "x " + st::shape_string(shape) + " = " + std::to_string(offset) + " + " + std::to_string(scale) +
           " * U(-1, 1)";
  }
};

struct TrainingOut {
  std::vector<double> y, mean, inv_std, running_mean, running_var;
};

TrainingOut run_training(st::Context& ctx, const st::Shape& shape, const std::vector<double>& x,
                         const std::vector<double>& gamma, const std::vector<double>& beta,
                         const std::vector<double>& running_mean, const std::vector<double>& running_var) {
  const st::Shape cs{shape.back()};
  st::Tensor rm = st::test::to_tensor(running_mean, cs), rv = st::test::to_tensor(running_var, cs);
  st::Tensor y = nan_tensor(shape), sm = nan_tensor(cs), sis = nan_tensor(cs);
  st::ops::batch_norm_forward_training(ctx, {}, st::test::to_tensor(x, shape), st::test::to_tensor(gamma, cs),
                                       st::test::to_tensor(beta, cs), rm, rv, y, sm, sis);
  return {st::test::to_vector(y), st::test::to_vector(sm), st::test::to_vector(sis), st::test::to_vector(rm),
          st::test::to_vector(rv)};
}

TrainingOut run_training(st::Context& ctx, const Case& c, const std::vector<double>& x) {
  return run_training(ctx, c.shape, x, c.gamma(), c.beta(), c.running_mean(), c.running_var());
}

struct BackwardOut {
  std::vector<double> dx, dgamma, dbeta;
};

// Training forward then backward with the saved statistics, as a layer runs them.
BackwardOut run_backward(st::Context& ctx, const st::Shape& shape, const std::vector<double>& x,
                         const std::vector<double>& dy, const std::vector<double>& gamma,
                         const std::vector<double>& beta) {
  const st::Shape cs{shape.back()};
  const std::vector<double> zeros(shape.back(), 0.0), ones(shape.back(), 1.0);
  const TrainingOut fwd = run_training(ctx, shape, x, gamma, beta, zeros, ones);
  st::Tensor dx = nan_tensor(shape), dgamma = nan_tensor(cs), dbeta = nan_tensor(cs);
  st::ops::batch_norm_backward(ctx, {}, st::test::to_tensor(x, shape), st::test::to_tensor(dy, shape),
                               st::test::to_tensor(gamma, cs), st::test::to_tensor(fwd.mean, cs),
                               st::test::to_tensor(fwd.inv_std, cs), dx, dgamma, dbeta);
  return {st::test::to_vector(dx), st::test::to_vector(dgamma), st::test::to_vector(dbeta)};
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// The inputs the op cases leave out: a mean far beyond the spread (the op cases' tolerances scale
// with the mean; these hold the CPU to the spread) and the smallest training batch.
const std::vector<Case>& reference_cases() {
  static const std::vector<Case> cases = {
      {{2, 7}, 0.0, 1.0, 16},            // 2-D, two samples
      {{4, 6, 6, 16}, 1000.0, 1.0, 18},  // |mean| >> std: the variance must not cancel
      {{3, 5, 7, 3}, -3.0e4, 10.0, 19},  // ... nor here
      {{64, 7, 7, 24}, 300.0, 0.1, 20},  // ... nor with many rows, threaded
  };
  return cases;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(batch_norm)

BOOST_AUTO_TEST_CASE(training_forward_matches_reference) {
  st::Context ctx;
  for (const Case& c : reference_cases()) {
    BOOST_TEST_CONTEXT(c.describe()) {
      const auto x = c.x();
      const TrainingOut got = run_training(ctx, c, x);
      const auto want = st::test::reference_batch_norm_forward_training(
          x, c.channels(), c.gamma(), c.beta(), c.running_mean(), c.running_var(), kEps, kMomentum);
      ST_CHECK_CLOSE_VECTORS(got.y, want.y, 2e-6, 2e-6);
      // The mean to float accuracy relative to the spread of the data (and the offset).
      ST_CHECK_CLOSE_VECTORS(got.mean, want.mean, 1e-6 * c.scale, 1e-7);
      ST_CHECK_CLOSE_VECTORS(got.inv_std, want.inv_std, 0.0, 1e-6);
      ST_CHECK_CLOSE_VECTORS(got.running_mean, want.running_mean, 1e-7, 1e-7);
      ST_CHECK_CLOSE_VECTORS(got.running_var, want.running_var, 1e-7, 1e-6);
    }
  }
}

BOOST_AUTO_TEST_CASE(inference_forward_uses_running_statistics) {
  st::Context ctx;
  std::vector<Case> cases = reference_cases();
  cases.push_back({{1, 1, 1, 5}, 0.0, 1.0, 21});  // a single sample: fine in evaluation
  cases.push_back({{1, 6}, 0.0, 1.0, 22});
  for (const Case& c : cases) {
    BOOST_TEST_CONTEXT(c.describe()) {
      const st::Shape cs{c.channels()};
      // Running statistics near the data, so that the output is O(1) and the tolerance tight.
      auto rm = c.running_mean();
      for (auto& v : rm) v = static_cast<float>(v * c.scale + c.offset);
      const auto x = c.x();
      st::Tensor rmt = st::test::to_tensor(rm, cs), rvt = st::test::to_tensor(c.running_var(), cs);
      st::Tensor y = nan_tensor(c.shape);
      st::ops::batch_norm_forward_inference(ctx, {}, st::test::to_tensor(x, c.shape),
                                            st::test::to_tensor(c.gamma(), cs), st::test::to_tensor(c.beta(), cs), rmt,
                                            rvt, y);
      const auto want = st::test::reference_batch_norm_forward_inference(x, c.channels(), c.gamma(), c.beta(), rm,
                                                                         c.running_var(), kEps);
      ST_CHECK_CLOSE_VECTORS(st::test::to_vector(y), want, 1e-5, 1e-5);
    }
  }
}

BOOST_AUTO_TEST_CASE(backward_matches_reference) {
  st::Context ctx;
  for (const Case& c : reference_cases()) {
    BOOST_TEST_CONTEXT(c.describe()) {
      const auto x = c.x(), dy = c.dy();
      const BackwardOut got = run_backward(ctx, c.shape, x, dy, c.gamma(), c.beta());
      const auto want = st::test::reference_batch_norm_backward(x, dy, c.channels(), c.gamma(), kEps);
      ST_CHECK_CLOSE_VECTORS(got.dx, want.dx, 2e-6, 2e-5);
      ST_CHECK_CLOSE_VECTORS(got.dgamma, want.dgamma, 1e-5, 1e-5);
      ST_CHECK_CLOSE_VECTORS(got.dbeta, want.dbeta, 1e-5, 1e-5);
    }
  }
}

// Gradients of f = sum(y * r): the reference backward against central differences of the
// reference forward (tight), and the fp32 kernels' backward against central differences of the
// fp32 forward (loose, since that forward is only float-accurate).
BOOST_AUTO_TEST_CASE(backward_matches_finite_differences) {
  st::Context ctx;
  const std::vector<Case> cases = {{{2, 3, 3, 3}, 0.5, 1.0, 31}, {{3, 2}, 0.0, 1.0, 32}, {{1, 2, 3, 17}, 0.0, 1.0, 33}};
  for (const Case& c : cases) {
    BOOST_TEST_CONTEXT(c.describe()) {
      const int64_t ch = c.channels();
      auto x = c.x(), gamma = c.gamma(), beta = c.beta();
      const auto r = c.dy(), rm = c.running_mean(), rv = c.running_var();

      auto f_ref = [&] {
        return dot(st::test::reference_batch_norm_forward_training(x, ch, gamma, beta, rm, rv, kEps, kMomentum).y, r);
      };
      const auto want = st::test::reference_batch_norm_backward(x, r, ch, gamma, kEps);
      ST_CHECK_CLOSE_VECTORS(want.dx, st::test::numeric_gradient(f_ref, x), 1e-7, 1e-6);
      ST_CHECK_CLOSE_VECTORS(want.dgamma, st::test::numeric_gradient(f_ref, gamma), 1e-7, 1e-6);
      ST_CHECK_CLOSE_VECTORS(want.dbeta, st::test::numeric_gradient(f_ref, beta), 1e-7, 1e-6);

      auto f_kernel = [&] { return dot(run_training(ctx, c.shape, x, gamma, beta, rm, rv).y, r); };
      const BackwardOut got = run_backward(ctx, c.shape, x, r, gamma, beta);
      ST_CHECK_CLOSE_VECTORS(got.dx, st::test::numeric_gradient(f_kernel, x, 1e-2), 2e-3, 2e-3);
      ST_CHECK_CLOSE_VECTORS(got.dgamma, st::test::numeric_gradient(f_kernel, gamma, 1e-2), 2e-3, 2e-3);
      ST_CHECK_CLOSE_VECTORS(got.dbeta, st::test::numeric_gradient(f_kernel, beta, 1e-2), 2e-3, 2e-3);
    }
  }
}

// Two training steps on (4, 2) data, against values worked out by hand:
// running = 0.9 * running + 0.1 * batch, with the unbiased batch variance.
BOOST_AUTO_TEST_CASE(running_statistics_two_steps) {
  st::Context ctx;
  const st::Shape xs{4, 2}, cs{2};
  st::Tensor rm = st::test::to_tensor({0.0, 0.0}, cs), rv = st::test::to_tensor({1.0, 1.0}, cs);
  const st::Tensor gamma = st::test::to_tensor({1.0, 1.0}, cs), beta = st::test::to_tensor({0.0, 0.0}, cs);
  st::Tensor y = nan_tensor(xs), sm = nan_tensor(cs), sis = nan_tensor(cs);

  // Channel 0: 1, 2, 3, 4 (mean 2.5, biased var 1.25, unbiased 5/3); channel 1: 0, 0, 2, 2
  // (mean 1, biased var 1, unbiased 4/3).
  const st::Tensor x1 = st::test::to_tensor({1, 0, 2, 0, 3, 2, 4, 2}, xs);
  st::ops::batch_norm_forward_training(ctx, {}, x1, gamma, beta, rm, rv, y, sm, sis);
  ST_CHECK_CLOSE_VECTORS(st::test::to_vector(rm), (std::vector<double>{0.25, 0.1}), 0.0, 1e-6);
  ST_CHECK_CLOSE_VECTORS(st::test::to_vector(rv), (std::vector<double>{0.9 + 0.1 * 5 / 3.0, 0.9 + 0.1 * 4 / 3.0}), 0.0,
                         1e-6);
  ST_CHECK_CLOSE_VECTORS(st::test::to_vector(sm), (std::vector<double>{2.5, 1.0}), 0.0, 1e-7);
  ST_CHECK_CLOSE_VECTORS(st::test::to_vector(sis),
                         (std::vector<double>{1 / std::sqrt(1.25 + kEps), 1 / std::sqrt(1.0 + kEps)}), 0.0, 1e-6);
  // y for channel 1 is exactly +-1 / sqrt(1 + eps).
  const double s1 = 1 / std::sqrt(1.0 + kEps);
  const auto y1 = st::test::to_vector(y);
  ST_CHECK_CLOSE_VECTORS((std::vector<double>{y1[1], y1[3], y1[5], y1[7]}), (std::vector<double>{-s1, -s1, s1, s1}),
                         0.0, 1e-6);

  // Channel 0: 2, 4, 6, 8 (mean 5, biased var 5, unbiased 20/3); channel 1: -1, 1, -1, 1
  // (mean 0, biased var 1, unbiased 4/3).
  const st::Tensor x2 = st::test::to_tensor({2, -1, 4, 1, 6, -1, 8, 1}, xs);
  st::ops::batch_norm_forward_training(ctx, {}, x2, gamma, beta, rm, rv, y, sm, sis);
  const double rv0 = 0.9 * (0.9 + 0.1 * 5 / 3.0) + 0.1 * 20 / 3.0;  // 1.626666...
  const double rv1 = 0.9 * (0.9 + 0.1 * 4 / 3.0) + 0.1 * 4 / 3.0;   // 1.063333...
  ST_CHECK_CLOSE_VECTORS(st::test::to_vector(rm), (std::vector<double>{0.9 * 0.25 + 0.5, 0.9 * 0.1}), 0.0, 1e-6);
  ST_CHECK_CLOSE_VECTORS(st::test::to_vector(rv), (std::vector<double>{rv0, rv1}), 0.0, 1e-6);
  BOOST_TEST(std::fabs(rv0 - 1.6266666666) < 1e-9);
  BOOST_TEST(std::fabs(rv1 - 1.0633333333) < 1e-9);

  // Evaluation now normalises with these running statistics: x = 1 in both channels.
  st::Tensor ye = nan_tensor({1, 2});
  st::ops::batch_norm_forward_inference(ctx, {}, st::test::to_tensor({1.0, 1.0}, {1, 2}), gamma, beta, rm, rv, ye);
  ST_CHECK_CLOSE_VECTORS(st::test::to_vector(ye),
                         (std::vector<double>{(1 - 0.725) / std::sqrt(rv0 + kEps), (1 - 0.09) / std::sqrt(rv1 + kEps)}),
                         0.0, 1e-6);
}

BOOST_AUTO_TEST_CASE(momentum_and_eps_are_honoured) {
  st::Context ctx;
  const Case c{{3, 4, 5}, 2.0, 1.0, 41};
  const st::Shape cs{c.channels()};
  const st::ops::BatchNormParams p{1e-2f, 0.3f};
  const auto x = c.x();
  st::Tensor rm = st::test::to_tensor(c.running_mean(), cs), rv = st::test::to_tensor(c.running_var(), cs);
  st::Tensor y = nan_tensor(c.shape), sm = nan_tensor(cs), sis = nan_tensor(cs);
  st::ops::batch_norm_forward_training(ctx, p, st::test::to_tensor(x, c.shape), st::test::to_tensor(c.gamma(), cs),
                                       st::test::to_tensor(c.beta(), cs), rm, rv, y, sm, sis);
  const auto want = st::test::reference_batch_norm_forward_training(x, c.channels(), c.gamma(), c.beta(),
                                                                    c.running_mean(), c.running_var(), 1e-2, 0.3);
  ST_CHECK_CLOSE_VECTORS(st::test::to_vector(y), want.y, 2e-6, 2e-6);
  ST_CHECK_CLOSE_VECTORS(st::test::to_vector(rm), want.running_mean, 1e-7, 1e-6);
  ST_CHECK_CLOSE_VECTORS(st::test::to_vector(rv), want.running_var, 1e-7, 1e-6);
}

// y may alias x (forward), dx may alias dy (backward): results equal the out-of-place ones.
BOOST_AUTO_TEST_CASE(in_place_aliasing) {
  st::Context ctx;
  for (const Case& c : {Case{{3, 5, 7, 3}, 0.0, 1.0, 51}, Case{{8, 16, 16, 32}, 1.0, 1.0, 52}}) {
    BOOST_TEST_CONTEXT(c.describe()) {
      const st::Shape cs{c.channels()};
      const auto x = c.x(), dy = c.dy();
      const st::Tensor gamma = st::test::to_tensor(c.gamma(), cs), beta = st::test::to_tensor(c.beta(), cs);
      st::Tensor rm = st::test::to_tensor(c.running_mean(), cs), rv = st::test::to_tensor(c.running_var(), cs);
      st::Tensor sm = nan_tensor(cs), sis = nan_tensor(cs);

      const TrainingOut out_of_place = run_training(ctx, c, x);
      st::Tensor xy = st::test::to_tensor(x, c.shape);
      st::ops::batch_norm_forward_training(ctx, {}, xy, gamma, beta, rm, rv, xy, sm, sis);
      BOOST_TEST(st::test::to_vector(xy) == out_of_place.y);

      st::Tensor xi = st::test::to_tensor(x, c.shape), yi = nan_tensor(c.shape);
      st::ops::batch_norm_forward_inference(ctx, {}, xi, gamma, beta, rm, rv, yi);
      st::ops::batch_norm_forward_inference(ctx, {}, xi, gamma, beta, rm, rv, xi);
      BOOST_TEST(st::test::to_vector(xi) == st::test::to_vector(yi));

      const BackwardOut want = run_backward(ctx, c.shape, x, dy, c.gamma(), c.beta());
      const st::Tensor xt = st::test::to_tensor(x, c.shape);
      st::Tensor y = nan_tensor(c.shape), dxy = st::test::to_tensor(dy, c.shape);
      st::Tensor dgamma = nan_tensor(cs), dbeta = nan_tensor(cs);
      rm.zero();
      rv.fill(1.0f);
      st::ops::batch_norm_forward_training(ctx, {}, xt, gamma, beta, rm, rv, y, sm, sis);
      st::ops::batch_norm_backward(ctx, {}, xt, dxy, gamma, sm, sis, dxy, dgamma, dbeta);
      BOOST_TEST(st::test::to_vector(dxy) == want.dx);
      BOOST_TEST(st::test::to_vector(dgamma) == want.dgamma);
    }
  }
}

BOOST_AUTO_TEST_CASE(argument_checks) {
  st::Context ctx;
  const st::Shape cs{4};
  st::Tensor gamma = st::Tensor::zeros(cs), beta = st::Tensor::zeros(cs), rm = st::Tensor::zeros(cs);
  st::Tensor rv = st::Tensor::zeros(cs), sm = st::Tensor::zeros(cs), sis = st::Tensor::zeros(cs);
  st::Tensor x = st::Tensor::zeros({2, 3, 3, 4}), y = st::Tensor::zeros({2, 3, 3, 4});
  // Training with one value per channel (PyTorch refuses it too: no unbiased variance).
  st::Tensor one = st::Tensor::zeros({1, 1, 1, 4});
  BOOST_CHECK_THROW(st::ops::batch_norm_forward_training(ctx, {}, one, gamma, beta, rm, rv, one, sm, sis), st::Error);
  // Wrong channel count, wrong output shape, 1-D input, wrong dtype.
  st::Tensor gamma3 = st::Tensor::zeros({3});
  BOOST_CHECK_THROW(st::ops::batch_norm_forward_training(ctx, {}, x, gamma3, beta, rm, rv, y, sm, sis), st::Error);
  st::Tensor y_bad = st::Tensor::zeros({2, 3, 4, 3});
  BOOST_CHECK_THROW(st::ops::batch_norm_forward_inference(ctx, {}, x, gamma, beta, rm, rv, y_bad), st::Error);
  st::Tensor flat = st::Tensor::zeros({4});
  BOOST_CHECK_THROW(st::ops::batch_norm_forward_inference(ctx, {}, flat, gamma, beta, rm, rv, flat), st::Error);
  st::Tensor xi = st::Tensor::zeros({2, 3, 3, 4}, st::DType::i32);
  BOOST_CHECK_THROW(st::ops::batch_norm_forward_inference(ctx, {}, xi, gamma, beta, rm, rv, y), st::Error);
  st::Tensor dx = st::Tensor::zeros({2, 3, 3, 4}), dg = st::Tensor::zeros({5});
  BOOST_CHECK_THROW(st::ops::batch_norm_backward(ctx, {}, x, y, gamma, sm, sis, dx, dg, beta), st::Error);
  try {
    st::ops::batch_norm_forward_training(ctx, {}, x, gamma3, beta, rm, rv, y, sm, sis);
  } catch (const st::Error& e) {
    const std::string msg = e.what();
    BOOST_TEST(msg.find("gamma") != std::string::npos, msg);
    BOOST_TEST(msg.find("[4]") != std::string::npos, msg);
  }
}

BOOST_AUTO_TEST_CASE(cudnn_descriptor_dims_keep_rows_out_of_n) {
  // 4-D activations as they are: (N, H, W, C) -> logical (N, C, H, W).
  const auto a = st::ops::batch_norm_descriptor_dims({32, 7, 5, 64});
  BOOST_TEST((std::vector<int64_t>{a.n, a.c, a.h, a.w} == std::vector<int64_t>{32, 64, 7, 5}));
  // Rows of a 2-D or 3-D input go to H, so N stays 1: cuDNN caps N near 65,535 (inference).
  const auto b = st::ops::batch_norm_descriptor_dims({1000000, 16});
  BOOST_TEST((std::vector<int64_t>{b.n, b.c, b.h, b.w} == std::vector<int64_t>{1, 16, 1000000, 1}));
  const auto c = st::ops::batch_norm_descriptor_dims({4, 300, 8});
  BOOST_TEST((std::vector<int64_t>{c.n, c.c, c.h, c.w} == std::vector<int64_t>{1, 8, 1200, 1}));
  // The same count of values per channel as the tensor, whatever the layout.
  for (const st::Shape& s : {st::Shape{32, 7, 5, 64}, st::Shape{1000000, 16}, st::Shape{4, 300, 8}}) {
    const auto d = st::ops::batch_norm_descriptor_dims(s);
    int64_t numel = 1;
    for (int64_t v : s) numel *= v;
    BOOST_TEST(d.n * d.h * d.w * d.c == numel);
  }
}

BOOST_AUTO_TEST_SUITE_END()
