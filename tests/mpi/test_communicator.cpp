// Communicator collectives and the flat gradient reducer on 1, 2 and 4 ranks. Inputs are small
// rank-dependent integers, so every expected sum, minimum, maximum and mean is exact in float.
#include <boost/test/unit_test.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "scaletrain/comm/agreement.hpp"
#include "scaletrain/comm/communicator.hpp"
#include "scaletrain/comm/gradient_reducer.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/nn/parameters.hpp"
#include "support/host_backed_device.hpp"

using scaletrain::DType;
using scaletrain::Tensor;
using scaletrain::comm::Communicator;

BOOST_AUTO_TEST_SUITE(communicator)

BOOST_AUTO_TEST_CASE(rank_size_and_hosts) {
  Communicator comm = Communicator::world();
  BOOST_TEST(comm.size() >= 1);
  BOOST_TEST(comm.rank() >= 0);
  BOOST_TEST(comm.rank() < comm.size());
  BOOST_TEST(!comm.host().empty());
  std::vector<std::string> hosts = comm.all_hosts();
  BOOST_TEST(hosts.size() == static_cast<std::size_t>(comm.size()));
  BOOST_TEST(hosts.at(comm.rank()) == comm.host());
  comm.barrier();
}

BOOST_AUTO_TEST_CASE(allreduce_scalars) {
  Communicator comm = Communicator::world();
  const int p = comm.size(), r = comm.rank();
  // Sum of (r + 1) over r = 0..P-1 is P(P+1)/2.
  BOOST_TEST(comm.allreduce_sum(static_cast<double>(r + 1)) == p * (p + 1) / 2.0);
  BOOST_TEST(comm.allreduce_sum(static_cast<int64_t>(r + 1) << 33) == (static_cast<int64_t>(p) * (p + 1) / 2) << 33);
  BOOST_TEST(comm.allreduce_min(10.0 - r) == 10.0 - (p - 1));
  BOOST_TEST(comm.allreduce_max(10.0 - r) == 10.0);
  BOOST_TEST(comm.allreduce_min(0.5 * r) == 0.0);
  BOOST_TEST(comm.allreduce_max(0.5 * r) == 0.5 * (p - 1));
  BOOST_TEST(comm.allreduce_and(true) == true);
  // False on the last rank only: every rank must see false.
  BOOST_TEST(comm.allreduce_and(r != p - 1) == false);
}

// Rank 0's work, its outcome agreed: success returns everywhere and runs the work on rank 0 only;
// an error there is an AgreedError with rank 0's message on every rank, a usage error stays one.
BOOST_AUTO_TEST_CASE(rank0_work_agreed) {
  Communicator comm = Communicator::world();
  int runs = 0;
  scaletrain::comm::on_rank0_agreed(comm, [&] { ++runs; });
  BOOST_TEST(runs == (comm.rank() == 0 ? 1 : 0));
  std::string message;
  try {
    scaletrain::comm::on_rank0_agreed(comm, [&] { ST_THROW("shard 7 is damaged"); });
  } catch (const scaletrain::AgreedError& e) {
    message = e.what();
  }
  BOOST_TEST(message.find("shard 7 is damaged") != std::string::npos);
  BOOST_TEST(message.find("[rank 0 on ") != std::string::npos, message);  // rank 0's identity on every rank
  BOOST_TEST(scaletrain::agreed_error_thrown());
  bool usage = false;
  try {
    scaletrain::comm::on_rank0_agreed(comm, [&] { throw scaletrain::UsageError("--batch-size must be positive"); });
  } catch (const scaletrain::UsageError& e) {
    usage = std::string(e.what()) == "--batch-size must be positive";
  }
  BOOST_TEST(usage);
  comm.barrier();
}

BOOST_AUTO_TEST_CASE(allreduce_tensors) {
  Communicator comm = Communicator::world();
  const int p = comm.size(), r = comm.rank();
  const int64_t n = 1037;  // odd size
  Tensor f = Tensor::empty({n}, DType::f32);
  Tensor i32 = Tensor::empty({n}, DType::i32);
  Tensor i64 = Tensor::empty({n}, DType::i64);
  for (int64_t i = 0; i < n; ++i) {
    f.data<float>()[i] = static_cast<float>((i % 7) * (r + 1)) - 3.0f;
    i32.data<int32_t>()[i] = static_cast<int32_t>(i * (r + 1));
    i64.data<int64_t>()[i] = (int64_t{1} << 40) + i * r;
  }
  comm.allreduce_sum(f);
  comm.allreduce_sum(i32);
  comm.allreduce_sum(i64);
  const int64_t ranks_sum = static_cast<int64_t>(p) * (p + 1) / 2;  // sum of (r + 1)
  const int64_t r_sum = static_cast<int64_t>(p) * (p - 1) / 2;      // sum of r
  int bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (f.data<float>()[i] != static_cast<float>((i % 7) * ranks_sum - 3 * p)) ++bad;
    if (i32.data<int32_t>()[i] != i * ranks_sum) ++bad;
    if (i64.data<int64_t>()[i] != p * (int64_t{1} << 40) + i * r_sum) ++bad;
  }
  BOOST_TEST(bad == 0);
}

BOOST_AUTO_TEST_CASE(broadcast_tensor_and_string) {
  Communicator comm = Communicator::world();
  const int p = comm.size(), r = comm.rank();
  const int root = p - 1;
  Tensor t = Tensor::empty({3, 5}, DType::f32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = r == root ? 0.25f * i : -1.0f;
  comm.broadcast(t, root);
  int bad = 0;
  for (int64_t i = 0; i < t.numel(); ++i) bad += t.data<float>()[i] != 0.25f * i;
  BOOST_TEST(bad == 0);

  std::string s =
      r == 0 ? std::string("resnet20 on \"fashion-mnist\"") : std::string("a much longer placeholder string");
  comm.broadcast(s);
  BOOST_TEST(s == "resnet20 on \"fashion-mnist\"");
  std::string empty = r == 0 ? std::string() : std::string("not empty");
  comm.broadcast(empty);
  BOOST_TEST(empty.empty());
}

BOOST_AUTO_TEST_CASE(allgather_values) {
  Communicator comm = Communicator::world();
  const int p = comm.size(), r = comm.rank();
  std::vector<double> one = comm.allgather(1.5 * r);
  BOOST_REQUIRE(one.size() == static_cast<std::size_t>(p));
  for (int i = 0; i < p; ++i) BOOST_TEST(one[i] == 1.5 * i);

  std::vector<double> many = comm.allgather(std::vector<double>{static_cast<double>(r), 100.0 + r, -2.0 * r});
  BOOST_REQUIRE(many.size() == static_cast<std::size_t>(3 * p));
  for (int i = 0; i < p; ++i) {
    BOOST_TEST(many[3 * i + 0] == static_cast<double>(i));
    BOOST_TEST(many[3 * i + 1] == 100.0 + i);
    BOOST_TEST(many[3 * i + 2] == -2.0 * i);
  }
}

BOOST_AUTO_TEST_CASE(allgather_strings_of_any_length) {
  Communicator comm = Communicator::world();
  const int p = comm.size(), r = comm.rank();
  // Rank r sends r copies of a letter of its own (rank 0 an empty string).
  const std::vector<std::string> all = comm.allgather(std::string(static_cast<std::size_t>(r), char('a' + r % 26)));
  BOOST_REQUIRE(all.size() == static_cast<std::size_t>(p));
  for (int i = 0; i < p; ++i) BOOST_TEST(all[i] == std::string(static_cast<std::size_t>(i), char('a' + i % 26)));
}

// The tensor collectives take device tensors through a host copy (a device backed by host memory
// here, so the staging runs without a GPU): results as for CPU tensors, left on the device.
BOOST_AUTO_TEST_CASE(tensor_collectives_stage_device_tensors_through_the_host) {
  using scaletrain::Device;
  using scaletrain::Tensor;
  Communicator comm = Communicator::world();
  const int p = comm.size(), r = comm.rank();
  scaletrain::test::HostBackedDevice device;
  auto filled = [](std::initializer_list<float> v) {
    Tensor t = Tensor::empty({static_cast<int64_t>(v.size())});
    std::copy(v.begin(), v.end(), t.data<float>());
    return t.to(Device::cuda);
  };
  Tensor sum = filled({1.0f * r, 2.0f, -4.0f * r});
  comm.allreduce_sum(sum);
  BOOST_TEST((sum.device() == Device::cuda));
  const float ranks = static_cast<float>(p), rank_sum = static_cast<float>(p * (p - 1) / 2);
  BOOST_TEST(sum.to(Device::cpu).data<float>()[0] == rank_sum);
  BOOST_TEST(sum.to(Device::cpu).data<float>()[1] == 2.0f * ranks);
  BOOST_TEST(sum.to(Device::cpu).data<float>()[2] == -4.0f * rank_sum);
  Tensor mean = filled({2.0f * r, 8.0f});
  comm.allreduce_mean(mean);
  BOOST_TEST(mean.to(Device::cpu).data<float>()[0] == 2.0f * rank_sum / ranks);
  BOOST_TEST(mean.to(Device::cpu).data<float>()[1] == 8.0f);
  Tensor root_value = filled({r == 0 ? 7.0f : -1.0f, r == 0 ? 0.5f : -1.0f});
  comm.broadcast(root_value, 0);
  BOOST_TEST(root_value.to(Device::cpu).data<float>()[1] == 0.5f);
  Tensor all;
  comm.gather(filled({1.0f * r, 10.0f + r}), all, 0);
  if (r == 0) {
    BOOST_TEST((all.device() == Device::cpu));
    for (int i = 0; i < p; ++i) BOOST_TEST(all.data<float>()[2 * i + 1] == 10.0f + i);
  }
  Tensor mine = filled({0.0f, 0.0f});
  comm.scatter(all, mine, 0);
  BOOST_TEST((mine.device() == Device::cuda));
  BOOST_TEST(mine.to(Device::cpu).data<float>()[1] == 10.0f + r);
}

BOOST_AUTO_TEST_CASE(moved_communicator_still_works) {
  Communicator a = Communicator::world();
  Communicator b = std::move(a);
  BOOST_TEST(b.allreduce_sum(1.0) == static_cast<double>(b.size()));
  Communicator c = Communicator::world();
  c = std::move(b);
  BOOST_TEST(c.allreduce_max(static_cast<double>(c.rank())) == static_cast<double>(c.size() - 1));
}

BOOST_AUTO_TEST_CASE(flat_reducer_averages_exactly) {
  Communicator comm = Communicator::world();
  const int p = comm.size(), r = comm.rank();
  scaletrain::nn::ParameterSet params;
  params.add_parameter("conv.weight", {4, 3, 3, 3});
  params.add_parameter("fc.weight", {10, 4});
  params.add_parameter("fc.bias", {10});
  params.add_buffer("bn.running_mean", {4});
  params.finalize();
  auto reducer = scaletrain::comm::make_flat_reducer(comm, params.gradient_layout());
  BOOST_TEST(reducer->name() == "flat");
  BOOST_TEST(reducer->bytes_per_step() == (4 * 27 + 40 + 10) * 4);

  // Rank r holds g_i = P * (i % 5 + r): the mean over ranks is (i % 5) * P + P(P-1)/2, exact.
  Tensor& g = params.flat_grads();
  for (int64_t i = 0; i < g.numel(); ++i) g.data<float>()[i] = static_cast<float>(p * (i % 5 + r));
  reducer->begin_step();
  for (int i = params.num_parameters() - 1; i >= 0; --i) reducer->on_grad_ready(i);
  reducer->finish();
  int bad = 0;
  for (int64_t i = 0; i < g.numel(); ++i)
    bad += g.data<float>()[i] != static_cast<float>((i % 5) * p + p * (p - 1) / 2);
  BOOST_TEST(bad == 0);
  // The per-parameter views see the averaged values.
  BOOST_TEST(params.grad(2).data<float>()[0] == g.data<float>()[4 * 27 + 40]);
}

BOOST_AUTO_TEST_SUITE_END()
