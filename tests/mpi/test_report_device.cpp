// report.json's "device" on 1, 2 and 4 ranks: on the CPU the kind and the host tensors' peak
// memory (rank 0's in use, each rank's and their maximum); on GPUs rank 0's GPU, the
// GPU phase times over ranks, each rank's peak memory, and each distinct GPU's energy counted
// once however many ranks share it (here ranks 0, 2, ... share one GPU and 1, 3, ... another),
// with totals only where every GPU could be read.
#include <boost/test/unit_test.hpp>
#include <string>
#include <vector>

#include "scaletrain/comm/communicator.hpp"
#include "scaletrain/report/train_report.hpp"

using scaletrain::Json;
using scaletrain::comm::Communicator;
using namespace scaletrain::report;

namespace {
// Rank r on host "node" and GPU r % 2, with figures that tell the ranks apart.
TrainSummary gpu_summary(const Communicator& comm, const PhaseTimers& gpu_time) {
  const int r = comm.rank();
  TrainSummary s;
  s.hosts.assign(static_cast<std::size_t>(comm.size()), "node");
  s.device_kind = "cuda";
  s.gpu = Json::object();
  s.gpu.set("gpus_per_node", 2);
  s.gpu.set("name", "Test GPU");
  s.gpu_pci_bus_id = r % 2 == 0 ? "0000:3b:00.0" : "0000:5e:00.0";
  s.gpu_timers = &gpu_time;
  s.peak_memory_bytes = 1000 * (r + 1);
  s.energy_joules = 10.0 * (r + 1);
  s.segment_samples = 100;
  return s;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(report_device)

BOOST_AUTO_TEST_CASE(the_cpu_is_its_kind_and_its_tensor_memory) {
  Communicator comm = Communicator::world();
  const int n = comm.size();
  TrainSummary s;
  s.hosts.assign(static_cast<std::size_t>(n), "node");
  s.peak_memory_bytes = s.peak_in_use_bytes = 1000 * (comm.rank() + 1);
  const Json d = device_report(comm, s);
  BOOST_TEST(d.size() == 4u);
  BOOST_TEST(d.at("kind").as_string() == "cpu");
  BOOST_TEST(d.at("peak_in_use_bytes").as_int() == 1000 * (comm.rank() + 1));  // this rank's; rank 0 writes it
  BOOST_TEST(d.at("peak_memory_bytes").as_int() == 1000 * n);
  BOOST_REQUIRE(d.at("per_rank_peak_memory_bytes").size() == static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r)
    BOOST_TEST(d.at("per_rank_peak_memory_bytes").at(static_cast<std::size_t>(r)).as_int() == 1000 * (r + 1));
}

BOOST_AUTO_TEST_CASE(each_gpu_is_counted_once_with_the_samples_of_its_ranks) {
  Communicator comm = Communicator::world();
  const int n = comm.size();
  PhaseTimers gpu_time;
  gpu_time.add(Phase::forward, 0.5 * (comm.rank() + 1));
  const Json d = device_report(comm, gpu_summary(comm, gpu_time));
  BOOST_TEST(d.at("kind").as_string() == "cuda");
  BOOST_TEST(d.at("name").as_string() == "Test GPU");
  BOOST_TEST(d.at("gpus_per_node").as_int() == 2);
  BOOST_TEST(d.at("phases").at("forward").at("max_s").as_double() == 0.5 * n);
  BOOST_TEST(d.at("phases").at("forward").at("slowest_rank").as_int() == n - 1);
  BOOST_TEST(d.at("phases").at("optimizer").at("max_s").as_double() == 0.0);
  BOOST_TEST(!d.at("phases").contains("allreduce"));
  BOOST_TEST(d.at("peak_memory_bytes").as_int() == 1000 * n);
  BOOST_TEST(d.at("per_rank_peak_memory_bytes").size() == static_cast<std::size_t>(n));
  const Json& gpus = d.at("gpus");
  const int distinct = n < 2 ? n : 2;
  BOOST_TEST(gpus.size() == static_cast<std::size_t>(distinct));
  double joules = 0.0;
  for (int g = 0; g < distinct; ++g) {
    const Json& gpu = gpus.at(static_cast<std::size_t>(g));
    const int ranks = (n - g + 1) / 2;  // g, g + 2, ...
    BOOST_TEST(gpu.at("ranks").size() == static_cast<std::size_t>(ranks));
    BOOST_TEST(gpu.at("ranks").at(0).as_int() == g);
    BOOST_TEST(gpu.at("energy_joules").as_double() == 10.0 * (g + 1));  // the lowest rank's reading
    BOOST_TEST(gpu.at("joules_per_sample").as_double() == 10.0 * (g + 1) / (100.0 * ranks));
    BOOST_TEST(gpu.at("energy_unavailable").is_null());
    joules += 10.0 * (g + 1);
  }
  BOOST_TEST(gpus.at(0).at("pci_bus_id").as_string() == "0000:3b:00.0");
  BOOST_TEST(d.at("energy_joules").as_double() == joules);
  BOOST_TEST(d.at("energy_joules_per_sample").as_double() == joules / (100.0 * n));
  BOOST_TEST(d.at("energy_unavailable").is_null());
}

BOOST_AUTO_TEST_CASE(a_gpu_nvml_cannot_read_leaves_the_totals_null_and_says_why) {
  Communicator comm = Communicator::world();
  PhaseTimers gpu_time;
  TrainSummary s = gpu_summary(comm, gpu_time);
  if (comm.rank() == comm.size() - 1) {
    s.energy_joules = -1.0;
    s.energy_reason = "not supported on this GPU";
  }
  const Json d = device_report(comm, s);
  const int last = comm.size() - 1;
  // The last rank reads its GPU's energy where it is the lowest rank on that GPU.
  if (last < 2) {
    BOOST_TEST(d.at("energy_joules").is_null());
    BOOST_TEST(d.at("energy_joules_per_sample").is_null());
    BOOST_TEST(d.at("energy_unavailable").as_string() ==
               "rank " + std::to_string(last) + ": not supported on this GPU");
    BOOST_TEST(d.at("gpus").at(static_cast<std::size_t>(last)).at("energy_joules").is_null());
    BOOST_TEST(d.at("gpus").at(static_cast<std::size_t>(last)).at("energy_unavailable").as_string() ==
               "not supported on this GPU");
  } else {
    BOOST_TEST(d.at("energy_unavailable").is_null());
    BOOST_TEST(d.at("energy_joules").as_double() == 30.0);
  }
}

BOOST_AUTO_TEST_SUITE_END()
