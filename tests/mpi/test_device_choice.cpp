// --device decided by all ranks together: local ranks from the host names, and on a machine
// without a GPU (this one, or any CI machine) cuda refused on every rank alike and auto on the CPU.
// With a GPU, the same holds for a run whose options keep it on the CPU (the reason passed in).
// With made-up GPUs, the ranks share them out by UUID (10 ranks: more than a DGX-1's 8 GPUs), and
// amp-bf16 is refused on made-up V100s.
// ST_MPI_RANKS: 1 2 4 10
#include <boost/test/unit_test.hpp>

#include "scaletrain/backend/device_info.hpp"
#include "scaletrain/comm/communicator.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/train/device_choice.hpp"

namespace st = scaletrain;
using st::train::DeviceRequest;

BOOST_AUTO_TEST_SUITE(device_choice)

BOOST_AUTO_TEST_CASE(cpu_is_chosen_by_every_rank_with_its_local_rank) {
  const st::comm::Communicator comm = st::comm::Communicator::world();
  const st::train::DeviceChoice c = st::train::choose_device(comm, DeviceRequest::cpu, "train", "");
  BOOST_TEST((c.device == st::Device::cpu));
  BOOST_TEST(c.gpu_index == -1);
  // mpirun starts every rank of this test on one host.
  BOOST_TEST(c.local_rank == comm.rank());
  BOOST_TEST(c.ranks_on_host == comm.size());
  BOOST_TEST(c.log_lines.at(0) == "device: cpu (--device cpu)");
}

BOOST_AUTO_TEST_CASE(without_a_usable_gpu_cuda_is_refused_on_every_rank_and_auto_takes_the_cpu) {
  const st::comm::Communicator comm = st::comm::Communicator::world();
  const bool gpu = st::list_visible_gpus().availability == st::GpuAvailability::visible;
  std::string refusal;
  try {
    st::train::choose_device(comm, DeviceRequest::cuda, "train", "--optimizer lars runs on the CPU only");
  } catch (const st::UsageError& e) {
    refusal = e.what();
  }
  const std::string expected = gpu ? "train --device cuda: --optimizer lars runs on the CPU only; use --device cpu"
                                   : "train --device cuda: no GPU on rank 0 (host " + comm.host() + "): ";
  BOOST_TEST(refusal.rfind(expected, 0) == 0u, "refusal: '" << refusal << "'");
  const bool refused_everywhere = comm.allreduce_and(!refusal.empty());
  BOOST_TEST(refused_everywhere);

  const st::train::DeviceChoice a = st::train::choose_device(comm, DeviceRequest::automatic, "eval",
                                                             "--model ncf (recommendation) runs on the CPU only");
  BOOST_TEST((a.device == st::Device::cpu));
  BOOST_TEST(a.log_lines.at(0).rfind("device: cpu (--device auto: ", 0) == 0u, a.log_lines.at(0));
}

namespace {

// A made-up inventory: this rank sees `gpus` (their numbers in a DGX-1's eight), in that order.
st::GpuInventory made_up(const std::vector<int>& gpus, const std::string& name = "Tesla V100-SXM2-16GB",
                         int compute_major = 7) {
  st::GpuInventory inv;
  inv.availability = st::GpuAvailability::visible;
  inv.runtime_version = inv.driver_version = 13000;
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    st::GpuInfo g;
    g.index = static_cast<int>(i);
    g.name = name;
    g.compute_major = compute_major;
    g.memory_bytes = std::size_t{16} << 30;
    g.pci_bus_id = "0000:0" + std::to_string(6 + gpus[i]) + ":00.0";
    if (6 + gpus[i] >= 10) g.pci_bus_id = "0000:" + std::to_string(6 + gpus[i]) + ":00.0";
    g.uuid = "GPU-" + std::to_string(gpus[i]) + "0000000-aaaa-bbbb-cccc-dddddddddddd";
    inv.gpus.push_back(g);
  }
  return inv;
}

}  // namespace

// Every rank of this (one-host) test sees the GPUs of its "socket", as srun --gpu-bind=closest
// leaves them under Slurm's default cyclic distribution: even ranks 0-3, odd ranks 4-7, each as
// ordinals 0-3. The exchange must give each rank its own GPU where there are enough, agree on
// every rank, and print the binding table and the sharing warnings on rank 0's lines.
BOOST_AUTO_TEST_CASE(ranks_share_out_the_gpus_they_see_by_uuid) {
  const st::comm::Communicator comm = st::comm::Communicator::world();
  const std::vector<int> socket = comm.rank() % 2 == 0 ? std::vector<int>{0, 1, 2, 3} : std::vector<int>{4, 5, 6, 7};
  const st::train::DeviceChoice c =
      st::train::choose_device_among(comm, DeviceRequest::automatic, "train", "", made_up(socket));
  BOOST_TEST((c.device == st::Device::cuda));
  // Rank r is the (r / 2)-th on its socket: GPU socket[r / 2], at that ordinal.
  BOOST_TEST(c.gpu_index == (comm.rank() / 2) % 4);
  const std::string mine = c.inventory.gpus.at(static_cast<std::size_t>(c.gpu_index)).uuid;
  const std::vector<std::string> all = comm.allgather(mine);
  BOOST_REQUIRE_EQUAL(c.binding.size(), static_cast<std::size_t>(comm.size()));
  for (int r = 0; r < comm.size(); ++r) BOOST_TEST(c.binding[r].uuid == all[r]);  // every rank's table agrees
  const bool shared = comm.size() > 8;
  bool warned = false, table = false;
  for (const std::string& line : c.log_lines) {
    warned = warned || line.find("share a GPU") != std::string::npos;
    table = table || line.rfind("binding: rank", 0) == 0;
  }
  BOOST_TEST(table);
  BOOST_TEST(warned == shared);
}

// Two ranks that see one GPU share it, and the warning names both.
BOOST_AUTO_TEST_CASE(ranks_that_see_one_gpu_share_it_with_a_warning_naming_them) {
  const st::comm::Communicator comm = st::comm::Communicator::world();
  const st::train::DeviceChoice c =
      st::train::choose_device_among(comm, DeviceRequest::cuda, "train", "", made_up({0}));
  BOOST_TEST(c.gpu_index == 0);
  std::string warning;
  for (const std::string& line : c.log_lines)
    if (line.find("share a GPU") != std::string::npos) warning = line;
  if (comm.size() == 1) {
    BOOST_TEST(warning.empty());
  } else {
    BOOST_TEST(warning.rfind("warning: ranks 0", 0) == 0u, warning);
    BOOST_TEST(warning.find(" and " + std::to_string(comm.size() - 1) + " on host " + comm.host() + " share a GPU") !=
                   std::string::npos,
               warning);
  }
}

// amp-bf16 on a V100 (compute 7.0) is refused on every rank, naming rank 0's GPU; on an A100, on
// the CPU and in amp-fp16 it is not.
BOOST_AUTO_TEST_CASE(amp_bf16_is_refused_on_gpus_without_bf16_tensor_cores) {
  const st::comm::Communicator comm = st::comm::Communicator::world();
  const st::train::DeviceChoice v100 =
      st::train::choose_device_among(comm, DeviceRequest::cuda, "train", "", made_up({0}));
  std::string refusal;
  try {
    st::train::check_gpu_precision(comm, v100, st::Precision::amp_bf16, "train");
  } catch (const st::UsageError& e) {
    refusal = e.what();
  }
  const std::string expected = "train --precision amp-bf16: GPU 0 of rank 0 (host " + comm.host() +
                               "), Tesla V100-SXM2-16GB, compute 7.0, has no bf16 tensor cores (compute 8.0 or "
                               "newer: A100, H100); use --precision amp-fp16";
  BOOST_TEST(refusal == expected);
  st::train::check_gpu_precision(comm, v100, st::Precision::amp_fp16, "train");
  st::train::check_gpu_precision(comm, v100, st::Precision::fp32, "train");
  const st::train::DeviceChoice a100 =
      st::train::choose_device_among(comm, DeviceRequest::cuda, "eval", "", made_up({0}, "NVIDIA A100-SXM4-40GB", 8));
  st::train::check_gpu_precision(comm, a100, st::Precision::amp_bf16, "eval");
  const st::train::DeviceChoice cpu = st::train::choose_device(comm, DeviceRequest::cpu, "train", "");
  st::train::check_gpu_precision(comm, cpu, st::Precision::amp_bf16, "train");
}

BOOST_AUTO_TEST_SUITE_END()
