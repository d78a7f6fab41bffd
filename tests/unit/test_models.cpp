// Model checks: torchvision's parameter counts, names, shapes and state_dict order; forward
// shapes; ResNet-50 v1.5's stride placement; seeded initialisation; a whole-network gradient check
// of ResNet-20 against central finite differences (which fails if either residual branch loses
// its gradient); and the grad-ready contract the bucketed all-reduce relies on.
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
#include "scaletrain/models/model.hpp"
#include "scaletrain/models/resnet.hpp"
#include "support/gradcheck.hpp"

using scaletrain::test::error_of;

using namespace scaletrain;
using scaletrain::test::random_vector;
using scaletrain::test::to_tensor;
using scaletrain::test::to_vector;

namespace {

Shape shape_of(scaletrain::models::Model& m, const std::string& name) {
  Tensor* t = m.params().find(name);
  BOOST_TEST_REQUIRE(t != nullptr, "missing tensor " << name);
  return t->shape();
}

double weighted_sum(const Tensor& y, const std::vector<double>& r) {
  const float* p = y.data<float>();
  double s = 0.0;
  for (std::size_t i = 0; i < r.size(); ++i) s += p[i] * r[i];
  return s;
}

int index_of(nn::ParameterSet& ps, const std::string& name) {
  for (int i = 0; i < ps.num_parameters(); ++i)
    if (ps.parameter_info(i).name == name) return i;
  BOOST_FAIL("no parameter " << name);
  return -1;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(models)

BOOST_AUTO_TEST_CASE(resnet50_matches_torchvision_layout) {
  auto m = scaletrain::models::make_model("resnet50", 1000, 3);
  BOOST_TEST(m->name() == "resnet50");
  BOOST_TEST(m->num_classes() == 1000);
  BOOST_TEST(m->params().parameter_count() == 25557032);
  BOOST_TEST(m->params().num_parameters() == 161);  // len(list(torchvision resnet50().parameters()))
  BOOST_TEST(m->params().num_buffers() == 2 * 53);  // 53 batch norms, num_batches_tracked not kept
  BOOST_TEST(shape_of(*m, "conv1.weight") == (Shape{64, 3, 7, 7}));
  BOOST_TEST(shape_of(*m, "bn1.running_var") == (Shape{64}));
  BOOST_TEST(shape_of(*m, "layer1.0.conv1.weight") == (Shape{64, 64, 1, 1}));
  BOOST_TEST(shape_of(*m, "layer1.0.downsample.0.weight") == (Shape{256, 64, 1, 1}));
  BOOST_TEST(shape_of(*m, "layer1.0.downsample.1.running_mean") == (Shape{256}));
  BOOST_TEST(shape_of(*m, "layer2.0.conv2.weight") == (Shape{128, 128, 3, 3}));
  BOOST_TEST(shape_of(*m, "layer2.0.downsample.0.weight") == (Shape{512, 256, 1, 1}));
  BOOST_TEST(shape_of(*m, "layer3.5.conv3.weight") == (Shape{1024, 256, 1, 1}));
  BOOST_TEST(shape_of(*m, "layer4.2.bn3.weight") == (Shape{2048}));
  BOOST_TEST(shape_of(*m, "fc.weight") == (Shape{1000, 2048}));
  BOOST_TEST(shape_of(*m, "fc.bias") == (Shape{1000}));
  BOOST_TEST(m->params().find("layer2.1.downsample.0.weight") == nullptr);
  BOOST_TEST(m->params().find("layer4.3.conv1.weight") == nullptr);

  // --num-classes changes fc only; in_channels changes conv1 only.
  auto small = scaletrain::models::make_model("resnet50", 10, 1);
  BOOST_TEST(small->params().parameter_count() == 25557032 - 990 * 2048 - 990 - 2 * 64 * 7 * 7);
  BOOST_TEST(shape_of(*small, "conv1.weight") == (Shape{64, 1, 7, 7}));
}

BOOST_AUTO_TEST_CASE(resnet20_layout_and_state_dict_order) {
  auto m = scaletrain::models::make_model("resnet20", 10, 1);
  BOOST_TEST(m->params().parameter_count() == 272186);
  BOOST_TEST(m->in_channels() == 1);
  BOOST_TEST(shape_of(*m, "conv1.weight") == (Shape{16, 1, 3, 3}));
  BOOST_TEST(shape_of(*m, "layer1.2.conv2.weight") == (Shape{16, 16, 3, 3}));
  BOOST_TEST(shape_of(*m, "layer2.0.conv1.weight") == (Shape{32, 16, 3, 3}));
  BOOST_TEST(shape_of(*m, "layer2.0.downsample.0.weight") == (Shape{32, 16, 1, 1}));
  BOOST_TEST(shape_of(*m, "layer3.0.downsample.1.running_var") == (Shape{64}));
  BOOST_TEST(shape_of(*m, "fc.weight") == (Shape{10, 64}));
  BOOST_TEST(m->params().find("layer1.0.downsample.0.weight") == nullptr);
  BOOST_TEST(m->params().find("layer2.1.downsample.0.weight") == nullptr);

  const auto infos = scaletrain::models::state_dict_infos(m->params());
  BOOST_TEST(infos.size() == static_cast<std::size_t>(m->params().num_parameters() + m->params().num_buffers()));
  std::vector<std::string> names;
  for (const auto& i : infos) names.push_back(i.name);
  const std::vector<std::string> head = {"conv1.weight",       "bn1.weight",      "bn1.bias",
                                         "bn1.running_mean",   "bn1.running_var", "layer1.0.conv1.weight",
                                         "layer1.0.bn1.weight"};
  BOOST_TEST(std::vector<std::string>(names.begin(), names.begin() + head.size()) == head,
             boost::test_tools::per_element());
  const auto at = std::find(names.begin(), names.end(), "layer2.0.bn2.running_var");
  BOOST_TEST_REQUIRE((at != names.end() && at + 7 < names.end()));
  const std::vector<std::string> downsample = {
      "layer2.0.downsample.0.weight",       "layer2.0.downsample.1.weight",      "layer2.0.downsample.1.bias",
      "layer2.0.downsample.1.running_mean", "layer2.0.downsample.1.running_var", "layer2.1.conv1.weight"};
  BOOST_TEST(std::vector<std::string>(at + 1, at + 7) == downsample, boost::test_tools::per_element());
  BOOST_TEST(names[names.size() - 2] == "fc.weight");
  BOOST_TEST(names.back() == "fc.bias");

  const std::string json = scaletrain::models::describe_model(*m, {1, 28, 28}).dump();
  BOOST_TEST(json.find("\"model\": \"resnet20\"") != std::string::npos, json.substr(0, 200));
  BOOST_TEST(json.find("\"parameters\": 272186") != std::string::npos);
  BOOST_TEST(json.find("\"input_shape\": [1, 28, 28]") != std::string::npos);
  BOOST_TEST(json.find("{\"name\": \"layer2.0.downsample.0.weight\", \"shape\": [32, 16, 1, 1], \"kind\": "
                       "\"parameter\"}") != std::string::npos);
  BOOST_TEST(json.find("{\"name\": \"bn1.running_mean\", \"shape\": [16], \"kind\": \"buffer\"}") != std::string::npos);
  BOOST_CHECK_THROW(scaletrain::models::describe_model(*m, {3, 28, 28}), Error);
}

BOOST_AUTO_TEST_CASE(unknown_model_and_bad_input_are_clear_errors) {
  const std::string msg = error_of([] { scaletrain::models::make_model("resnet18", 10, 3); });
  BOOST_TEST(msg.find("unknown model 'resnet18' (known: resnet20, resnet50, alexnet, googlenet, inception_v3, "
                      "alexnet-caffe, googlenet-caffe, ncf, transformer, transformer-base, transformer-tiny)") !=
                 std::string::npos,
             msg);
  BOOST_TEST(
      scaletrain::models::model_names() ==
          (std::vector<std::string>{"resnet20", "resnet50", "alexnet", "googlenet", "inception_v3", "alexnet-caffe",
                                    "googlenet-caffe", "ncf", "transformer", "transformer-base", "transformer-tiny"}),
      boost::test_tools::per_element());
  // ncf is a model of another task: make_model builds image classifiers only.
  const std::string not_image = error_of([] { scaletrain::models::make_model("ncf", 10, 3); });
  BOOST_TEST(not_image.find("model ncf is not an image classifier (its task is recommendation)") != std::string::npos,
             not_image);
  BOOST_CHECK_THROW(scaletrain::models::make_model("resnet20", 0, 1), Error);

  auto m = scaletrain::models::make_model("resnet20", 10, 1);
  m->initialize(1);
  Context ctx;
  const std::string bad = error_of([&] { m->forward(ctx, Tensor::zeros({2, 28, 28, 3}), false); });
  BOOST_TEST(bad.find("expects images (N, H, W, C=1)") != std::string::npos, bad);
  BOOST_CHECK_THROW(m->backward(ctx, Tensor::zeros({2, 10})), Error);  // no forward yet
}

BOOST_AUTO_TEST_CASE(forward_shapes) {
  Context ctx;
  auto r20 = scaletrain::models::make_model("resnet20", 10, 1);
  r20->initialize(3);
  const auto x = random_vector(3 * 28 * 28, 1);
  Tensor y = r20->forward(ctx, to_tensor(x, {3, 28, 28, 1}), true);
  BOOST_TEST(y.shape() == (Shape{3, 10}));
  y = r20->forward(ctx, to_tensor(x, {3, 28, 28, 1}), false);
  BOOST_TEST(y.shape() == (Shape{3, 10}));
  for (double v : to_vector(y)) BOOST_TEST(std::isfinite(v));

  auto r50 = scaletrain::models::make_model("resnet50", 7, 3);
  r50->initialize(3);
  const auto x50 = random_vector(2 * 32 * 32 * 3, 2);
  Tensor y50 = r50->forward(ctx, to_tensor(x50, {2, 32, 32, 3}), true);
  BOOST_TEST(y50.shape() == (Shape{2, 7}));
  for (double v : to_vector(y50)) BOOST_TEST(std::isfinite(v));
}

// v1.5 puts the stride on the 3x3 conv2. With it on the 1x1 conv1 (v1), as on the 1x1 shortcut,
// the block would never look at odd rows/columns of its input; with v1.5 it does.
BOOST_AUTO_TEST_CASE(resnet50_downsampling_bottleneck_is_v1_5) {
  const int c = 64, hw = 6;
  nn::ParameterSet ps;
  scaletrain::models::Bottleneck block(ps, "layer2.0", c, 32, 2);
  ps.finalize();
  Rng rng(9);
  block.initialize(rng);
  BOOST_TEST(ps.find("layer2.0.conv2.weight")->shape() == (Shape{32, 32, 3, 3}));
  BOOST_TEST(ps.find("layer2.0.downsample.0.weight")->shape() == (Shape{128, 64, 1, 1}));
  Context ctx;
  auto x = random_vector(hw * hw * c, 4);
  const std::vector<double> y0 = to_vector(block.forward(ctx, to_tensor(x, {1, hw, hw, c}), false));
  BOOST_TEST(y0.size() == 3u * 3u * 128u);
  for (int ch = 0; ch < c; ++ch) x[(1 * hw + 1) * c + ch] += 1.0;  // pixel (1, 1): odd row and column
  const std::vector<double> y1 = to_vector(block.forward(ctx, to_tensor(x, {1, hw, hw, c}), false));
  double change = 0.0;
  for (std::size_t i = 0; i < y0.size(); ++i) change = std::max(change, std::fabs(y1[i] - y0[i]));
  BOOST_TEST(change > 1e-3, "the block ignores odd pixels: stride is not on conv2");
}

BOOST_AUTO_TEST_CASE(initialization_is_seeded_and_follows_torchvision) {
  auto a = scaletrain::models::make_model("resnet20", 10, 1);
  auto b = scaletrain::models::make_model("resnet20", 10, 1);
  a->initialize(42);
  b->initialize(42);
  BOOST_TEST(to_vector(a->params().flat_values()) == to_vector(b->params().flat_values()));
  b->initialize(43);
  BOOST_TEST((to_vector(a->params().flat_values()) != to_vector(b->params().flat_values())));

  // kaiming_normal_(fan_out, relu): std = sqrt(2 / (64 * 3 * 3)); 36,864 samples.
  const auto w = to_vector(*a->params().find("layer3.1.conv1.weight"));
  double mean = 0, sq = 0;
  for (double v : w) mean += v / w.size();
  for (double v : w) sq += (v - mean) * (v - mean) / w.size();
  BOOST_TEST(std::fabs(mean) < 0.003);
  BOOST_TEST(std::sqrt(sq) == std::sqrt(2.0 / (64 * 9)), boost::test_tools::tolerance(0.03));
  // Linear: uniform(-1/sqrt(64), 1/sqrt(64)) for weight and bias.
  for (const char* name : {"fc.weight", "fc.bias"}) {
    const auto v = to_vector(*a->params().find(name));
    const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    BOOST_TEST(*lo >= -0.125);
    BOOST_TEST(*hi <= 0.125);
    BOOST_TEST(*hi - *lo > 0.01);
  }
  BOOST_TEST(to_vector(*a->params().find("layer2.0.downsample.1.weight")) == std::vector<double>(32, 1.0));
  BOOST_TEST(to_vector(*a->params().find("layer2.0.downsample.1.bias")) == std::vector<double>(32, 0.0));
  BOOST_TEST(to_vector(*a->params().find("layer2.0.bn1.running_mean")) == std::vector<double>(32, 0.0));
  BOOST_TEST(to_vector(*a->params().find("layer2.0.bn1.running_var")) == std::vector<double>(32, 1.0));
}

// Whole-network gradient check: loss = sum(logits * R) accumulated in double, training mode
// (batch statistics), three elements of each of 19 parameter tensors spread over every kind of
// layer and both residual branches.
//
// Finite differences through 19 fp32 ReLU layers have two error sources: rounding (large for
// small steps) and ReLU kinks crossed by the step (large for big steps; with batch norm many
// units sit near zero). Each numeric derivative is therefore the median of central differences
// at five step sizes, errors are measured against the tensor's RMS gradient, and the check
// tolerates a few outliers: nearly all elements must agree to 5% and the median to 1%. A dropped
// or misrouted branch breaks most elements upstream of it by tens of percent.
BOOST_AUTO_TEST_CASE(resnet20_gradient_check) {
  const int n = 2, hw = 8, k = 3;
  auto m = scaletrain::models::make_model("resnet20", k, 1);
  m->initialize(7);
  nn::ParameterSet& ps = m->params();
  // Batch-norm affine parameters away from 1 and 0 so that their gradients are generic.
  Rng rng(8);
  for (int i = 0; i < ps.num_parameters(); ++i) {
    const std::string& name = ps.parameter_info(i).name;
    if (name.find("bn") == std::string::npos && name.find("downsample.1") == std::string::npos) continue;
    const bool is_weight = name.size() > 7 && name.compare(name.size() - 7, 7, ".weight") == 0;
    float* p = ps.value(i).data<float>();
    for (int64_t j = 0; j < ps.value(i).numel(); ++j)
      p[j] = static_cast<float>(is_weight ? rng.uniform(0.5, 1.5) : rng.uniform(-0.3, 0.3));
  }
  Context ctx;
  Tensor x = to_tensor(random_vector(n * hw * hw, 31, -2.0, 2.0), {n, hw, hw, 1});
  const auto r = random_vector(n * k, 32);
  auto loss = [&]() { return weighted_sum(m->forward(ctx, x, true), r); };

  m->forward(ctx, x, true);
  m->backward(ctx, to_tensor(r, {n, k}));
  const std::vector<double> grads = to_vector(ps.flat_grads());

  const std::vector<std::string> names = {"conv1.weight",
                                          "bn1.weight",
                                          "bn1.bias",
                                          "layer1.0.conv1.weight",
                                          "layer1.0.bn2.bias",
                                          "layer1.2.conv2.weight",
                                          "layer2.0.conv1.weight",
                                          "layer2.0.bn1.weight",
                                          "layer2.0.downsample.0.weight",
                                          "layer2.0.downsample.1.weight",
                                          "layer2.0.downsample.1.bias",
                                          "layer2.2.bn2.weight",
                                          "layer3.0.conv2.weight",
                                          "layer3.0.downsample.0.weight",
                                          "layer3.0.downsample.1.bias",
                                          "layer3.2.conv1.weight",
                                          "layer3.2.bn2.bias",
                                          "fc.weight",
                                          "fc.bias"};
  const float h = 2e-4f;
  std::vector<double> errors;
  std::string report;
  Rng pick(99);
  for (const auto& name : names) {
    const nn::TensorInfo& info = ps.parameter_info(index_of(ps, name));
    const int64_t numel = shape_numel(info.shape);
    double rms = 0;
    for (int64_t e = 0; e < numel; ++e) rms += grads[info.offset + e] * grads[info.offset + e] / numel;
    rms = std::sqrt(rms);
    BOOST_TEST(rms > 1e-4, name << " has no gradient");
    for (int s = 0; s < 3; ++s) {
      const int64_t e = static_cast<int64_t>(pick.below(numel));
      float* p = ps.flat_values().data<float>() + info.offset + e;
      const float saved = *p;
      std::vector<double> estimates;
      for (float step : {h / 4, h / 2, h, 2 * h, 4 * h}) {
        *p = saved + step;
        const double fp = loss();
        *p = saved - step;
        const double fm = loss();
        *p = saved;
        estimates.push_back((fp - fm) / (2.0 * static_cast<double>(step)));
      }
      std::nth_element(estimates.begin(), estimates.begin() + 2, estimates.end());
      const double numeric = estimates[2];
      const double analytic = grads[info.offset + e];
      errors.push_back(std::fabs(analytic - numeric) / rms);
      std::ostringstream line;
      line << name << "[" << e << "]: analytic " << analytic << ", numeric " << numeric << ", RMS " << rms << ", error "
           << errors.back() << "\n";
      report += line.str();
    }
  }
  std::vector<double> sorted = errors;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted[sorted.size() / 2];
  const auto within = std::count_if(errors.begin(), errors.end(), [](double e) { return e <= 0.05; });
  BOOST_TEST_MESSAGE("resnet20 gradient check: " << within << " of " << errors.size()
                                                 << " within 5% of the RMS gradient, median error " << median
                                                 << ", worst " << sorted.back());
  BOOST_TEST(within >= static_cast<long>(0.9 * errors.size()), report);
  BOOST_TEST(median <= 0.01, report);
}

// The CNNs of the LRZ study: a training step at a small input gives every parameter a finite
// gradient, marked ready exactly once; with the auxiliary heads off (weight 0) their gradients
// stay zero and their parameters are frozen, and the forward's logits do not depend on the heads.
BOOST_AUTO_TEST_CASE(imagenet_cnns_train_with_and_without_aux_heads) {
  struct Case {
    const char* model;
    int size;
  };
  for (const Case& c : {Case{"alexnet", 64}, Case{"googlenet", 32}, Case{"inception_v3", 75}}) {
    for (double weight : {0.0, 0.3}) {
      if (std::string(c.model) == "inception_v3" && weight > 0) continue;  // its head needs 299x299
      BOOST_TEST_CONTEXT(c.model << " aux weight " << weight) {
        auto m = scaletrain::models::make_model(c.model, 4, 3);
        if (m->num_aux_heads() == 0 && weight > 0) continue;
        m->set_aux_loss_weight(weight);
        m->initialize(11);
        nn::ParameterSet& ps = m->params();
        std::vector<int> count(ps.num_parameters(), 0);
        ps.set_grad_ready_hook([&](int i) { ++count.at(i); });
        Context ctx;
        Tensor x = to_tensor(random_vector(2 * c.size * c.size * 3, 5), {2, c.size, c.size, 3});
        Tensor logits = m->forward(ctx, x, true);
        std::vector<Tensor> aux;
        for (const Tensor& a : m->aux_logits()) aux.push_back(to_tensor(random_vector(a.numel(), 6), a.shape()));
        BOOST_TEST(aux.size() == static_cast<std::size_t>(weight > 0 ? m->num_aux_heads() : 0));
        ps.flat_grads().fill(0.0f);
        m->backward(ctx, to_tensor(random_vector(logits.numel(), 7), logits.shape()), aux);
        BOOST_TEST(std::all_of(count.begin(), count.end(), [](int n) { return n == 1; }));
        const std::vector<double> g = to_vector(ps.flat_grads());
        BOOST_TEST(std::all_of(g.begin(), g.end(), [](double v) { return std::isfinite(v); }));
        int frozen = 0;
        for (int i = 0; i < ps.num_parameters(); ++i) {
          if (!ps.frozen(i)) continue;
          ++frozen;
          const std::vector<double> gi = to_vector(ps.grad(i));
          BOOST_TEST(std::all_of(gi.begin(), gi.end(), [](double v) { return v == 0.0; }), ps.parameter_info(i).name);
        }
        BOOST_TEST((frozen > 0) == (weight == 0.0 && m->num_aux_heads() > 0));
        // Evaluation: the main head only, the same logits whatever the heads' weight.
        const std::vector<double> eval = to_vector(m->forward(ctx, x, false));
        m->set_aux_loss_weight(m->num_aux_heads() > 0 ? 0.5 : 0.0);
        BOOST_TEST(to_vector(m->forward(ctx, x, false)) == eval, boost::test_tools::per_element());
      }
    }
  }
}

// Each parameter's gradient is overwritten (not accumulated), complete when marked ready, and
// marked exactly once per backward, roughly in reverse order (fc first, conv1 last).
BOOST_AUTO_TEST_CASE(grad_ready_hooks_fire_once_per_parameter) {
  for (const char* model : {"resnet20", "resnet50"}) {
    BOOST_TEST_CONTEXT(model) {
      const bool small = std::string(model) == "resnet20";
      auto m = scaletrain::models::make_model(model, 5, small ? 1 : 3);
      m->initialize(5);
      nn::ParameterSet& ps = m->params();
      const int np = ps.num_parameters();
      std::vector<int> count(np, 0), order;
      std::vector<std::vector<double>> at_ready(np);
      ps.set_grad_ready_hook([&](int i) {
        ++count.at(i);
        order.push_back(i);
        if (small) at_ready[i] = to_vector(ps.grad(i));
      });
      Context ctx;
      const int hw = small ? 12 : 32, c = small ? 1 : 3;
      Tensor x = to_tensor(random_vector(2 * hw * hw * c, 3), {2, hw, hw, c});
      Tensor dl = to_tensor(random_vector(2 * 5, 4), {2, 5});
      m->forward(ctx, x, true);
      ps.flat_grads().fill(NAN);
      m->backward(ctx, dl);
      const std::vector<double> first = to_vector(ps.flat_grads());
      BOOST_TEST(std::all_of(first.begin(), first.end(), [](double g) { return std::isfinite(g); }));
      BOOST_TEST(std::all_of(count.begin(), count.end(), [](int n) { return n == 1; }));
      BOOST_REQUIRE_EQUAL(order.size(), static_cast<std::size_t>(np));
      BOOST_TEST(order.back() == 0);                           // conv1.weight, the first parameter, completes last
      BOOST_TEST((order[0] == np - 1 || order[0] == np - 2));  // fc
      if (small)
        for (int i = 0; i < np; ++i) BOOST_TEST(at_ready[i] == to_vector(ps.grad(i)), ps.parameter_info(i).name);

      // A second step: same gradients again (overwritten, not accumulated), hooks once more each.
      m->forward(ctx, x, true);
      m->backward(ctx, dl);
      BOOST_TEST(std::all_of(count.begin(), count.end(), [](int n) { return n == 2; }));
      BOOST_TEST(to_vector(ps.flat_grads()) == first);
    }
  }
}

// Backward holds a few activation gradients at a time, not one per layer: a layer's input gradient
// is freed once the layer before has read it (nn::fresh_activation). Measured with the host tensor
// count: the second step's peak above what the first step left in use (the layers' outputs and
// saved inputs, kept between steps) stays under a third of the activations the first forward
// allocated. A gradient buffer per layer, as before, adds about as much as the activations.
// Every gradient is freed by the end of backward, fused (bn-add-relu and bn-relu) or not.
BOOST_AUTO_TEST_CASE(backward_holds_few_activation_gradients) {
  struct Case {
    const char* model;
    int hw, c, batch;
    bool fuse;
  };
  for (const Case& c :
       {Case{"resnet20", 32, 3, 8, false}, Case{"resnet50", 64, 3, 4, false}, Case{"resnet50", 64, 3, 4, true}}) {
    BOOST_TEST_CONTEXT(c.model << (c.fuse ? ", fused" : ", unfused")) {
      auto m = scaletrain::models::make_model(c.model, 10, c.c);
      m->initialize(3);
      Context ctx;
      ctx.set_fuse_bn_add_relu(c.fuse);
      ctx.set_fuse_bn_relu(c.fuse);
      Tensor x = to_tensor(random_vector(c.batch * c.hw * c.hw * c.c, 5), {c.batch, c.hw, c.hw, c.c});
      Tensor dl = to_tensor(random_vector(c.batch * 10, 6), {c.batch, 10});

      const std::size_t start = host_tensor_memory_stats().in_use_bytes;
      m->forward(ctx, x, true);
      const std::size_t activations = host_tensor_memory_stats().in_use_bytes - start;
      m->backward(ctx, dl);
      const std::size_t between_steps = host_tensor_memory_stats().in_use_bytes;

      reset_host_tensor_memory_peak();
      m->forward(ctx, x, true);
      m->backward(ctx, dl);
      const AllocatorStats second = host_tensor_memory_stats();
      const std::size_t backward_extra = second.peak_in_use_bytes - between_steps;
      BOOST_TEST_MESSAGE("activations " << activations << " bytes, backward's extra " << backward_extra);
      BOOST_TEST(backward_extra * 3 < activations,
                 backward_extra << " bytes above " << between_steps << " against " << activations << " of activations");
      BOOST_TEST(second.in_use_bytes == between_steps);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
