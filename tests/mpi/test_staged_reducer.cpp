// The gradient reducers' staged path (all-reduce through a DeviceStaging's host mirror, as on a
// GPU) on 1, 2 and 4 ranks with the CPU staging: the bucketed reducer, with and without overlap,
// for several bucket sizes and algorithms, and the flat reducer give bitwise the averages they
// give without staging, over several steps with different gradients; every bucket is copied out
// and back exactly once per step; the AllReducer runs a request's hook before its all-reduce
// and fails the request when the hook throws; a staging of another buffer is refused.
// Rank r contributes (r + 1) * (s + 1) * v_j at step s, v_j a multiple of 1/4 of magnitude <= 1.5:
// every partial sum and the mean are exact in fp32, so "bitwise equal" is also "exact".
#include <boost/test/unit_test.hpp>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "scaletrain/backend/context.hpp"
#include "scaletrain/backend/device_staging.hpp"
#include "scaletrain/comm/allreduce.hpp"
#include "scaletrain/comm/communicator.hpp"
#include "scaletrain/comm/gradient_reducer.hpp"
#include "scaletrain/comm/topology.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/nn/parameters.hpp"

namespace comm = scaletrain::comm;
using scaletrain::Context;
using scaletrain::DeviceStaging;
using scaletrain::Shape;
using scaletrain::Tensor;
using scaletrain::nn::ParameterSet;

namespace {

// Assorted sizes in forward order, as in test_bucketed_reducer; p3 is larger than small buckets.
const std::vector<Shape> kShapes = {{3}, {5, 7}, {1}, {64, 33}, {1000}, {17}, {4, 4, 3, 3}, {2}, {300}, {600}};
constexpr int kSteps = 3;

std::unique_ptr<ParameterSet> make_params() {
  auto params = std::make_unique<ParameterSet>();
  for (std::size_t i = 0; i < kShapes.size(); ++i) params->add_parameter("p" + std::to_string(i), kShapes[i]);
  params->finalize();
  return params;
}

double mb_for_floats(int64_t floats) { return static_cast<double>(floats) * 4.0 / (1024.0 * 1024.0); }

float value_at(int64_t flat_index) { return static_cast<float>((flat_index % 13) - 6) * 0.25f; }

void write_grad(ParameterSet& params, int i, int rank, int step) {
  const int64_t offset = params.parameter_info(i).offset;
  Tensor& g = params.grad(i);
  for (int64_t k = 0; k < g.numel(); ++k)
    g.data<float>()[k] = static_cast<float>((rank + 1) * (step + 1)) * value_at(offset + k);
}

void run_step(comm::GradientReducer& reducer, ParameterSet& params, int rank, int step) {
  reducer.begin_step();
  for (int i = params.num_parameters() - 1; i >= 0; --i) {
    write_grad(params, i, rank, step);
    reducer.on_grad_ready(i);
  }
  reducer.finish();
}

int64_t count_wrong(ParameterSet& params, int p, int step) {
  const float* g = params.flat_grads().data<float>();
  int64_t wrong = 0;
  for (int64_t j = 0; j < params.flat_grads().numel(); ++j)
    wrong += g[j] != static_cast<float>(static_cast<double>(value_at(j)) * (step + 1) * (p + 1) / 2.0);
  return wrong;
}

bool same_bits(ParameterSet& a, ParameterSet& b) {
  return a.flat_grads().bytes() == b.flat_grads().bytes() &&
         std::memcmp(a.flat_grads().raw(), b.flat_grads().raw(), a.flat_grads().bytes()) == 0;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(staged_reducer)

BOOST_AUTO_TEST_CASE(bucketed_staged_equals_unstaged_and_copies_each_bucket_once_per_step) {
  const comm::Communicator world = comm::Communicator::world();
  const int p = world.size(), r = world.rank();
  const comm::Topology topo = comm::Topology::build(world, p % 2 == 0 ? 2 : 0);
  Context ctx;
  for (const std::string algorithm : {"flat", "hierarchical"}) {
    comm::AllReduceOptions ao;
    ao.algorithm = algorithm;
    comm::AllReducer allreducer(topo, ao);
    for (int64_t floats : {int64_t{1}, int64_t{1024}, int64_t{3000}, int64_t{1} << 20}) {
      for (bool overlap : {true, false}) {
        BOOST_TEST_CONTEXT(algorithm << ", buckets of " << floats << " floats, overlap " << overlap) {
          auto plain_params = make_params();
          auto staged_params = make_params();
          auto plain = comm::make_bucketed_reducer(allreducer, plain_params->gradient_layout(),
                                                   {mb_for_floats(floats), overlap});
          std::shared_ptr<DeviceStaging> staging = DeviceStaging::create(ctx, staged_params->flat_grads());
          auto staged = comm::make_bucketed_reducer(allreducer, staged_params->gradient_layout(),
                                                    {mb_for_floats(floats), overlap}, staging);
          BOOST_TEST(staged->describe().find("through pinned host buffers") != std::string::npos);
          for (int step = 0; step < kSteps; ++step) {
            run_step(*plain, *plain_params, r, step);
            run_step(*staged, *staged_params, r, step);
            BOOST_TEST(count_wrong(*staged_params, p, step) == 0, "step " << step);
            BOOST_TEST(same_bits(*staged_params, *plain_params), "step " << step);
          }
          const auto buckets = comm::plan_buckets(staged_params->gradient_layout(), mb_for_floats(floats));
          int64_t covered = 0;
          for (std::size_t k = 0; k < buckets.size(); ++k) {
            const DeviceStaging::Copies c = staging->copies(buckets[k].offset);
            BOOST_TEST(c.to_host == kSteps, "bucket " << k);
            BOOST_TEST(c.to_device == kSteps, "bucket " << k);
            covered += buckets[k].count;
          }
          BOOST_TEST(covered == staged_params->parameter_count());
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(flat_staged_equals_unstaged_and_copies_once_per_step) {
  const comm::Communicator world = comm::Communicator::world();
  const int p = world.size(), r = world.rank();
  Context ctx;
  auto plain_params = make_params();
  auto staged_params = make_params();
  auto plain = comm::make_flat_reducer(world, plain_params->gradient_layout());
  std::shared_ptr<DeviceStaging> staging = DeviceStaging::create(ctx, staged_params->flat_grads());
  auto staged = comm::make_flat_reducer(world, staged_params->gradient_layout(), staging);
  BOOST_TEST(staged->describe().find("through pinned host buffers") != std::string::npos);
  for (int step = 0; step < kSteps; ++step) {
    run_step(*plain, *plain_params, r, step);
    run_step(*staged, *staged_params, r, step);
    BOOST_TEST(count_wrong(*staged_params, p, step) == 0, "step " << step);
    BOOST_TEST(same_bits(*staged_params, *plain_params), "step " << step);
  }
  BOOST_TEST(staging->copies(0).to_host == kSteps);
  BOOST_TEST(staging->copies(0).to_device == kSteps);
}

BOOST_AUTO_TEST_CASE(allreducer_runs_a_requests_hook_first_and_fails_it_when_the_hook_throws) {
  const comm::Communicator world = comm::Communicator::world();
  const int p = world.size(), r = world.rank();
  const comm::Topology topo = comm::Topology::build(world);
  comm::AllReduceOptions ao;
  ao.algorithm = "flat";
  comm::AllReducer allreducer(topo, ao);
  // The hook writes the data (as a copy from the GPU would): the sum is of what it wrote.
  std::vector<float> data(1000, -100.0f);
  std::vector<float> untouched(10, 1.0f);
  const auto first = allreducer.start(untouched.data(), 10);
  const auto hooked = allreducer.start(data.data(), 1000, [&] {
    for (float& x : data) x = static_cast<float>(r + 1);
  });
  allreducer.wait(hooked);
  allreducer.wait(first);
  int64_t wrong = 0;
  for (float x : data) wrong += x != static_cast<float>(p * (p + 1) / 2);
  BOOST_TEST(wrong == 0);
  BOOST_TEST(untouched[0] == static_cast<float>(p));
  // Every rank's hook throws: that request fails on every rank, and so does the one after it.
  const auto failing = allreducer.start(data.data(), 1000, [] { throw scaletrain::Error("the copy failed"); });
  const auto after = allreducer.start(untouched.data(), 10);
  try {
    allreducer.wait(failing);
    BOOST_ERROR("a request whose hook threw completed");
  } catch (const scaletrain::Error& e) {
    BOOST_TEST(std::string(e.what()).find("the copy failed") != std::string::npos, e.what());
  }
  BOOST_CHECK_THROW(allreducer.wait(after), scaletrain::Error);
}

BOOST_AUTO_TEST_CASE(a_staging_of_another_buffer_is_refused) {
  const comm::Communicator world = comm::Communicator::world();
  const comm::Topology topo = comm::Topology::build(world);
  comm::AllReduceOptions ao;
  ao.algorithm = "flat";
  comm::AllReducer allreducer(topo, ao);
  Context ctx;
  auto params = make_params();
  auto other = make_params();
  std::shared_ptr<DeviceStaging> wrong = DeviceStaging::create(ctx, other->flat_grads());
  BOOST_CHECK_THROW(comm::make_bucketed_reducer(allreducer, params->gradient_layout(), {}, wrong), scaletrain::Error);
  BOOST_CHECK_THROW(comm::make_flat_reducer(world, params->gradient_layout(), wrong), scaletrain::Error);
}

BOOST_AUTO_TEST_SUITE_END()
