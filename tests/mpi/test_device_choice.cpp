// --device decided by all ranks together: local ranks from the host names, and on a machine
// without a GPU (this one, or any CI machine) cuda refused on every rank alike and auto on the CPU.
// With a GPU, the same holds for a run whose options keep it on the CPU (the reason passed in).
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

BOOST_AUTO_TEST_SUITE_END()
