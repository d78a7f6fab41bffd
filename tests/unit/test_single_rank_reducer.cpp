// The reducer of a one-rank GPU run (make_single_rank_reducer): the gradients are the mean
// already, so finish() leaves them bitwise as backward wrote them and all-reduces nothing; it
// still names a gradient backward never announced. The trainer's choice of it for a one-rank GPU
// run is checked on a GPU (gpu.resnet20_training greps the all-reduce line).
#include <boost/test/unit_test.hpp>
#include <cstring>
#include <vector>

#include "scaletrain/comm/gradient_reducer.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/nn/parameters.hpp"

namespace st = scaletrain;

namespace {
std::unique_ptr<st::nn::ParameterSet> make_params() {
  auto params = std::make_unique<st::nn::ParameterSet>();
  params->add_parameter("conv.weight", {4, 3, 3, 3});
  params->add_parameter("bn.weight", {4});
  params->add_parameter("fc.weight", {10, 4});
  params->finalize();
  return params;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(single_rank_reducer)

BOOST_AUTO_TEST_CASE(finish_leaves_the_gradients_as_backward_wrote_them) {
  auto params = make_params();
  auto reducer = st::comm::make_single_rank_reducer(params->gradient_layout());
  st::Tensor& g = params->flat_grads();
  for (int step = 0; step < 2; ++step) {
    reducer->begin_step();
    for (int64_t i = 0; i < g.numel(); ++i) g.data<float>()[i] = 0.1f * static_cast<float>(i - 7) + step;
    const std::vector<float> before(g.data<float>(), g.data<float>() + g.numel());
    for (int i = params->num_parameters() - 1; i >= 0; --i) reducer->on_grad_ready(i);
    reducer->finish();
    BOOST_TEST(std::memcmp(before.data(), g.raw(), g.bytes()) == 0);
  }
  BOOST_TEST(reducer->bytes_per_step() == 0);
  BOOST_TEST(reducer->communication_seconds() == 0.0);
  BOOST_TEST(reducer->layout().at("reducer").as_string() == "none");
  BOOST_TEST(reducer->describe().find("one rank") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_gradient_never_announced_is_named) {
  auto params = make_params();
  auto reducer = st::comm::make_single_rank_reducer(params->gradient_layout());
  reducer->begin_step();
  reducer->on_grad_ready(2);
  reducer->on_grad_ready(0);
  try {
    reducer->finish();
    BOOST_FAIL("finish() accepted a step without bn.weight's gradient");
  } catch (const st::Error& e) {
    BOOST_TEST(std::string(e.what()).find("bn.weight") != std::string::npos);
  }
  // The next step starts afresh.
  reducer->begin_step();
  for (int i = 0; i < params->num_parameters(); ++i) reducer->on_grad_ready(i);
  reducer->finish();
}

BOOST_AUTO_TEST_SUITE_END()
