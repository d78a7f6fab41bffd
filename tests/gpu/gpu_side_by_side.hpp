// Shared by the GPU programs that time ways of running ops side by side against the CPU's op
// (test_conv_engines.cpp, test_conv_bn_fusion.cpp): seeded inputs as the ops before would have
// stored them, the median GPU time of a few runs, and the frame that runs the same program with
// a CPU Context in the GPU's place (the dry run ctest's unit.*_harness checks on every machine).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "gpu_check.hpp"
#include "scaletrain/backend/context.hpp"
#include "scaletrain/backend/device_info.hpp"
#include "scaletrain/backend/device_timer.hpp"
#include "scaletrain/core/half.hpp"
#include "scaletrain/core/rng.hpp"

namespace scaletrain::gpu_test {

// Seeded values in [lo, hi) on the CPU, rounded to the precision's 16-bit format (what the ops
// before would have stored, as the op cases' round_inputs_to does).
inline Tensor seeded_values(const Shape& shape, uint64_t seed, double lo, double hi, Precision precision) {
  Rng rng(seed);
  Tensor t = Tensor::empty(shape, DType::f32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(lo + (hi - lo) * rng.uniform());
  if (auto format = storage_format(precision)) round_in_place(*format, t.data<float>(), t.numel());
  return t;
}

// The median time of `runs` calls of f in ms: CUDA events around each on a GPU, the host's clock
// on the CPU.
template <typename F>
double median_ms(Context& ctx, int runs, F f) {
  DeviceEventTimer timer(ctx, 1);
  std::vector<double> ms;
  for (int r = 0; r < runs; ++r) {
    const auto start = std::chrono::steady_clock::now();
    timer.begin(0);
    f();
    timer.end(0);
    ctx.synchronize();
    const double host_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    const std::vector<double> seconds = timer.collect();
    ms.push_back(timer.enabled() ? seconds.at(0) * 1e3 : host_ms);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// main's end: with `cpu`, run(ctx, 0) on a CPU Context (the dry run; the caller made it small);
// else run(ctx, compute major) on GPU 0 after the line "<title>: GPU 0 (<name>) <detail>", or a
// skip where no GPU is visible. Prints PASS or FAIL; returns main's code.
inline int run_dry_or_on_gpu(bool cpu, const std::string& title, const std::string& detail,
                             const std::function<void(Context&, int compute_major)>& run) {
  if (cpu) {
    try {
      Context dev(Device::cpu);
      run(dev, 0);
    } catch (const std::exception& e) {
      std::printf("FAIL: %s\n", e.what());
      return 1;
    }
    std::printf("%s\n", failures() == 0 ? "PASS" : "FAIL");
    return failures() == 0 ? 0 : 1;
  }
  return run_gpu_checks([&](Context& ctx, const GpuInventory& inventory) {
    std::printf("%s: GPU 0 (%s) %s\n", title.c_str(), inventory.gpus.at(0).name.c_str(), detail.c_str());
    run(ctx, inventory.gpus.at(0).compute_major);
  });
}

}  // namespace scaletrain::gpu_test
