// --device's pure parts: the option's values, the GPU of a local rank (modulo the visible GPUs,
// so 8 ranks on a 2-GPU host pair up on them), and the start-up description of a host's GPUs.
#include <boost/test/unit_test.hpp>

#include "scaletrain/config.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/train/device_choice.hpp"

namespace st = scaletrain;
using st::train::DeviceRequest;

BOOST_AUTO_TEST_SUITE(device_choice)

BOOST_AUTO_TEST_CASE(parses_auto_cpu_and_cuda_and_refuses_the_rest_naming_the_choices) {
  BOOST_TEST((st::train::parse_device_request("auto") == DeviceRequest::automatic));
  BOOST_TEST((st::train::parse_device_request("cpu") == DeviceRequest::cpu));
  BOOST_TEST((st::train::parse_device_request("cuda") == DeviceRequest::cuda));
  for (const char* bad : {"gpu", "CUDA", "", "cuda:0"}) {
    try {
      st::train::parse_device_request(bad);
      BOOST_ERROR("accepted --device '" << bad << "'");
    } catch (const st::UsageError& e) {
      BOOST_TEST(std::string(e.what()) ==
                 "--device " + std::string(bad) +
                     ": use auto (a GPU where every rank sees one, else the CPU), cpu or cuda");
    }
  }
  BOOST_TEST(std::string(st::train::device_request_name(DeviceRequest::automatic)) == "auto");
}

BOOST_AUTO_TEST_CASE(describes_each_gpu_and_the_versions) {
  st::GpuInventory inv;
  inv.availability = st::GpuAvailability::visible;
  inv.runtime_version = 12080;
  inv.driver_version = 13000;
  st::GpuInfo g;
  g.index = 1;
  g.name = "Tesla V100-SXM2-32GB";
  g.compute_major = 7;
  g.compute_minor = 0;
  g.memory_bytes = std::size_t{32} << 30;
  g.multiprocessors = 80;
  g.pci_bus_id = "0000:3b:00.0";
  inv.gpus.push_back(g);
  const std::vector<std::string> lines = st::train::describe_gpus(inv);
  BOOST_REQUIRE(lines.size() == 2u);
  BOOST_TEST(lines[0] == "GPU 1: Tesla V100-SXM2-32GB, 32.0 GiB, compute 7.0, 80 SMs (0000:3b:00.0)");
  std::string versions = "driver 13.0, runtime 12.8";
  if (*SCALETRAIN_CUDNN_VERSION) versions += std::string(", cuDNN ") + SCALETRAIN_CUDNN_VERSION;
  if (*SCALETRAIN_NCCL_VERSION) versions += std::string(", NCCL ") + SCALETRAIN_NCCL_VERSION;
  BOOST_TEST(lines[1] == versions);
}

BOOST_AUTO_TEST_SUITE_END()
