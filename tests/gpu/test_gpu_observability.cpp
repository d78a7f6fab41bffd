// What a run measures of its GPU, on a real GPU: the event timer's GPU time of a known workload
// (fills of a 1 GiB tensor) is positive, no more than the host saw around it, and adds up over
// intervals; an unmarked slot stays 0; NVML's energy counter grows over that work (or says why
// it cannot be read); NVTX ranges run; and running out of memory throws OutOfDeviceMemory.
// A plain main (no Boost.Test), like test_cuda_context. Exit codes: 0 passed, 1 failed, 77 skipped.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "gpu_check.hpp"
#include "scaletrain/backend/context.hpp"
#include "scaletrain/backend/device_info.hpp"
#include "scaletrain/backend/device_timer.hpp"
#include "scaletrain/backend/gpu_energy.hpp"
#include "scaletrain/backend/nvtx.hpp"
#include "scaletrain/core/out_of_memory.hpp"

namespace st = scaletrain;
using st::gpu_test::check;
using st::gpu_test::contains;
using st::gpu_test::error_of;

namespace {
double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void fill_many(st::Tensor& t, int times) {
  for (int i = 0; i < times; ++i) t.fill(static_cast<float>(i));
}

void check_event_timer(st::Context& ctx, st::Tensor& big) {
  st::DeviceEventTimer timer(ctx, 3);
  check(timer.enabled(), "the event timer is on for a CUDA context");
  fill_many(big, 2);  // warm-up: the fill kernel's module loads at its first launch, not in the intervals
  ctx.synchronize();
  const auto start = std::chrono::steady_clock::now();
  const st::NvtxRange range("fills");
  timer.begin(0);
  fill_many(big, 20);
  timer.end(0);
  timer.begin(2);
  fill_many(big, 20);
  timer.end(2);
  ctx.synchronize();
  const double host = seconds_since(start);
  const std::vector<double> gpu = timer.collect();
  std::printf("      20 fills of 1 GiB: GPU %.4f s and %.4f s, host %.4f s for both\n", gpu[0], gpu[2], host);
  check(gpu[0] > 0 && gpu[2] > 0, "the GPU time of a 1 GiB fill loop is positive");
  check(gpu[0] + gpu[2] <= host + 1e-3, "the GPU time is no more than the host saw around it");
  check(gpu[1] == 0.0, "an unmarked slot stays 0");
  // Two intervals in one slot add up; a collect starts afresh.
  timer.begin(0);
  fill_many(big, 20);
  timer.end(0);
  timer.begin(0);
  fill_many(big, 20);
  timer.end(0);
  ctx.synchronize();
  const std::vector<double> twice = timer.collect();
  std::printf("      two intervals of 20 fills: %.4f s\n", twice[0]);
  check(twice[0] > 1.5 * gpu[0] && twice[0] < 2.5 * gpu[0], "two intervals of one slot add up");
  check(timer.collect()[0] == 0.0, "collect starts afresh");
}

void check_energy(st::Context& ctx, st::Tensor& big, const std::string& pci_bus_id) {
  st::GpuEnergyMeter meter(pci_bus_id);
  if (!meter.available()) {
    std::printf("      NVML: %s\n", meter.reason().c_str());
    check(!meter.reason().empty() && meter.joules() == -1.0, "an energy meter NVML cannot read says why");
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  while (seconds_since(start) < 2.0) {
    fill_many(big, 20);
    ctx.synchronize();
  }
  const double joules = meter.joules();
  std::printf("      NVML: %.1f J over 2 s of fills (%s)\n", joules, pci_bus_id.c_str());
  check(joules > 0, "the GPU's energy grows over 2 s of work");
}

void check_out_of_memory() {
  bool typed = false;
  try {
    st::Tensor::empty({int64_t{1} << 40}, st::DType::f32, st::Device::cuda);
  } catch (const st::OutOfDeviceMemory& e) {
    typed = std::string(e.what()).find("out of GPU memory") != std::string::npos;
  } catch (const std::exception&) {
  }
  check(typed, "4 TiB throws OutOfDeviceMemory");
}
}  // namespace

int main() {
  return st::gpu_test::run_gpu_checks([](st::Context& ctx, const st::GpuInventory& inventory) {
    st::Tensor big = st::Tensor::empty({int64_t{1} << 28}, st::DType::f32, st::Device::cuda);
    check_event_timer(ctx, big);
    check_energy(ctx, big, inventory.gpus.at(0).pci_bus_id);
    check_out_of_memory();
  });
}
