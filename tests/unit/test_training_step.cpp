// The training step written once (train/training_step.hpp), on NeuMF (no batch norm, so that
// accumulation is exact up to rounding): two micro-batches of b give the update of one batch of
// 2b within fp32 rounding, the watcher sees the phases in the step's order, a step moves the
// weights, and tasks opened on a shape alone make batches of their shapes and refuse their data.
#include <array>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "scaletrain/comm/gradient_reducer.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/models/neumf.hpp"
#include "scaletrain/train/training_step.hpp"
#include "support/gradcheck.hpp"
#include "support/one_rank_mpi.hpp"

using namespace scaletrain;
using report::Phase;
using scaletrain::test::error_of;

namespace {

// Records the phases as the step reports them.
class PhaseLog final : public train::StepPhaseWatcher {
 public:
  void begin(Phase phase) override { events.push_back(std::string("begin ") + report::phase_name(phase)); }
  void end(Phase phase) noexcept override { events.push_back(std::string("end ") + report::phase_name(phase)); }
  std::vector<std::string> events;
};

train::DataShape neumf_shape() {
  train::DataShape shape;
  shape.num_users = 50;
  shape.num_items = 40;
  return shape;
}

// NeuMF's weights after one SGD step on `batch` in `micro_batches` micro-batches.
std::vector<float> weights_after_one_step(const train::Batch& batch, int micro_batches, PhaseLog& log) {
  train::TrainConfig config;
  config.model = "ncf";
  config.optimizer = "sgd";
  config.weight_decay = 0;
  const std::unique_ptr<train::Task> task = train::open_task_of_shape(config, neumf_shape());
  const std::unique_ptr<models::Network> network = task->make_network(7);
  const std::unique_ptr<optim::Optimizer> optimizer = train::make_optimizer(config, network->params());
  const std::unique_ptr<comm::GradientReducer> reducer =
      comm::make_single_rank_reducer(network->params().gradient_layout());
  Context ctx(Device::cpu, 1);
  train::TrainingStep step(ctx, *task, *network, *optimizer, *reducer, micro_batches, /*rank=*/0);
  const double loss = step.run(batch, batch.size() / micro_batches, /*global_step=*/0, 0.5, log);
  BOOST_TEST(std::isfinite(loss));
  const Tensor& w = network->params().flat_values();
  return std::vector<float>(w.data<float>(), w.data<float>() + w.numel());
}

// NeuMF that records where the step places its random draws (Network::set_random_position).
class PositionRecorder final : public models::NeuMF {
 public:
  PositionRecorder() : NeuMF(50, 40) {}
  void set_random_position(int64_t global_step, int micro_batch, int rank) override {
    positions.push_back({global_step, micro_batch, rank});
  }
  std::vector<std::array<int64_t, 3>> positions;
};

}  // namespace

BOOST_AUTO_TEST_SUITE(training_step)

// Before each micro-batch's forward the network learns (global step, micro-batch, rank): the
// step number is the caller's (the run position a checkpoint restores), not a count of the
// step's own calls, so a resumed run draws the masks of an uninterrupted one.
BOOST_AUTO_TEST_CASE(each_micro_batch_gets_its_random_position) {
  train::TrainConfig config;
  config.model = "ncf";
  config.optimizer = "sgd";
  const std::unique_ptr<train::Task> task = train::open_task_of_shape(config, neumf_shape());
  PositionRecorder network;
  network.initialize(7);
  const std::unique_ptr<optim::Optimizer> optimizer = train::make_optimizer(config, network.params());
  const std::unique_ptr<comm::GradientReducer> reducer =
      comm::make_single_rank_reducer(network.params().gradient_layout());
  Context ctx(Device::cpu, 1);
  train::TrainingStep step(ctx, *task, network, *optimizer, *reducer, 3, /*rank=*/5);
  const train::Batch batch = task->synthetic_batch(12, 3);
  PhaseLog log;
  step.run(batch, 4, /*global_step=*/41, 0.1, log);
  step.run(batch, 4, /*global_step=*/7, 0.1, log);
  const std::vector<std::array<int64_t, 3>> expected = {{41, 0, 5}, {41, 1, 5}, {41, 2, 5},
                                                        {7, 0, 5},  {7, 1, 5},  {7, 2, 5}};
  BOOST_TEST((network.positions == expected));
}

BOOST_AUTO_TEST_CASE(two_micro_batches_update_as_one_batch) {
  train::TrainConfig config;
  config.model = "ncf";
  const train::Batch batch = train::open_task_of_shape(config, neumf_shape())->synthetic_batch(32, 3);
  PhaseLog one, two;
  const std::vector<float> whole = weights_after_one_step(batch, 1, one);
  const std::vector<float> halves = weights_after_one_step(batch, 2, two);
  train::TrainConfig untrained_config;
  untrained_config.model = "ncf";
  const std::unique_ptr<models::Network> untrained =
      train::open_task_of_shape(untrained_config, neumf_shape())->make_network(7);
  const float* w0 = untrained->params().flat_values().data<float>();
  BOOST_TEST_REQUIRE(whole.size() == halves.size());
  double moved = 0.0, worst = 0.0;
  for (std::size_t i = 0; i < whole.size(); ++i) {
    moved = std::max(moved, std::abs(static_cast<double>(whole[i]) - w0[i]));
    // (g1 + g2) / 2 against the gradient of the mean over 2b: sums in another order.
    worst = std::max(worst, std::abs(static_cast<double>(whole[i]) - halves[i]) / (1e-3 + std::abs(whole[i] - w0[i])));
  }
  BOOST_TEST(moved > 1e-4, "the step moved no weight");
  BOOST_TEST(worst < 1e-4, "two micro-batches differ from one batch by " << worst << " of the update");
  const std::vector<std::string> expected_one = {"begin forward",   "end forward",     "begin backward",
                                                 "end backward",    "begin allreduce", "end allreduce",
                                                 "begin optimizer", "end optimizer"};
  BOOST_TEST(one.events == expected_one, boost::test_tools::per_element());
  std::vector<std::string> expected_two = {"begin forward", "end forward", "begin backward", "end backward"};
  expected_two.insert(expected_two.end(), expected_one.begin(), expected_one.end());
  BOOST_TEST(two.events == expected_two, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_task_of_a_shape_makes_batches_of_it_and_has_no_data) {
  train::TrainConfig config;
  config.model = "resnet20";
  train::DataShape shape;
  shape.num_classes = 7;
  shape.channels = 3;
  shape.height = 12;
  shape.width = 10;
  const std::unique_ptr<train::Task> task = train::open_task_of_shape(config, shape);
  const train::Batch a = task->synthetic_batch(5, 1), b = task->synthetic_batch(5, 1), c = task->synthetic_batch(5, 2);
  BOOST_TEST(a.at("images").shape() == (Shape{5, 12, 10, 3}), boost::test_tools::per_element());
  BOOST_TEST((a.at("images").dtype() == DType::u8));
  BOOST_TEST((a.at("labels").dtype() == DType::i32));
  const int32_t* labels = a.at("labels").data<int32_t>();
  for (int i = 0; i < 5; ++i) BOOST_TEST((labels[i] >= 0 && labels[i] < 7), "label " << labels[i]);
  const auto bytes = [](const Tensor& t) {
    return std::vector<uint8_t>(t.data<uint8_t>(), t.data<uint8_t>() + t.numel());
  };
  BOOST_TEST((bytes(a.at("images")) == bytes(b.at("images"))), "one seed, one batch");
  BOOST_TEST((bytes(a.at("images")) != bytes(c.at("images"))), "another seed, another batch");
  const comm::Communicator& comm = test::one_rank_world();
  const std::string refused = error_of([&] { task->training_batches(comm, 4, 1); });
  BOOST_TEST(refused.find("training batches of a dataset known by its shape only") != std::string::npos, refused);
  const std::string no_ncf = error_of([&] {
    train::TrainConfig ncf;
    ncf.model = "ncf";
    train::open_task_of_shape(ncf, shape);
  });
  BOOST_TEST(no_ncf.find("0 users and 0 items") != std::string::npos, no_ncf);
}

BOOST_AUTO_TEST_SUITE_END()
