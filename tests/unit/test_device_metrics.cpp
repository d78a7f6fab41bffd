// What a run measures of its device, on the CPU and without a GPU: the event timer measures
// nothing on a CPU context, NVTX ranges cost nothing, the NVML energy meter says why it cannot
// read (no GPU, no library), and running out of device memory is its own error type whose
// message names the memory and, from training, the batch size. tests/gpu/ checks them on a GPU.
#include <boost/test/unit_test.hpp>

#include "scaletrain/backend/context.hpp"
#include "scaletrain/backend/device_timer.hpp"
#include "scaletrain/backend/gpu_energy.hpp"
#include "scaletrain/backend/nvtx.hpp"
#include "scaletrain/core/out_of_memory.hpp"
#include "scaletrain/train/device_metrics.hpp"

namespace st = scaletrain;

BOOST_AUTO_TEST_SUITE(device_metrics)

BOOST_AUTO_TEST_CASE(the_event_timer_measures_nothing_on_the_cpu) {
  st::Context ctx(st::Device::cpu, 1);
  st::DeviceEventTimer timer(ctx, 3);
  BOOST_TEST(!timer.enabled());
  timer.begin(0);
  timer.end(0);
  timer.begin(7);  // out of range: ignored, like every mark here
  timer.end(7);
  BOOST_TEST((timer.collect() == std::vector<double>{0.0, 0.0, 0.0}));
}

BOOST_AUTO_TEST_CASE(nvtx_ranges_nest_and_cost_nothing_without_a_profiler) {
  const st::NvtxRange outer("forward");
  { const st::NvtxRange inner("backward"); }
  st::nvtx_push("optimizer");
  st::nvtx_pop();
}

BOOST_AUTO_TEST_CASE(the_energy_meter_says_why_it_cannot_read) {
  st::GpuEnergyMeter cpu("");
  BOOST_TEST(!cpu.available());
  BOOST_TEST(cpu.reason() == "no GPU (this rank computes on the CPU)");
  BOOST_TEST(cpu.joules() == -1.0);

  st::GpuEnergyMeter no_library("0000:3b:00.0", "libnvidia-ml-not-here.so.1");
  BOOST_TEST(!no_library.available());
  BOOST_TEST(no_library.reason() == "libnvidia-ml-not-here.so.1 not found (it comes with the NVIDIA driver)");
  BOOST_TEST(no_library.joules() == -1.0);

  // The real library: on this machine absent, or present without this GPU; either way a reason.
  st::GpuEnergyMeter nowhere("00ff:ff:1f.0");
  BOOST_TEST(!nowhere.available());
  BOOST_TEST(!nowhere.reason().empty());
}

BOOST_AUTO_TEST_CASE(a_cpu_run_reports_its_kind_and_host_tensor_memory) {
  st::Context ctx(st::Device::cpu, 1);
  const st::Tensor held = st::Tensor::empty({1 << 18});  // 1 MiB in use while the figures are read
  st::train::DeviceMetrics metrics(ctx, st::train::DeviceChoice{});
  metrics.begin(st::report::Phase::forward);
  metrics.end(st::report::Phase::forward);
  metrics.end_step();
  st::report::TrainSummary summary;
  metrics.fill(summary);
  BOOST_TEST(summary.device_kind == "cpu");
  BOOST_TEST(summary.gpu_timers == nullptr);
  BOOST_TEST(summary.gpu.is_null());
  BOOST_TEST(summary.peak_in_use_bytes >= int64_t{1} << 20);
  BOOST_TEST(summary.peak_in_use_bytes == static_cast<int64_t>(st::host_tensor_memory_stats().peak_in_use_bytes));
  BOOST_TEST(summary.peak_memory_bytes == summary.peak_in_use_bytes);
}

BOOST_AUTO_TEST_CASE(out_of_device_memory_names_the_memory_and_the_batch_size) {
  const std::string m = st::out_of_device_memory_message(1, std::size_t{3} << 29, std::size_t{1} << 20,
                                                         std::size_t{80} << 30, std::size_t{79} << 30);
  BOOST_TEST(m ==
             "out of GPU memory on GPU 1: asked for 1536.0 MiB; 1.0 MiB free of 81920.0 MiB, 80896.0 MiB in use by "
             "this rank's tensors");
  try {
    st::detail::throw_out_of_device_memory("src/backend/cuda/device_state.cpp", 42, m);
    BOOST_ERROR("did not throw");
  } catch (const st::OutOfDeviceMemory& e) {
    const std::string what = e.what();
    BOOST_TEST(what.find(m + " (at device_state.cpp:42)") != std::string::npos, what);
    const std::string told = st::out_of_memory_at_batch_size(what, 256);
    const std::string at = " (at device_state.cpp:42)";
    BOOST_TEST(told == what.substr(0, what.size() - at.size()) +
                           "; at --batch-size 256 per rank: lower --batch-size (a step's activations grow with it)" +
                           at,
               told);
  }
  // Caught as any other error by code that does not care which.
  BOOST_CHECK_THROW(st::detail::throw_out_of_device_memory(__FILE__, __LINE__, m), st::Error);
}

BOOST_AUTO_TEST_SUITE_END()
