// The bucketed, overlapped gradient reducer on 1, 2 and 4 ranks: bucket plans as specified
// (reverse order, contiguous, a large parameter alone), and averaged gradients that equal the
// exact mean and the flat reducer's result bit for bit, with and without overlap, for every
// algorithm and emulated node layout, when gradients arrive out of order, and with 16-bit
// compression. Rank r contributes (r + 1) * v_j with v_j a multiple of 1/4 of magnitude <= 1.5,
// so every partial sum and the mean v_j * (P + 1) / 2 are exact in fp32, fp16 and bf16.
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "scaletrain/comm/allreduce.hpp"
#include "scaletrain/comm/communicator.hpp"
#include "scaletrain/comm/gradient_reducer.hpp"
#include "scaletrain/comm/topology.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/nn/parameters.hpp"

namespace comm = scaletrain::comm;
using scaletrain::Shape;
using scaletrain::Tensor;
using scaletrain::nn::ParameterSet;

namespace {

// Assorted sizes, in forward (registration) order; p3 is larger than the small buckets below.
const std::vector<Shape> kShapes = {{3}, {5, 7}, {1}, {64, 33}, {1000}, {17}, {4, 4, 3, 3}, {2}, {300}, {600}};

std::unique_ptr<ParameterSet> make_params() {
  auto params = std::make_unique<ParameterSet>();
  for (std::size_t i = 0; i < kShapes.size(); ++i) params->add_parameter("p" + std::to_string(i), kShapes[i]);
  params->finalize();
  return params;
}

// Bucket capacity in MiB for a capacity of `floats` fp32 values.
double mb_for_floats(int64_t floats) { return static_cast<double>(floats) * 4.0 / (1024.0 * 1024.0); }

float value_at(int64_t flat_index) { return static_cast<float>((flat_index % 13) - 6) * 0.25f; }

// What backward would do: write parameter i's gradient for this rank.
void write_grad(ParameterSet& params, int i, int rank) {
  const int64_t offset = params.parameter_info(i).offset;
  Tensor& g = params.grad(i);
  for (int64_t k = 0; k < g.numel(); ++k) g.data<float>()[k] = static_cast<float>(rank + 1) * value_at(offset + k);
}

// One step: write and announce the gradients in `order`, then finish.
void run_step(comm::GradientReducer& reducer, ParameterSet& params, int rank, const std::vector<int>& order) {
  reducer.begin_step();
  for (int i : order) {
    write_grad(params, i, rank);
    reducer.on_grad_ready(i);
  }
  reducer.finish();
}

std::vector<int> backward_order(const ParameterSet& params) {
  std::vector<int> order;
  for (int i = params.num_parameters() - 1; i >= 0; --i) order.push_back(i);
  return order;
}

// Elements that differ from the exact mean over P ranks.
int64_t count_wrong(ParameterSet& params, int p) {
  const float* g = params.flat_grads().data<float>();
  int64_t wrong = 0;
  for (int64_t j = 0; j < params.flat_grads().numel(); ++j)
    wrong += g[j] != static_cast<float>(static_cast<double>(value_at(j)) * (p + 1) / 2.0);
  return wrong;
}

bool same_bits(ParameterSet& a, ParameterSet& b) {
  return a.flat_grads().bytes() == b.flat_grads().bytes() &&
         std::memcmp(a.flat_grads().raw(), b.flat_grads().raw(), a.flat_grads().bytes()) == 0;
}

// The flat reducer's answer, for bitwise comparison.
std::unique_ptr<ParameterSet> flat_reference(const comm::Communicator& world) {
  auto params = make_params();
  auto flat = comm::make_flat_reducer(world, params->gradient_layout());
  run_step(*flat, *params, world.rank(), backward_order(*params));
  return params;
}

struct Expected {
  int first, last;
};

void check_plan(ParameterSet& params, double bucket_mb, const std::vector<Expected>& expected) {
  const auto buckets = comm::plan_buckets(params.gradient_layout(), bucket_mb);
  BOOST_TEST_REQUIRE(buckets.size() == expected.size());
  for (std::size_t k = 0; k < buckets.size(); ++k) {
    BOOST_TEST_CONTEXT("bucket " << k << " at bucket_mb " << bucket_mb) {
      BOOST_TEST(buckets[k].first_param == expected[k].first);
      BOOST_TEST(buckets[k].last_param == expected[k].last);
      BOOST_TEST(buckets[k].offset == params.parameter_info(expected[k].first).offset);
      int64_t count = 0;
      for (int i = expected[k].first; i <= expected[k].last; ++i) count += scaletrain::shape_numel(kShapes[i]);
      BOOST_TEST(buckets[k].count == count);
    }
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(bucketed_reducer)

BOOST_AUTO_TEST_CASE(bucket_plan_follows_backward_order) {
  auto params = make_params();
  // Sizes in backward order: p9 600, p8 300, p7 2, p6 144, p5 17, p4 1000, p3 2112, p2 1, p1 35, p0 3.
  // 1024 floats: 600+300+2 = 902 fits, +144 does not; 144+17 fits, +1000 does not; p4 alone;
  // p3 (2112 > 1024) alone; p2..p0.
  check_plan(*params, mb_for_floats(1024), {{7, 9}, {5, 6}, {4, 4}, {3, 3}, {0, 2}});
  // A bucket may fill up exactly (902), and one float less moves p7 to the next bucket.
  check_plan(*params, mb_for_floats(902), {{7, 9}, {5, 6}, {4, 4}, {3, 3}, {0, 2}});
  check_plan(*params, mb_for_floats(901), {{8, 9}, {5, 7}, {4, 4}, {3, 3}, {0, 2}});
  // Tiny buckets: one parameter each, last registered first.
  check_plan(*params, mb_for_floats(1),
             {{9, 9}, {8, 8}, {7, 7}, {6, 6}, {5, 5}, {4, 4}, {3, 3}, {2, 2}, {1, 1}, {0, 0}});
  // The default 25 MiB: everything in one bucket.
  check_plan(*params, 25.0, {{0, 9}});
  BOOST_CHECK_THROW(comm::plan_buckets(params->gradient_layout(), 0.0), scaletrain::Error);
  BOOST_CHECK_THROW(comm::plan_buckets(params->gradient_layout(), -1.0), scaletrain::Error);
}

BOOST_AUTO_TEST_CASE(buckets_cover_the_buffer_contiguously) {
  auto params = make_params();
  for (int64_t floats : {1, 100, 1024, 3000, 5000}) {
    const auto buckets = comm::plan_buckets(params->gradient_layout(), mb_for_floats(floats));
    int64_t end = params->parameter_count();  // walking backward from the end of the buffer
    int next_last = params->num_parameters() - 1;
    for (const auto& b : buckets) {
      BOOST_TEST(b.last_param == next_last);
      BOOST_TEST(b.offset + b.count == end);
      BOOST_TEST((b.count <= floats || b.first_param == b.last_param));  // only a lone parameter may exceed it
      end = b.offset;
      next_last = b.first_param - 1;
    }
    BOOST_TEST(end == 0);
    BOOST_TEST(next_last == -1);
  }
}

BOOST_AUTO_TEST_CASE(averages_exactly_and_as_flat_for_every_algorithm_and_layout) {
  const comm::Communicator world = comm::Communicator::world();
  const int p = world.size(), r = world.rank();
  auto reference = flat_reference(world);
  BOOST_TEST(count_wrong(*reference, p) == 0);

  // Shared memory (one node here), and 2 emulated nodes of 2 on 4 ranks.
  std::vector<int> layouts = {0};
  if (p % 2 == 0) layouts.push_back(2);
  for (int ranks_per_node : layouts) {
    const comm::Topology topo = comm::Topology::build(world, ranks_per_node);
    for (const std::string algorithm : {"flat", "hierarchical", "auto"}) {
      comm::AllReduceOptions ao;
      ao.algorithm = algorithm;
      ao.log_calibration = false;
      comm::AllReducer allreducer(topo, ao);
      for (int64_t floats : {int64_t{1}, int64_t{1024}, int64_t{1} << 20}) {
        for (bool overlap : {true, false}) {
          BOOST_TEST_CONTEXT(algorithm << ", " << topo.describe() << ", buckets of " << floats << " floats, overlap "
                                       << overlap) {
            auto params = make_params();
            auto reducer =
                comm::make_bucketed_reducer(allreducer, params->gradient_layout(), {mb_for_floats(floats), overlap});
            BOOST_TEST(reducer->bytes_per_step() == params->parameter_count() * 4);
            // Two steps: the second reuses the same buckets.
            for (int step = 0; step < 2; ++step) {
              run_step(*reducer, *params, r, backward_order(*params));
              BOOST_TEST(count_wrong(*params, p) == 0);
              BOOST_TEST(same_bits(*params, *reference));
            }
            BOOST_TEST(reducer->communication_seconds() >= 0.0);
            const std::string layout = reducer->layout().dump();
            BOOST_TEST(layout.find("\"first_parameter\": \"p9\"") != std::string::npos, layout);
          }
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(out_of_order_readiness_still_averages_correctly) {
  const comm::Communicator world = comm::Communicator::world();
  const int p = world.size(), r = world.rank();
  const comm::Topology topo = comm::Topology::build(world, p % 2 == 0 ? 2 : 0);
  comm::AllReduceOptions ao;
  ao.algorithm = "hierarchical";
  comm::AllReducer allreducer(topo, ao);
  auto params = make_params();
  auto reducer = comm::make_bucketed_reducer(allreducer, params->gradient_layout(), {mb_for_floats(1024), true});
  // Forward order, and a rank-dependent shuffle: every rank still starts the buckets in the same
  // sequence, so nothing hangs and the result is exact.
  std::vector<int> forward;
  for (int i = 0; i < params->num_parameters(); ++i) forward.push_back(i);
  run_step(*reducer, *params, r, forward);
  BOOST_TEST(count_wrong(*params, p) == 0);
  std::vector<int> shuffled = {4, 9, 0, 7, 3, 8, 1, 6, 2, 5};
  for (int k = 0; k < r; ++k) std::rotate(shuffled.begin(), shuffled.begin() + 3, shuffled.end());
  run_step(*reducer, *params, r, shuffled);
  BOOST_TEST(count_wrong(*params, p) == 0);
}

BOOST_AUTO_TEST_CASE(compressed_gradients_average_exactly) {
  const comm::Communicator world = comm::Communicator::world();
  const int p = world.size(), r = world.rank();
  const comm::Topology topo = comm::Topology::build(world, p % 2 == 0 ? 2 : 0);
  for (auto compression : {comm::Compression::fp16, comm::Compression::bf16}) {
    comm::AllReduceOptions ao;
    ao.algorithm = "hierarchical";
    ao.compression = compression;
    comm::AllReducer allreducer(topo, ao);
    auto params = make_params();
    auto reducer = comm::make_bucketed_reducer(allreducer, params->gradient_layout(), {mb_for_floats(1024), true});
    run_step(*reducer, *params, r, backward_order(*params));
    BOOST_TEST(count_wrong(*params, p) == 0, comm::compression_name(compression));
  }
}

BOOST_AUTO_TEST_CASE(misuse_is_a_clear_error) {
  const comm::Communicator world = comm::Communicator::world();
  const int p = world.size(), r = world.rank();
  const comm::Topology topo = comm::Topology::build(world);
  comm::AllReduceOptions ao;
  ao.algorithm = "flat";
  comm::AllReducer allreducer(topo, ao);
  auto params = make_params();
  auto reducer = comm::make_bucketed_reducer(allreducer, params->gradient_layout(), {mb_for_floats(1024), true});

  // p4 (a bucket of its own) never marked ready: the buckets before it complete, the error names it.
  reducer->begin_step();
  for (int i : backward_order(*params))
    if (i != 4) {
      write_grad(*params, i, r);
      reducer->on_grad_ready(i);
    }
  try {
    reducer->finish();
    BOOST_ERROR("finish() accepted a step with a parameter never marked ready");
  } catch (const scaletrain::Error& e) {
    const std::string what = e.what();
    BOOST_TEST(what.find("p4") != std::string::npos, what);
    BOOST_TEST(what.find("never marked") != std::string::npos, what);
  }

  // The reducer recovers: a full step afterwards is exact.
  run_step(*reducer, *params, r, backward_order(*params));
  BOOST_TEST(count_wrong(*params, p) == 0);

  // A gradient announced twice, an unknown index, or outside a step.
  BOOST_CHECK_THROW(reducer->on_grad_ready(9), scaletrain::Error);
  reducer->begin_step();
  BOOST_CHECK_THROW(reducer->begin_step(), scaletrain::Error);
  write_grad(*params, 9, r);
  reducer->on_grad_ready(9);
  BOOST_CHECK_THROW(reducer->on_grad_ready(9), scaletrain::Error);
  BOOST_CHECK_THROW(reducer->on_grad_ready(10), scaletrain::Error);
  BOOST_CHECK_THROW(reducer->on_grad_ready(-1), scaletrain::Error);
  for (int i : backward_order(*params))
    if (i != 9) {
      write_grad(*params, i, r);
      reducer->on_grad_ready(i);
    }
  reducer->finish();
  BOOST_TEST(count_wrong(*params, p) == 0);
  BOOST_CHECK_THROW(reducer->finish(), scaletrain::Error);
}

BOOST_AUTO_TEST_SUITE_END()
