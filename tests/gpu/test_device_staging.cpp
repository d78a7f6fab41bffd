// The CUDA DeviceStaging on a real GPU, as the reducers use it: ranges written by work still
// queued on the compute stream (fills and a host copy, many in a row so that the work takes
// longer than nothing) are copied to the pinned mirror only after that work, with no synchronize
// in between; a second thread (as the communication thread) waits for each range, checks and
// changes it and sends it back; after device_ready_for_compute, an op on the compute stream (a
// copy to the host) reads the values sent back, before and after Context::synchronize. Two steps
// reuse the ranges' events. Misuse is refused: a wait for a range never copied out, a range
// outside the buffer, a CPU buffer with a CUDA context.
// A plain main (no Boost.Test), like test_cuda_context. Exit codes: 0 passed, 1 failed, 77 skipped.
#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gpu_check.hpp"
#include "scaletrain/backend/context.hpp"
#include "scaletrain/backend/device_info.hpp"
#include "scaletrain/backend/device_staging.hpp"
#include "scaletrain/core/error.hpp"

namespace st = scaletrain;
using st::gpu_test::check;
using st::gpu_test::contains;
using st::gpu_test::error_of;

namespace {
// Three ranges of a 64 MiB buffer, as three buckets: large enough that a copy which did not wait
// for the compute work before it (or an op that did not wait for the copy back) sees other values.
constexpr int64_t kSize = (int64_t{16} << 20) + 3;
struct Range {
  int64_t offset, count;
};
const std::vector<Range> kRanges = {{0, 1000}, {1000, (int64_t{8} << 20)}, {1000 + (int64_t{8} << 20), 0}};

Range range(int k) {
  Range r = kRanges[k];
  if (k == 2) r.count = kSize - r.offset;
  return r;
}

// What a step writes on the device (element i of range k) and what the host sends back.
float device_value(int step, int k, int64_t i) {
  return k == 2 ? static_cast<float>(i % 1024) + step : static_cast<float>(k + 1) * (step + 1.5f);
}
float host_value(int step, int k, int64_t i) { return 2.0f * device_value(step, k, i) + 1.0f; }

void check_round_trips(st::Context& ctx) {
  st::Tensor dev = st::Tensor::zeros({kSize}, st::DType::f32, st::Device::cuda);
  auto staging = st::DeviceStaging::create(ctx, dev);
  check(staging->device() == st::Device::cuda && staging->size() == kSize, "a cuda staging of the buffer's size");
  ctx.synchronize();
  st::Tensor pattern = st::Tensor::empty({range(2).count});
  for (int step = 0; step < 2; ++step) {
    for (int64_t i = 0; i < pattern.numel(); ++i) pattern.data<float>()[i] = device_value(step, 2, i);
    // The backward stand-in: queued on the compute stream, range by range, each range announced
    // right after its writes are queued; nothing waits for the device here.
    for (int k = 0; k < 3; ++k) {
      const Range r = range(k);
      st::Tensor view = st::Tensor::view_of(dev, r.offset, {r.count});
      for (int rep = 0; rep < 20; ++rep) view.fill(-1.0f - rep);  // overwritten below: only order makes it right
      if (k == 2)
        view.copy_from(pattern);
      else
        view.fill(device_value(step, k, 0));
      staging->copy_to_host_after_compute(r.offset, r.count);
    }
    // The communication thread: waits for each range, checks it, writes the result, sends it back.
    std::vector<int64_t> wrong(3, 0);
    std::exception_ptr error;
    std::thread comm([&] {
      try {
        for (int k = 0; k < 3; ++k) {
          const Range r = range(k);
          staging->wait_host(r.offset, r.count);
          float* h = staging->host() + r.offset;
          for (int64_t i = 0; i < r.count; ++i) {
            wrong[k] += h[i] != device_value(step, k, i);
            h[i] = host_value(step, k, i);
          }
          staging->copy_to_device(r.offset, r.count);
        }
      } catch (...) {
        error = std::current_exception();
      }
    });
    comm.join();
    if (error) std::rethrow_exception(error);
    for (int k = 0; k < 3; ++k)
      check(wrong[k] == 0, "step " + std::to_string(step) + ", range " + std::to_string(k) +
                               ": the host mirror holds " + "the values written before the copy (" +
                               std::to_string(wrong[k]) + " wrong)");
    staging->device_ready_for_compute();
    // to(cpu) runs on the compute stream and waits for it alone: it sees the copies back only
    // because the compute stream was ordered after them.
    for (int pass = 0; pass < 2; ++pass) {
      const st::Tensor back = dev.to(st::Device::cpu);
      int64_t bad = 0;
      for (int k = 0; k < 3; ++k) {
        const Range r = range(k);
        for (int64_t i = 0; i < r.count; ++i) bad += back.data<float>()[r.offset + i] != host_value(step, k, i);
      }
      check(bad == 0, "step " + std::to_string(step) + ": the compute stream reads what the host sent back" +
                          (pass == 0 ? "" : " (after synchronize)") + " (" + std::to_string(bad) + " wrong)");
      ctx.synchronize();
    }
  }
  bool counted = true;
  for (int k = 0; k < 3; ++k) {
    const st::DeviceStaging::Copies c = staging->copies(range(k).offset);
    counted = counted && c.to_host == 2 && c.to_device == 2;
  }
  check(counted, "each range copied out and back once per step");
}

void check_refusals(st::Context& ctx) {
  st::Tensor dev = st::Tensor::zeros({100}, st::DType::f32, st::Device::cuda);
  auto staging = st::DeviceStaging::create(ctx, dev);
  check(contains(error_of([&] { staging->wait_host(0, 10); }), "never copied"), "a wait for a range never copied out");
  staging->copy_to_host_after_compute(0, 10);
  check(contains(error_of([&] { staging->wait_host(0, 11); }), "never copied"), "a wait for another range");
  staging->wait_host(0, 10);
  check(contains(error_of([&] { staging->copy_to_host_after_compute(0, 11); }), "ranges are fixed"),
        "a range at a known start keeps its count");
  check(contains(error_of([&] { staging->copy_to_device(95, 6); }), "outside"), "a range outside the buffer");
  st::Tensor host_buffer = st::Tensor::zeros({4});
  check(contains(error_of([&] { st::DeviceStaging::create(ctx, host_buffer); }), "cpu buffer with a cuda context"),
        "a CPU buffer with a CUDA context");
  ctx.synchronize();
}
}  // namespace

int main() {
  return st::gpu_test::run_gpu_checks([](st::Context& ctx, const st::GpuInventory&) {
    check_round_trips(ctx);
    check_refusals(ctx);
  });
}
