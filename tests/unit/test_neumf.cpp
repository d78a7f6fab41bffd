// NeuMF checks: the MLPerf NCF reference's state_dict names, shapes and order; the parameter
// count against its formula (and that formula against a hand count); a whole-model gradient check
// by central differences on a tiny instance, every parameter element; the grad-ready contract
// (each gradient overwritten, complete when announced, announced once, in reverse registration
// order); the reference's seeded initialisation; clear errors for bad sizes and ids.
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "scaletrain/backend/context.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/core/rng.hpp"
#include "scaletrain/models/neumf.hpp"
#include "support/gradcheck.hpp"

using scaletrain::test::error_of;

using namespace scaletrain;
using scaletrain::models::NeuMF;
using scaletrain::test::random_vector;
using scaletrain::test::to_tensor;
using scaletrain::test::to_vector;

namespace {

Tensor ids(const std::vector<int32_t>& v) {
  Tensor t = Tensor::empty({static_cast<int64_t>(v.size())}, DType::i32);
  std::copy(v.begin(), v.end(), t.data<int32_t>());
  return t;
}

double weighted_sum(const Tensor& y, const std::vector<double>& r) {
  const float* p = y.data<float>();
  double s = 0.0;
  for (std::size_t i = 0; i < r.size(); ++i) s += p[i] * r[i];
  return s;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(neumf)

BOOST_AUTO_TEST_CASE(layout_matches_the_reference_state_dict) {
  const int64_t users = 7, items = 11;
  NeuMF m(users, items);  // the reference run's sizes: mf_dim 64, MLP 256-256-128-64
  const nn::ParameterSet& ps = m.params();
  const std::vector<std::pair<std::string, Shape>> want = {{"mf_user_embed.weight", {users, 64}},
                                                           {"mf_item_embed.weight", {items, 64}},
                                                           {"mlp_user_embed.weight", {users, 128}},
                                                           {"mlp_item_embed.weight", {items, 128}},
                                                           {"mlp.0.weight", {256, 256}},
                                                           {"mlp.0.bias", {256}},
                                                           {"mlp.1.weight", {128, 256}},
                                                           {"mlp.1.bias", {128}},
                                                           {"mlp.2.weight", {64, 128}},
                                                           {"mlp.2.bias", {64}},
                                                           {"final.weight", {1, 128}},
                                                           {"final.bias", {1}}};
  BOOST_REQUIRE_EQUAL(ps.num_parameters(), static_cast<int>(want.size()));
  BOOST_TEST(ps.num_buffers() == 0);
  for (std::size_t i = 0; i < want.size(); ++i) {
    BOOST_TEST(ps.parameter_info(static_cast<int>(i)).name == want[i].first);
    BOOST_TEST(ps.parameter_info(static_cast<int>(i)).shape == want[i].second, want[i].first);
  }
  // Counted by hand: embeddings (7 + 11) * (64 + 128); MLP 256*256 + 256, 256*128 + 128,
  // 128*64 + 64; final 128 + 1.
  const int64_t by_hand = 18 * 192 + 65792 + 32896 + 8256 + 129;
  BOOST_TEST(ps.parameter_count() == by_hand);
  BOOST_TEST(NeuMF::parameter_count(users, items, 64, {256, 256, 128, 64}) == by_hand);
  // MovieLens-20M (the reference's data set): 138,493 users, 26,744 items.
  BOOST_TEST(NeuMF::parameter_count(138493, 26744, 64, {256, 256, 128, 64}) == 31832577);

  NeuMF small(3, 4, 5, {6, 4});
  BOOST_TEST(small.params().num_parameters() == 8);
  BOOST_TEST(small.params().parameter_info(4).name == "mlp.0.weight");
  BOOST_TEST(small.params().parameter_info(4).shape == (Shape{4, 6}));
  BOOST_TEST(small.params().parameter_info(6).shape == (Shape{1, 9}));
  BOOST_TEST(small.params().parameter_count() == NeuMF::parameter_count(3, 4, 5, {6, 4}));
  BOOST_TEST(small.params().parameter_count() == 7 * (5 + 3) + (6 + 1) * 4 + 9 + 1);
}

BOOST_AUTO_TEST_CASE(bad_sizes_and_ids_are_clear_errors) {
  BOOST_TEST(error_of([] { NeuMF(3, 4, 8, {7, 4}); }).find("even") != std::string::npos);
  BOOST_TEST(error_of([] { NeuMF(3, 4, 8, {8}); }).find("at least two") != std::string::npos);
  BOOST_TEST(error_of([] { NeuMF(0, 4); }).find("at least one user") != std::string::npos);
  NeuMF m(3, 4, 2, {4, 2});
  Context ctx;
  BOOST_TEST(error_of([&] { m.forward(ctx, ids({0, 3}), ids({0, 1})); }).find("3") != std::string::npos);
  BOOST_TEST(!error_of([&] { m.forward(ctx, ids({0, 1}), ids({0})); }).empty());
  BOOST_TEST(!error_of([&] { m.forward(ctx, Tensor::zeros({2}), ids({0, 1})); }).empty());
  NeuMF fresh(3, 4, 2, {4, 2});
  BOOST_TEST(error_of([&] { fresh.backward(ctx, Tensor::zeros({2})); }).find("before forward") != std::string::npos);
}

// Every parameter element of a tiny NeuMF against central differences of the fp32 forward. For
// any one parameter the logit is piecewise linear (each embedding row enters linearly, the rest
// is linear layers and ReLUs), so the difference is exact up to fp32 rounding except where a ReLU
// changes sign inside the step.
BOOST_AUTO_TEST_CASE(gradient_check_every_parameter) {
  const int64_t users = 5, items = 6;
  NeuMF m(users, items, 3, {8, 6, 4});
  nn::ParameterSet& ps = m.params();
  const auto values = random_vector(static_cast<std::size_t>(ps.parameter_count()), 41, -0.5, 0.5);
  for (int64_t i = 0; i < ps.parameter_count(); ++i) ps.flat_values().data<float>()[i] = static_cast<float>(values[i]);
  // Repeated users and items (their gradients sum); user 4 and item 5 absent (zero gradient).
  const Tensor u = ids({0, 1, 2, 0, 3, 1, 0}), it = ids({2, 0, 1, 2, 4, 3, 0});
  const auto r = random_vector(7, 42);
  Context ctx;
  auto loss = [&]() { return weighted_sum(m.forward(ctx, u, it), r); };

  Tensor logits = m.forward(ctx, u, it);
  BOOST_TEST(logits.shape() == (Shape{7}));
  ps.flat_grads().fill(123.0f);  // backward must overwrite, not accumulate
  m.backward(ctx, to_tensor(r, {7}));
  const std::vector<double> grads = to_vector(ps.flat_grads());

  // A ReLU that changes sign within the step spoils one step's difference; an element passes if
  // the difference at h or at h / 4 agrees (fp32 rounding of the logits: ~1e-7 / (2 h)).
  auto numeric_gradient = [&](float* p, float h) {
    const float saved = *p;
    *p = saved + h;
    const double fp = loss();
    *p = saved - h;
    const double fm = loss();
    *p = saved;
    return (fp - fm) / (2.0 * static_cast<double>(h));
  };
  const float h = 1e-3f;
  int second_tries = 0;
  std::string report;
  for (int64_t e = 0; e < ps.parameter_count(); ++e) {
    float* p = ps.flat_values().data<float>() + e;
    const double numeric = numeric_gradient(p, h);
    if (std::fabs(grads[e] - numeric) <= 2e-4 + 1e-3 * std::fabs(numeric)) continue;
    ++second_tries;
    const double closer = numeric_gradient(p, h / 4);
    if (std::fabs(grads[e] - closer) <= 8e-4 + 1e-3 * std::fabs(closer)) continue;
    std::ostringstream line;
    line << "element " << e << ": analytic " << grads[e] << ", numeric " << numeric << " (h), " << closer
         << " (h / 4)\n";
    report += line.str();
  }
  BOOST_TEST_MESSAGE("neumf gradient check: " << ps.parameter_count() << " elements, " << second_tries
                                              << " needed the smaller step");
  BOOST_TEST(report.empty(), report);
  // Rows no id names get exactly zero, in every table.
  auto row = [&](const std::string& name, int64_t r_index) {
    Tensor* g = nullptr;
    for (int i = 0; i < ps.num_parameters(); ++i)
      if (ps.parameter_info(i).name == name) g = &ps.grad(i);
    BOOST_TEST_REQUIRE(g != nullptr);
    const int64_t d = g->dim(1);
    const std::vector<double> all = to_vector(*g);
    return std::vector<double>(all.begin() + r_index * d, all.begin() + (r_index + 1) * d);
  };
  BOOST_TEST(row("mf_user_embed.weight", 4) == std::vector<double>(3, 0.0));
  BOOST_TEST(row("mlp_user_embed.weight", 4) == std::vector<double>(4, 0.0));
  BOOST_TEST(row("mf_item_embed.weight", 5) == std::vector<double>(3, 0.0));
  BOOST_TEST(row("mlp_item_embed.weight", 5) == std::vector<double>(4, 0.0));
  // The used rows do get a gradient.
  BOOST_TEST(row("mf_user_embed.weight", 0) != std::vector<double>(3, 0.0));
  BOOST_TEST(row("mlp_item_embed.weight", 2) != std::vector<double>(4, 0.0));
}

// The bucketed all-reduce's contract: each gradient complete when announced, announced exactly
// once, in reverse registration order (final.bias first, mf_user_embed.weight last); a smaller
// batch after a larger one (the epoch's last) reuses the buffers and still gets it right.
BOOST_AUTO_TEST_CASE(grad_ready_hooks_fire_once_in_reverse_order) {
  NeuMF m(9, 13, 4, {8, 8, 4});
  m.initialize(3);
  nn::ParameterSet& ps = m.params();
  const int np = ps.num_parameters();
  std::vector<int> order;
  std::vector<std::vector<double>> at_ready(np);
  ps.set_grad_ready_hook([&](int i) {
    order.push_back(i);
    at_ready[i] = to_vector(ps.grad(i));
  });
  Context ctx;
  for (int n : {16, 5}) {
    BOOST_TEST_CONTEXT("batch " << n) {
      std::vector<int32_t> u(n), it(n);
      Rng rng(static_cast<uint64_t>(n));
      for (int k = 0; k < n; ++k) {
        u[k] = static_cast<int32_t>(rng.below(9));
        it[k] = static_cast<int32_t>(rng.below(13));
      }
      order.clear();
      Tensor logits = m.forward(ctx, ids(u), ids(it));
      BOOST_TEST(logits.shape() == (Shape{n}));
      m.backward(ctx, to_tensor(random_vector(n, 7), {n, 1}));
      std::vector<int> want(np);
      for (int i = 0; i < np; ++i) want[i] = np - 1 - i;
      BOOST_TEST(order == want);
      for (int i = 0; i < np; ++i) BOOST_TEST(at_ready[i] == to_vector(ps.grad(i)), ps.parameter_info(i).name);
      // Same batch again: same logits and gradients (nothing accumulates).
      const std::vector<double> first_logits = to_vector(logits), first_grads = to_vector(ps.flat_grads());
      BOOST_TEST(to_vector(m.forward(ctx, ids(u), ids(it))) == first_logits);
      m.backward(ctx, to_tensor(random_vector(n, 7), {n}));
      BOOST_TEST(to_vector(ps.flat_grads()) == first_grads);
    }
  }
}

BOOST_AUTO_TEST_CASE(initialization_follows_the_reference) {
  const int64_t users = 300, items = 200;
  NeuMF a(users, items), b(users, items), c(users, items);
  a.initialize(11);
  b.initialize(11);
  c.initialize(12);
  BOOST_TEST(to_vector(a.params().flat_values()) == to_vector(b.params().flat_values()));
  BOOST_TEST(to_vector(a.params().flat_values()) != to_vector(c.params().flat_values()));
  nn::ParameterSet& ps = a.params();
  for (int i = 0; i < ps.num_parameters(); ++i) {
    const std::string& name = ps.parameter_info(i).name;
    const std::vector<double> v = to_vector(ps.value(i));
    double sum = 0, sq = 0, max_abs = 0;
    for (double x : v) {
      sum += x;
      sq += x * x;
      max_abs = std::max(max_abs, std::fabs(x));
    }
    const double mean = sum / v.size(), sd = std::sqrt(sq / v.size() - mean * mean);
    const Shape& s = ps.parameter_info(i).shape;
    BOOST_TEST_CONTEXT(name) {
      if (name.find("embed") != std::string::npos) {  // normal(0, 0.01)
        BOOST_TEST(std::fabs(mean) < 1e-3);
        BOOST_TEST(std::fabs(sd - 0.01) < 5e-4);
      } else {
        double limit;
        if (name.find(".bias") != std::string::npos) {
          const Shape& ws = ps.parameter_info(i - 1).shape;
          limit = 1.0 / std::sqrt(static_cast<double>(ws[1]));  // nn.Linear's default
        } else if (name == "final.weight") {
          limit = std::sqrt(3.0 / s[1]);  // lecun_uniform
        } else {
          limit = std::sqrt(6.0 / (s[0] + s[1]));  // glorot_uniform
        }
        BOOST_TEST(max_abs <= limit);
        if (v.size() >= 32) {                  // not final.bias (one value)
          BOOST_TEST(max_abs > 0.75 * limit);  // uses the range, not a narrower one
          BOOST_TEST(std::fabs(sd - limit / std::sqrt(3.0)) < 0.2 * limit / std::sqrt(3.0));
        }
      }
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
