// The Dropout layer in a network built as a Model builder builds one (GlobalAvgPool -> Linear ->
// Dropout -> Linear -> Dropout -> Linear, the Dropout layers on the model's random stream): the
// same position gives the same bits, also in another instance of the same seed (a resumed run);
// another step, micro-batch, rank or seed gives other masks; evaluation is the identity and runs
// no dropout op; the parameter gradients match central differences at a fixed position. And the
// position layout and the key derivation themselves.
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <memory>
#include <vector>

#include "scaletrain/core/error.hpp"
#include "scaletrain/models/model.hpp"
#include "scaletrain/nn/dropout.hpp"
#include "scaletrain/nn/layers.hpp"
#include "support/gradcheck.hpp"

using namespace scaletrain;
using scaletrain::test::check_throws;
using scaletrain::test::random_floats;
using scaletrain::test::to_tensor;
using scaletrain::test::to_vector;

namespace {

constexpr int kChannels = 5, kHidden = 64, kClasses = 7;
const Shape kInput{3, 2, 2, kChannels};

// Built as a model builder builds its network: the layers register into the model's
// ParameterSet, the Dropout layers take the model's stream, then set_network and initialize.
std::unique_ptr<models::Model> tiny_model(uint64_t seed, double p = 0.5) {
  auto model = std::make_unique<models::Model>("tiny-dropout", kClasses, kChannels);
  auto net = std::make_unique<nn::Sequential>();
  net->emplace<nn::GlobalAvgPool>();
  net->emplace<nn::Linear>(model->params(), "fc1", kChannels, kHidden);
  net->emplace<nn::Dropout>(model->random_stream(), p);
  net->emplace<nn::Linear>(model->params(), "fc2", kHidden, kHidden);
  net->emplace<nn::Dropout>(model->random_stream(), p);
  net->emplace<nn::Linear>(model->params(), "fc3", kHidden, kClasses);
  model->set_network(std::move(net));
  model->initialize(seed);
  return model;
}

Tensor input() { return to_tensor(random_floats(shape_numel(kInput), 11, 0.0, 2.0), kInput); }

std::vector<double> logits_at(models::Model& model, int64_t step, int micro, int rank, bool training = true) {
  Context& ctx = test::cpu_context();
  model.set_random_position(step, micro, rank);
  return to_vector(model.forward(ctx, input(), training));
}

// sum(logits * r) in double.
double loss_of(models::Model& model, const Tensor& x, const std::vector<double>& r) {
  const Tensor logits = model.forward(test::cpu_context(), x, true);
  double s = 0.0;
  for (std::size_t i = 0; i < r.size(); ++i) s += logits.data<float>()[i] * r[i];
  return s;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(dropout_layer)

BOOST_AUTO_TEST_CASE(position_layout) {
  BOOST_TEST(nn::random_position(0, 0, 0) == 0u);
  BOOST_TEST(nn::random_position(1, 0, 0) == (uint64_t{1} << 32));
  BOOST_TEST(nn::random_position(0, 1, 0) == (uint64_t{1} << 16));
  BOOST_TEST(nn::random_position(0, 0, 1) == 1u);
  BOOST_TEST(nn::random_position(5, 3, 9) == (uint64_t{5} << 32 | uint64_t{3} << 16 | 9u));
  BOOST_TEST(nn::random_position(0xFFFFFFFFll, 65535, 65535) == ~uint64_t{0});
  check_throws([] { nn::random_position(int64_t{1} << 32, 0, 0); }, {"global step 4294967296"});
  check_throws([] { nn::random_position(-1, 0, 0); }, {"global step -1"});
  check_throws([] { nn::random_position(0, 65536, 0); }, {"micro-batch 65536"});
  check_throws([] { nn::random_position(0, 0, 65536); }, {"rank 65536"});
  check_throws([] { nn::random_position(0, 0, -1); }, {"rank -1"});
}

// splitmix64's output number layer + 1 from seed ^ "dropout.", split into (low, high).
BOOST_AUTO_TEST_CASE(keys_from_seed_and_layer) {
  auto splitmix = [](uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  const uint64_t seed = 42;
  uint64_t state = seed ^ nn::kDropoutKeyDomain;
  for (int layer = 0; layer < 3; ++layer) {
    state += 0x9e3779b97f4a7c15ull;
    const uint64_t z = splitmix(state);
    const std::array<uint32_t, 2> key = nn::dropout_key(seed, layer);
    BOOST_TEST(key[0] == static_cast<uint32_t>(z));
    BOOST_TEST(key[1] == static_cast<uint32_t>(z >> 32));
  }
  BOOST_TEST((nn::dropout_key(seed, 0) != nn::dropout_key(seed, 1)));
  BOOST_TEST((nn::dropout_key(seed, 0) != nn::dropout_key(seed + 1, 0)));
}

BOOST_AUTO_TEST_CASE(layers_take_indices_in_construction_order) {
  auto stream = std::make_shared<nn::RandomStream>(3);
  nn::Dropout a(stream, 0.1), b(stream, 0.2);
  BOOST_TEST(a.layer_index() == 0);
  BOOST_TEST(b.layer_index() == 1);
  BOOST_TEST(stream->num_layers() == 2);
  check_throws([&] { nn::Dropout(stream, 1.0); }, {"Dropout: p must be in [0, 1), got 1"});
  check_throws([] { nn::Dropout(nullptr, 0.5); }, {"no random stream"});
}

// The same (seed, position) gives the same bits, in this model and in a new one of the same seed
// (what a resumed run builds); any other step, micro-batch, rank or seed gives other logits.
BOOST_AUTO_TEST_CASE(masks_follow_the_position) {
  const auto model = tiny_model(7);
  const std::vector<double> base = logits_at(*model, 12, 1, 3);
  logits_at(*model, 13, 0, 0);  // something else in between
  BOOST_TEST(logits_at(*model, 12, 1, 3) == base);
  const auto resumed = tiny_model(7);
  BOOST_TEST(logits_at(*resumed, 12, 1, 3) == base);
  BOOST_TEST(logits_at(*model, 13, 1, 3) != base);
  BOOST_TEST(logits_at(*model, 12, 0, 3) != base);
  BOOST_TEST(logits_at(*model, 12, 1, 2) != base);
  // Another seed: other weights, so compare the masks: the first Dropout's keys differ.
  BOOST_TEST(model->random_stream()->seed() == 7u);
  BOOST_TEST(tiny_model(8)->random_stream()->seed() == 8u);
  check_throws([&] { model->set_random_position(0, 0, 65536); }, {"rank 65536"});
}

// Evaluation runs no dropout: the layer returns its input, the model's logits do not depend on
// the position, and its op list has the dropout ops in training only.
BOOST_AUTO_TEST_CASE(evaluation_is_the_identity) {
  const auto model = tiny_model(7);
  const std::vector<double> a = logits_at(*model, 12, 1, 3, false), b = logits_at(*model, 40, 0, 0, false);
  BOOST_TEST(a == b);
  BOOST_TEST(logits_at(*model, 12, 1, 3, true) != a);
  const auto plain = tiny_model(7, 0.0);  // p = 0 in training: the same network without dropout
  BOOST_TEST(logits_at(*plain, 12, 1, 3, true) == a);
  BOOST_TEST(model->ops(false).count("dropout_forward") == 0u);
  BOOST_TEST(model->ops(true).count("dropout_forward") == 1u);
  BOOST_TEST(model->ops(true).count("dropout_backward") == 1u);

  auto stream = std::make_shared<nn::RandomStream>(1);
  nn::Dropout layer(stream, 0.5);
  Context& ctx = test::cpu_context();
  const Tensor x = input();
  const Tensor y = layer.forward(ctx, x, false);
  BOOST_TEST(y.raw() == x.raw());
  BOOST_TEST(layer.backward(ctx, x).raw() == x.raw());
}

// The layer's mask is the op's at (key of its index, the stream's position), kept and scaled.
BOOST_AUTO_TEST_CASE(layer_applies_the_op_mask) {
  auto stream = std::make_shared<nn::RandomStream>(99);
  nn::Dropout first(stream, 0.3), second(stream, 0.3);
  stream->set_position(4, 2, 1);
  Context& ctx = test::cpu_context();
  const Shape s{37, 11};
  const Tensor x = to_tensor(random_floats(shape_numel(s), 5), s);
  const std::vector<double> y = to_vector(second.forward(ctx, x, true));
  ops::DropoutParams params;
  params.p = 0.3;
  const std::array<uint32_t, 2> key = nn::dropout_key(99, 1);
  params.key[0] = key[0];
  params.key[1] = key[1];
  params.position = nn::random_position(4, 2, 1);
  Tensor want = test::nan_tensor(s);
  ops::dropout_forward(ctx, params, x, want);
  BOOST_TEST(y == to_vector(want));
  // The backward uses the forward's position even when the stream has moved on since.
  stream->set_position(5, 0, 0);
  const Tensor dy = to_tensor(random_floats(shape_numel(s), 6), s);
  Tensor want_dx = test::nan_tensor(s);
  ops::dropout_backward(ctx, params, dy, want_dx);
  BOOST_TEST(to_vector(second.backward(ctx, dy)) == to_vector(want_dx));
}

// Backward at a fixed position against central differences of sum(logits * r): the mask is fixed,
// so the network is smooth in its weights.
BOOST_AUTO_TEST_CASE(gradients_match_finite_differences) {
  const auto model = tiny_model(7);
  model->set_random_position(3, 0, 1);
  Context& ctx = test::cpu_context();
  const Tensor x = input();
  const std::vector<double> r = random_floats(static_cast<std::size_t>(kInput[0] * kClasses), 21);
  model->forward(ctx, x, true);
  model->backward(ctx, to_tensor(r, {kInput[0], kClasses}));
  nn::ParameterSet& params = model->params();
  int checked = 0;
  for (int i = 0; i < params.num_parameters(); ++i) {
    const std::vector<double> grad = to_vector(params.grad(i));
    Tensor& w = params.value(i);
    for (int64_t e = 0; e < w.numel(); e += 37) {
      float* p = w.data<float>() + e;
      const float saved = *p, h = 1e-2f;
      *p = saved + h;
      const double up = loss_of(*model, x, r);
      *p = saved - h;
      const double down = loss_of(*model, x, r);
      *p = saved;
      const double fd = (up - down) / (2.0 * h);
      BOOST_TEST(std::fabs(fd - grad[e]) <= 1e-3 + 1e-2 * std::fabs(grad[e]), params.parameter_info(i).name
                                                                                  << "[" << e << "]: finite difference "
                                                                                  << fd << ", backward " << grad[e]);
      ++checked;
    }
  }
  BOOST_TEST(checked > 50);
}

// A model without Dropout layers ignores the position, whatever its range.
BOOST_AUTO_TEST_CASE(models_without_dropout_ignore_the_position) {
  const auto resnet = models::make_model("resnet20", 10, 3);
  resnet->set_random_position(int64_t{1} << 40, 70000, 70000);
  BOOST_TEST(resnet->random_stream()->num_layers() == 0);
}

BOOST_AUTO_TEST_SUITE_END()
