// Adam: the first step by hand (exact where every quantity is a binary fraction: the bias
// correction makes it lr * g / (|g| + eps)), a second step by hand, several steps on a small
// ParameterSet against a float64 loop written from the rule in adam.hpp, the state a checkpoint
// needs (both moments and the step count) resuming bit for bit, and the option checks. LazyAdam:
// a lookup-only table's untouched rows (all-zero gradient) keep weights and moments while the
// rest follows the float64 rule, and without lookup-only parameters it is Adam bit for bit.
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "scaletrain/core/error.hpp"
#include "scaletrain/nn/parameters.hpp"
#include "scaletrain/optim/adam.hpp"
#include "support/gradcheck.hpp"

using scaletrain::nn::ParameterSet;
using scaletrain::optim::Adam;
using scaletrain::optim::AdamOptions;
using scaletrain::optim::LazyAdam;

namespace {

// One parameter "w" of n weights, all `value`.
ParameterSet vector_params(int64_t n, float value) {
  ParameterSet p;
  p.add_parameter("w", {n});
  p.finalize();
  p.value(0).fill(value);
  return p;
}

void set_grads(ParameterSet& p, const std::vector<double>& g) {
  float* dst = p.flat_grads().data<float>();
  for (std::size_t i = 0; i < g.size(); ++i) dst[i] = static_cast<float>(g[i]);
}

std::vector<double> values(ParameterSet& p) { return scaletrain::test::to_vector(p.flat_values()); }

// A float64 reference of the rule, for every element at once.
struct ReferenceAdam {
  AdamOptions o;
  std::vector<double> m, v;
  int t = 0;
  void step(std::vector<double>& w, const std::vector<double>& g, double lr) {
    if (m.empty()) m.assign(w.size(), 0.0), v.assign(w.size(), 0.0);
    ++t;
    const double bc1 = 1 - std::pow(o.beta1, t), bc2 = 1 - std::pow(o.beta2, t);
    for (std::size_t i = 0; i < w.size(); ++i) {
      m[i] = o.beta1 * m[i] + (1 - o.beta1) * g[i];
      v[i] = o.beta2 * v[i] + (1 - o.beta2) * g[i] * g[i];
      w[i] -= lr / bc1 * m[i] / (std::sqrt(v[i]) / std::sqrt(bc2) + o.epsilon);
    }
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(adam)

// beta1 1/2, beta2 3/4, lr 1/8, g = (1/2, -1/2, 0):
//   m = g/2 = (1/4, -1/4, 0); v = g^2/4 = (1/16, 1/16, 0); bias corrections 1/2 and sqrt(1/4) = 1/2;
//   update = (lr / (1/2)) * m / (sqrt(v) / (1/2) + eps) = lr * g / (|g| + eps) = (1/8, -1/8, 0)
//   (eps 1e-8 is below half an ulp of 1/2), so w = (7/8, 9/8, 1) exactly.
//   Step 2, same g: m = (3/8, ..); v = 7/64; corrections 3/4 and sqrt(7/16);
//   sqrt(v / (7/16)) = 1/2, so update = (1/8 / (3/4)) * (3/8) / (1/2) = 1/8: w = (3/4, 5/4, 1).
BOOST_AUTO_TEST_CASE(first_steps_by_hand) {
  ParameterSet p = vector_params(3, 1.0f);
  Adam opt(p, AdamOptions{0.5, 0.75, 1e-8});
  set_grads(p, {0.5, -0.5, 0.0});
  opt.step(scaletrain::test::cpu_context(), 0.125);
  BOOST_TEST(values(p) == (std::vector<double>{0.875, 1.125, 1.0}));
  BOOST_TEST(scaletrain::test::to_vector(opt.momentum_buffer()) == (std::vector<double>{0.25, -0.25, 0.0}));
  BOOST_TEST(scaletrain::test::to_vector(opt.second_moment_buffer()) == (std::vector<double>{0.0625, 0.0625, 0.0}));
  BOOST_TEST(opt.steps() == 1);
  opt.step(scaletrain::test::cpu_context(), 0.125);
  BOOST_TEST(values(p) == (std::vector<double>{0.75, 1.25, 1.0}), boost::test_tools::tolerance(1e-7)
                                                                      << boost::test_tools::per_element());
  BOOST_TEST(scaletrain::test::to_vector(opt.second_moment_buffer())[0] == 7.0 / 64);
}

// With the MLPerf NCF defaults and with NVIDIA's large-batch betas, the first step is
// lr * g / (|g| + eps) ~ lr * sign(g) whatever the gradient's magnitude.
BOOST_AUTO_TEST_CASE(first_step_is_lr_times_sign) {
  const std::vector<double> g = {3.0, -1e-3, 0.25, -40.0, 0.0};
  for (const AdamOptions& o : {AdamOptions{}, scaletrain::optim::ncf_large_batch_adam_options()}) {
    BOOST_TEST_CONTEXT("betas " << o.beta1 << ", " << o.beta2) {
      ParameterSet p = vector_params(5, 0.0f);
      Adam opt(p, o);
      set_grads(p, g);
      opt.step(scaletrain::test::cpu_context(), scaletrain::optim::kNcfReferenceLr);
      const auto w = values(p);
      for (std::size_t i = 0; i < g.size(); ++i) {
        const double want = -scaletrain::optim::kNcfReferenceLr * g[i] / (std::fabs(g[i]) + o.epsilon);
        BOOST_TEST(w[i] == want, boost::test_tools::tolerance(1e-5));
      }
      BOOST_TEST(w[4] == 0.0);  // a zero gradient moves nothing (epsilon > 0)
    }
  }
}

BOOST_AUTO_TEST_CASE(several_steps_match_float64_reference) {
  ParameterSet p;
  p.add_parameter("a", {7, 3});
  p.add_parameter("b", {5});
  p.finalize();
  const std::size_t n = 26;
  std::vector<double> w = scaletrain::test::random_vector(n, 1);
  for (auto& x : w) x = static_cast<float>(x);
  float* pw = p.flat_values().data<float>();
  for (std::size_t i = 0; i < n; ++i) pw[i] = static_cast<float>(w[i]);
  for (const AdamOptions& o : {AdamOptions{}, scaletrain::optim::ncf_large_batch_adam_options()}) {
    ParameterSet q;
    q.add_parameter("a", {7, 3});
    q.add_parameter("b", {5});
    q.finalize();
    q.flat_values().copy_from(p.flat_values());
    std::vector<double> want = w;
    Adam opt(q, o);
    ReferenceAdam ref;
    ref.o = o;
    for (int s = 0; s < 6; ++s) {
      auto g = scaletrain::test::random_vector(n, 100 + s, -2.0, 2.0);
      for (auto& x : g) x = static_cast<float>(x);
      set_grads(q, g);
      const double lr = 0.01 * (s + 1);
      opt.step(scaletrain::test::cpu_context(), lr);
      ref.step(want, g, lr);
    }
    ST_CHECK_CLOSE_VECTORS(values(q), want, 1e-6, 1e-5);
    ST_CHECK_CLOSE_VECTORS(scaletrain::test::to_vector(opt.second_moment_buffer()), ref.v, 1e-9, 1e-5);
    ST_CHECK_CLOSE_VECTORS(scaletrain::test::to_vector(opt.momentum_buffer()), ref.m, 1e-7, 1e-5);
  }
}

// What a checkpoint must carry: the weights, m (momentum_view), v (second_moment_view) and the
// step count. A fresh optimizer given those continues bit for bit like the original.
BOOST_AUTO_TEST_CASE(restored_state_resumes_bit_for_bit) {
  auto make = [] {
    ParameterSet p;
    p.add_parameter("a", {4, 3});
    p.add_parameter("b", {3});
    p.finalize();
    return p;
  };
  ParameterSet p = make(), q = make();
  p.flat_values().copy_from(scaletrain::test::to_tensor(scaletrain::test::random_vector(15, 7), {15}));
  Adam original(p, AdamOptions{});
  auto grads = [](int s) { return scaletrain::test::random_vector(15, 50 + s); };
  for (int s = 0; s < 3; ++s) {
    set_grads(p, grads(s));
    original.step(scaletrain::test::cpu_context(), 0.001);
  }
  q.flat_values().copy_from(p.flat_values());
  Adam resumed(q, AdamOptions{});
  for (int i = 0; i < q.num_parameters(); ++i) {
    scaletrain::Tensor m = resumed.momentum_view(i), v = resumed.second_moment_view(i);
    m.copy_from(original.momentum_view(i));
    v.copy_from(original.second_moment_view(i));
  }
  resumed.restore_steps(original.steps());
  for (int s = 3; s < 5; ++s) {
    set_grads(p, grads(s));
    set_grads(q, grads(s));
    original.step(scaletrain::test::cpu_context(), 0.001);
    resumed.step(scaletrain::test::cpu_context(), 0.001);
  }
  BOOST_TEST(values(q) == values(p));
  BOOST_TEST(resumed.steps() == 5);
  BOOST_TEST(scaletrain::test::to_vector(resumed.second_moment_view(1)) ==
             scaletrain::test::to_vector(original.second_moment_view(1)));
  BOOST_CHECK_THROW(resumed.restore_steps(-1), scaletrain::Error);
}

BOOST_AUTO_TEST_CASE(describe_and_option_checks) {
  ParameterSet p = vector_params(2, 0.0f);
  Adam opt(p, scaletrain::optim::ncf_large_batch_adam_options());
  const scaletrain::Json d = opt.describe();
  BOOST_TEST(d.at("name").as_string() == "adam");
  BOOST_TEST(d.at("beta1").as_double() == 0.25);
  BOOST_TEST(d.at("beta2").as_double() == 0.5);
  BOOST_TEST(d.at("epsilon").as_double() == 1e-8);
  BOOST_CHECK_THROW(Adam(p, AdamOptions{1.0, 0.999, 1e-8}), scaletrain::Error);
  BOOST_CHECK_THROW(Adam(p, AdamOptions{0.9, -0.1, 1e-8}), scaletrain::Error);
  BOOST_CHECK_THROW(Adam(p, AdamOptions{0.9, 0.999, 0.0}), scaletrain::Error);
  BOOST_CHECK_THROW(opt.step(scaletrain::test::cpu_context(), std::nan("")), scaletrain::Error);
  try {
    Adam bad(p, AdamOptions{0.9, 1.5, 1e-8});
    BOOST_FAIL("no error");
  } catch (const scaletrain::Error& e) {
    BOOST_TEST(std::string(e.what()).find("beta2 must be in [0, 1)") != std::string::npos, e.what());
  }
}

// A 6 x 4 lookup-only table and a dense 5-vector; in step s table row r is untouched (zero
// gradient) where (r + s) % 3 == 0, and row 5 in every step. The float64 reference skips exactly
// those rows and counts every step in the bias corrections; the dense vector's element 2 has a
// zero gradient too, and as a dense parameter it still moves on its momentum.
BOOST_AUTO_TEST_CASE(lazy_adam_updates_only_touched_rows) {
  ParameterSet q;
  const int table = q.add_parameter("table", {6, 4});
  q.add_parameter("bias", {5});
  q.set_lookup_only(table);
  q.finalize();
  const std::size_t n = 29, width = 4, table_elems = 24;
  std::vector<double> w = scaletrain::test::random_vector(n, 3);
  for (auto& x : w) x = static_cast<float>(x);
  float* pw = q.flat_values().data<float>();
  for (std::size_t i = 0; i < n; ++i) pw[i] = static_cast<float>(w[i]);
  const std::vector<double> w0 = w;
  const AdamOptions o{0.9, 0.98, 1e-9};
  LazyAdam opt(q, o);
  BOOST_TEST(std::string(opt.name()) == "lazy_adam");
  std::vector<double> m(n, 0.0), v(n, 0.0);
  for (int s = 1; s <= 5; ++s) {
    auto g = scaletrain::test::random_vector(n, 200 + s, -2.0, 2.0);
    for (auto& x : g) x = static_cast<float>(x);
    for (std::size_t r = 0; r < 6; ++r)
      if ((r + s) % 3 == 0 || r == 5)
        for (std::size_t j = 0; j < width; ++j) g[r * width + j] = 0.0;
    g[table_elems + 2] = 0.0;
    set_grads(q, g);
    const double lr = 0.01 * s, bc1 = 1 - std::pow(o.beta1, s), bc2 = 1 - std::pow(o.beta2, s);
    opt.step(scaletrain::test::cpu_context(), lr);
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t r = i / width;
      if (i < table_elems && ((r + s) % 3 == 0 || r == 5)) continue;
      m[i] = o.beta1 * m[i] + (1 - o.beta1) * g[i];
      v[i] = o.beta2 * v[i] + (1 - o.beta2) * g[i] * g[i];
      w[i] -= lr / bc1 * m[i] / (std::sqrt(v[i]) / std::sqrt(bc2) + o.epsilon);
    }
  }
  ST_CHECK_CLOSE_VECTORS(values(q), w, 1e-6, 1e-5);
  ST_CHECK_CLOSE_VECTORS(scaletrain::test::to_vector(opt.momentum_buffer()), m, 1e-7, 1e-5);
  ST_CHECK_CLOSE_VECTORS(scaletrain::test::to_vector(opt.second_moment_buffer()), v, 1e-9, 1e-5);
  // The row no step touched: its weights bit for bit, its moments zero.
  for (std::size_t i = 5 * width; i < 6 * width; ++i) {
    BOOST_TEST(values(q)[i] == w0[i]);
    BOOST_TEST(opt.momentum_buffer().data<float>()[i] == 0.0f);
    BOOST_TEST(opt.second_moment_buffer().data<float>()[i] == 0.0f);
  }
  BOOST_TEST(opt.steps() == 5);
}

// No lookup-only parameter (the Transformer's case): LazyAdam's steps are Adam's, bit for bit,
// zero gradient rows included.
BOOST_AUTO_TEST_CASE(lazy_adam_without_lookup_tables_is_adam) {
  auto make = [] {
    ParameterSet p;
    p.add_parameter("table", {6, 4});
    p.add_parameter("bias", {5});
    p.finalize();
    const auto w = scaletrain::test::random_vector(29, 5);
    for (std::size_t i = 0; i < w.size(); ++i) p.flat_values().data<float>()[i] = static_cast<float>(w[i]);
    return p;
  };
  ParameterSet a = make(), b = make();
  Adam adam(a, AdamOptions{});
  LazyAdam lazy(b, AdamOptions{});
  for (int s = 0; s < 4; ++s) {
    auto g = scaletrain::test::random_vector(29, 300 + s);
    for (std::size_t j = 4; j < 8; ++j) g[j] = 0.0;  // row 1 untouched
    set_grads(a, g);
    set_grads(b, g);
    adam.step(scaletrain::test::cpu_context(), 0.01);
    lazy.step(scaletrain::test::cpu_context(), 0.01);
  }
  BOOST_TEST(values(a) == values(b), boost::test_tools::per_element());
  BOOST_TEST(scaletrain::test::to_vector(adam.second_moment_buffer()) ==
                 scaletrain::test::to_vector(lazy.second_moment_buffer()),
             boost::test_tools::per_element());
}

// Only a 2-D table can be lookup-only.
BOOST_AUTO_TEST_CASE(lookup_only_needs_a_table) {
  ParameterSet p;
  const int bias = p.add_parameter("bias", {5});
  try {
    p.set_lookup_only(bias);
    BOOST_FAIL("set_lookup_only accepted a 1-D parameter");
  } catch (const scaletrain::Error& e) {
    BOOST_TEST(std::string(e.what()).find("bias is not a table") != std::string::npos, e.what());
  }
}

BOOST_AUTO_TEST_SUITE_END()
