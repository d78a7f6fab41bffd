// What a run measures of its GPU, on a real GPU: the event timer's GPU time of a known workload
// (fills of a 1 GiB tensor) is positive, no more than the host saw around it, and adds up over
// intervals; an unmarked slot stays 0; NVML's energy counter grows over that work (or says why
// it cannot be read); NVTX ranges run; an input batch copied on the copy stream (--input-copy
// overlap) runs beside compute where the inline copy waits for it; and running out of memory
// throws OutOfDeviceMemory.
// A plain main (no Boost.Test), like test_cuda_context. Exit codes: 0 passed, 1 failed, 77 skipped.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "gpu_check.hpp"
#include "scaletrain/backend/batch_upload.hpp"
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

// Seconds the host waits for `work` queued on the GPU, after the GPU is idle.
template <typename Work>
double timed(st::Context& ctx, Work work) {
  ctx.synchronize();
  const auto start = std::chrono::steady_clock::now();
  work();
  ctx.synchronize();
  return seconds_since(start);
}

// --input-copy overlap's BatchUpload (issue 26, section 4): a batch copied from pinned memory on
// the copy stream runs beside compute work queued before it, where the same copy on the compute
// stream (Tensor::copy_from, --input-copy inline) waits for it. Fills of 1 GiB (memory-bound
// kernels) are matched to the copy's time; together they must take well under the sum of their
// times alone, and the inline control about the sum (so the check can fail). The copied bytes
// then read on the compute stream after compute_after_copies are the batch's.
void check_input_copy_overlap(st::Context& ctx, st::Tensor& big) {
  const int64_t bytes = int64_t{256} << 20;
  st::Tensor pinned = st::Tensor::empty_pinned({bytes}, st::DType::u8);
  for (int64_t i = 0; i < bytes; i += 4096) pinned.data<uint8_t>()[i] = static_cast<uint8_t>(i / 4096);
  st::Tensor device = st::Tensor::empty({bytes}, st::DType::u8, st::Device::cuda);
  std::unique_ptr<st::BatchUpload> upload = st::BatchUpload::create(ctx, 2);
  auto copy_ahead = [&] {
    upload->begin(0, false);
    upload->copy(pinned, device);
    upload->end(0);
    upload->wait_copied(0);
  };
  timed(ctx, copy_ahead);  // warm-up
  fill_many(big, 2);
  const double copy_s = timed(ctx, copy_ahead);
  const double fill_s = timed(ctx, [&] { fill_many(big, 4); }) / 4;
  const int fills = std::max(1, static_cast<int>(copy_s / std::max(fill_s, 1e-6) + 0.5));
  const double compute_s = timed(ctx, [&] { fill_many(big, fills); });
  const double both_s = timed(ctx, [&] {
    fill_many(big, fills);
    copy_ahead();
  });
  const double inline_s = timed(ctx, [&] {
    fill_many(big, fills);
    device.copy_from(pinned);
  });
  std::printf("      256 MiB input copy %.4f s, %d fills %.4f s; together: copy stream %.4f s, compute stream %.4f s\n",
              copy_s, fills, compute_s, both_s, inline_s);
  const double sum = copy_s + compute_s;
  check(inline_s > 0.85 * sum, "the control: the copy on the compute stream waits for the fills (about the sum)");
  check(both_s < 0.8 * sum, "the copy on the copy stream runs beside the fills (well under the sum)");
  // Ordered: the compute stream reads the batch only after its copy.
  for (int64_t i = 0; i < bytes; i += 4096) pinned.data<uint8_t>()[i] = static_cast<uint8_t>(i / 4096 + 1);
  fill_many(big, fills);
  upload->begin(1, true);
  upload->copy(pinned, device);
  upload->end(1);
  upload->compute_after_copies(1);
  const st::Tensor back = device.to(st::Device::cpu);
  upload->compute_done_with(1);
  bool same = true;
  for (int64_t i = 0; i < bytes && same; i += 4096) same = back.data<uint8_t>()[i] == pinned.data<uint8_t>()[i];
  check(same, "compute work after compute_after_copies reads the copied batch");
  check(upload->counts().copies == 4 && upload->counts().serialized == 1, "the upload counts its copies");
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
    check_input_copy_overlap(ctx, big);
    check_out_of_memory();
  });
}
