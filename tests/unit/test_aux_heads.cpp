// Auxiliary heads (nn/aux_head.hpp) and frozen parameters: every optimizer leaves a frozen
// parameter (and its state) as it was and updates the others exactly as with nothing frozen; a
// toy model with an auxiliary head has the gradient of main loss + w * head loss (central
// differences); weight 0 neither runs the head nor trains it, and evaluation runs the main head only.
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <functional>
#include <memory>
#include <vector>

#include "scaletrain/core/error.hpp"
#include "scaletrain/core/rng.hpp"
#include "scaletrain/models/model.hpp"
#include "scaletrain/nn/aux_head.hpp"
#include "scaletrain/nn/layers.hpp"
#include "scaletrain/ops/loss.hpp"
#include "scaletrain/optim/adam.hpp"
#include "scaletrain/optim/lars.hpp"
#include "scaletrain/optim/sgd.hpp"
#include "support/gradcheck.hpp"

using namespace scaletrain;
using scaletrain::test::random_vector;
using scaletrain::test::to_tensor;
using scaletrain::test::to_vector;

namespace {

// Three parameters "a", "b", "c" of 5, 7 and 3 values with gradients; "b" frozen when asked.
void fill_three(nn::ParameterSet& p, bool freeze_b) {
  p.add_parameter("a", {5});
  p.add_parameter("b", {7});
  p.add_parameter("c", {3});
  p.finalize();
  const auto w = random_vector(15, 41), g = random_vector(15, 42);
  for (int i = 0; i < 15; ++i) {
    p.flat_values().data<float>()[i] = static_cast<float>(w[i]);
    p.flat_grads().data<float>()[i] = static_cast<float>(g[i]);
  }
  p.set_frozen(1, freeze_b);
}

// Runs three steps of the optimizer made by `make` with "b" frozen and without, and checks that
// "b" kept its values and zero momentum, and that "a" and "c" equal the unfrozen run's bit for bit.
void check_frozen_kept(const std::function<std::unique_ptr<optim::Optimizer>(nn::ParameterSet&)>& make) {
  nn::ParameterSet frozen, free;
  fill_three(frozen, true);
  fill_three(free, false);
  const std::vector<double> b_before = to_vector(frozen.value(1));
  auto opt_frozen = make(frozen), opt_free = make(free);
  for (int s = 0; s < 3; ++s) {
    opt_frozen->step(test::cpu_context(), 0.05);
    opt_free->step(test::cpu_context(), 0.05);
  }
  BOOST_TEST(to_vector(frozen.value(1)) == b_before, boost::test_tools::per_element());
  BOOST_TEST(to_vector(opt_frozen->momentum_view(1)) == std::vector<double>(7, 0.0), boost::test_tools::per_element());
  BOOST_TEST(to_vector(frozen.value(0)) == to_vector(free.value(0)), boost::test_tools::per_element());
  BOOST_TEST(to_vector(frozen.value(2)) == to_vector(free.value(2)), boost::test_tools::per_element());
  BOOST_TEST(to_vector(free.value(1)) != b_before);  // the rule would have changed it
}

// conv (3x3, 2 -> 4) -> tap [head: global average pool -> fc (4 -> 3)] -> global average pool ->
// fc (4 -> 3): the smallest model with an auxiliary head, registered in torchvision's manner
// (the head's parameters after the trunk's).
std::unique_ptr<models::Model> toy_model(double weight) {
  auto model = std::make_unique<models::Model>("toy", 3, 2);
  nn::ParameterSet& ps = model->params();
  auto trunk = std::make_unique<nn::Sequential>();
  trunk->emplace<nn::Conv2d>(ps, "conv", 2, 4, 3, 1, 1);
  auto& tap = trunk->emplace<nn::AuxTap>(model->aux_heads(), ps);
  trunk->emplace<nn::GlobalAvgPool>();
  trunk->emplace<nn::Linear>(ps, "fc", 4, 3);
  const int first = ps.num_parameters();
  auto head = std::make_unique<nn::Sequential>();
  head->emplace<nn::GlobalAvgPool>();
  head->emplace<nn::Linear>(ps, "aux.fc", 4, 3);
  tap.set_head(std::move(head), first);
  model->set_network(std::move(trunk));
  model->set_aux_loss_weight(weight);
  model->initialize(7);
  return model;
}

// main loss + w * aux loss of one training forward, and (with backward) the gradients.
double total_loss(models::Model& m, const Tensor& x, const Tensor& labels, bool backward) {
  Context& ctx = test::cpu_context();
  Tensor logits = m.forward(ctx, x, true);
  Tensor dlogits = Tensor::empty(logits.shape());
  double loss = ops::softmax_cross_entropy(ctx, logits, labels, 0.0f, dlogits);
  std::vector<Tensor> aux = m.aux_logits(), daux;
  for (const Tensor& a : aux) {
    daux.push_back(Tensor::empty(a.shape()));
    loss += m.aux_loss_weight() * ops::softmax_cross_entropy(ctx, a, labels, 0.0f, daux.back(), m.aux_loss_weight());
  }
  if (backward) m.backward(ctx, dlogits, daux);
  return loss;
}

Tensor toy_labels() {
  Tensor labels = Tensor::empty({2}, DType::i32);
  labels.data<int32_t>()[0] = 2;
  labels.data<int32_t>()[1] = 0;
  return labels;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(aux_heads)

BOOST_AUTO_TEST_CASE(trained_ranges_merge_and_skip_frozen) {
  nn::ParameterSet p;
  fill_three(p, true);
  using R = std::vector<std::pair<int64_t, int64_t>>;
  BOOST_TEST((p.trained_ranges() == R{{0, 5}, {12, 15}}));
  p.set_frozen(1, false);
  BOOST_TEST((p.trained_ranges() == R{{0, 15}}));
  p.set_frozen(0, true);
  p.set_frozen(2, true);
  BOOST_TEST((p.trained_ranges() == R{{5, 12}}));
}

BOOST_AUTO_TEST_CASE(sgd_adam_and_lars_leave_frozen_parameters) {
  check_frozen_kept([](nn::ParameterSet& p) { return std::make_unique<optim::Sgd>(p, optim::SgdOptions{0.9, 0.1}); });
  check_frozen_kept([](nn::ParameterSet& p) { return std::make_unique<optim::Adam>(p, optim::AdamOptions{}); });
  check_frozen_kept([](nn::ParameterSet& p) {
    optim::LarsOptions o;
    o.weight_decay = 0.01;
    o.exclusion = optim::LarsExclusion::none;
    return std::make_unique<optim::Lars>(p, o);
  });
}

BOOST_AUTO_TEST_CASE(gradients_of_main_plus_weighted_aux_loss) {
  auto model = toy_model(0.3);
  BOOST_TEST(model->num_aux_heads() == 1);
  const Tensor x = to_tensor(random_vector(2 * 5 * 5 * 2, 43), {2, 5, 5, 2});
  const Tensor labels = toy_labels();
  total_loss(*model, x, labels, true);
  nn::ParameterSet& ps = model->params();
  BOOST_TEST(ps.parameter_info(3).name == "aux.fc.weight");
  std::vector<double> analytic, numeric;
  for (int i : {0, 1, 3}) {  // conv.weight (both heads' paths), fc.weight, aux.fc.weight
    const std::vector<double> g = to_vector(ps.grad(i));
    float* w = ps.value(i).data<float>();
    for (int64_t e = 0; e < ps.value(i).numel(); e += 3) {
      numeric.push_back(test::central_difference([&] { return total_loss(*model, x, labels, false); }, w + e, 1e-2f));
      analytic.push_back(g[e]);
    }
  }
  ST_CHECK_CLOSE_VECTORS(analytic, numeric, 1e-4, 2e-2);
}

BOOST_AUTO_TEST_CASE(weight_zero_freezes_the_head_and_evaluation_skips_it) {
  auto model = toy_model(0.0);
  const Tensor x = to_tensor(random_vector(2 * 5 * 5 * 2, 44), {2, 5, 5, 2});
  total_loss(*model, x, toy_labels(), true);
  BOOST_TEST(model->aux_logits().empty());
  nn::ParameterSet& ps = model->params();
  BOOST_TEST(ps.frozen(3));
  BOOST_TEST(ps.frozen(4));
  BOOST_TEST(!ps.frozen(0));
  BOOST_TEST(!ps.frozen(2));
  BOOST_TEST(to_vector(ps.grad(3)) == std::vector<double>(12, 0.0), boost::test_tools::per_element());
  // Switched on, it trains and runs in training only.
  model->set_aux_loss_weight(0.3);
  BOOST_TEST(!ps.frozen(3));
  model->forward(test::cpu_context(), x, /*training=*/false);
  BOOST_TEST(model->aux_logits().empty());
  model->forward(test::cpu_context(), x, /*training=*/true);
  BOOST_TEST(model->aux_logits().size() == 1u);
}

BOOST_AUTO_TEST_CASE(refusals_name_the_option) {
  auto model = toy_model(0.3);
  BOOST_CHECK_EXCEPTION(model->set_aux_loss_weight(-1.0), Error, [](const Error& e) {
    return std::string(e.what()).find("--aux-loss-weight") != std::string::npos;
  });
  auto plain = models::make_model("resnet20", 10, 3);
  BOOST_TEST(plain->num_aux_heads() == 0);
  BOOST_CHECK_EXCEPTION(plain->set_aux_loss_weight(0.4), Error, [](const Error& e) {
    return std::string(e.what()).find("no auxiliary heads") != std::string::npos;
  });
  // Backward must get one gradient per head that ran.
  const Tensor x = to_tensor(random_vector(2 * 5 * 5 * 2, 45), {2, 5, 5, 2});
  Tensor logits = model->forward(test::cpu_context(), x, true);
  BOOST_CHECK_THROW(model->backward(test::cpu_context(), Tensor::zeros(logits.shape())), Error);
}

BOOST_AUTO_TEST_SUITE_END()
