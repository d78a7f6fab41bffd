// Every op case of tests/support/op_cases.cpp on the GPU against the CPU: same seeded inputs,
// every output (forward and every backward) within the backend tolerance written in the case.
// One line per case and output with the largest absolute and relative differences.
//
//   scaletrain_gpu_backend_ops [--against-cpu-only] [--precision P]... [--case TEXT] [--list]
//     --against-cpu-only  runs the cases on a second CPU Context instead of the GPU: proves the
//                         harness and its comparisons on a machine without one (ctest
//                         unit.backend_ops_harness). ST_BACKEND_OPS_AGAINST_CPU=1 does the same.
//     --precision P       fp32 (default), amp-fp16 or amp-bf16 (repeatable: each in turn). In a
//                         mixed precision both contexts run in it, the float inputs rounded to
//                         its format first, and the GPU's AMP is compared with the CPU's AMP
//                         (docs/mixed-precision.md): the backend tolerance plus kAmpBackendUnits
//                         units of the format at the output's largest magnitude.
//     --case TEXT         only the cases whose name contains TEXT (repeatable).
//     --list              prints the case names and exits.
// Exit codes: 0 passed, 1 failed (the failures are named at the end), 2 bad arguments,
// 77 skipped (no GPU visible; ctest's SKIP_RETURN_CODE). A driver whose CUDA fails is a failure,
// not a skip.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "gpu_check.hpp"
#include "scaletrain/backend/context.hpp"
#include "scaletrain/backend/device_info.hpp"
#include "scaletrain/ops/registry.hpp"
#include "support/op_cases.hpp"

namespace st = scaletrain;

namespace {

struct Options {
  bool against_cpu_only = false;
  bool list = false;
  std::vector<std::string> filters;
  std::vector<st::Precision> precisions;
};

bool parse_precision(const std::string& text, st::Precision& out) {
  for (st::Precision p : {st::Precision::fp32, st::Precision::amp_fp16, st::Precision::amp_bf16})
    if (text == st::precision_name(p)) {
      out = p;
      return true;
    }
  return false;
}

bool selected(const Options& options, const std::string& name) {
  if (options.filters.empty()) return true;
  for (const std::string& f : options.filters)
    if (name.find(f) != std::string::npos) return true;
  return false;
}

// Runs one case on `ctx` and on the CPU (both in the same precision), prints a line per output;
// returns the names of the failed outputs (or the error that stopped the case).
std::vector<std::string> run_case(const st::test::OpCase& c, st::Context& device, st::Context& cpu) {
  std::vector<std::string> failed;
  st::test::NamedTensors inputs, on_cpu, on_device;
  const std::string name =
      c.name +
      (cpu.precision() == st::Precision::fp32 ? "" : std::string(" in ") + st::precision_name(cpu.precision()));
  try {
    inputs = c.make_inputs();
    st::test::round_inputs_to(cpu.precision(), inputs);
    on_cpu = c.run(cpu, inputs);
  } catch (const std::exception& e) {
    std::printf("FAIL %s | the CPU run threw: %s\n", name.c_str(), e.what());
    return {name + " (CPU: " + e.what() + ")"};
  }
  try {
    on_device = c.run(device, inputs);
  } catch (const std::exception& e) {
    // An op without a kernel for the device says so here ("no kernel for device cuda").
    std::printf("FAIL %s | %s threw: %s\n", name.c_str(), st::device_name(device.device()), e.what());
    return {name + " (" + e.what() + ")"};
  }
  for (const st::test::OutputCheck& check :
       st::test::compare_backends(c, on_device, on_cpu, st::test::amp_unit_of(cpu.precision()))) {
    std::printf("%s %s | %s\n", check.ok ? "ok  " : "FAIL", name.c_str(), st::test::describe(check).c_str());
    if (!check.ok) failed.push_back(name + " | " + check.output);
  }
  return failed;
}

// Why amp-bf16 is not run on this GPU (empty: it is): below compute capability 8.0 there are no
// bf16 tensor cores, and train and eval refuse the precision there (train::check_gpu_precision).
std::string bf16_refusal(const st::GpuInfo& gpu) {
  if (gpu.compute_major >= 8) return "";
  return gpu.name + " (compute " + std::to_string(gpu.compute_major) + "." + std::to_string(gpu.compute_minor) +
         ") has no bf16 tensor cores; train and eval refuse amp-bf16 there";
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  const char* env = std::getenv("ST_BACKEND_OPS_AGAINST_CPU");
  options.against_cpu_only = env != nullptr && std::strcmp(env, "1") == 0;
  st::Precision precision = st::Precision::fp32;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--against-cpu-only") {
      options.against_cpu_only = true;
    } else if (arg == "--list") {
      options.list = true;
    } else if (arg == "--case" && i + 1 < argc) {
      options.filters.push_back(argv[++i]);
    } else if (arg == "--precision" && i + 1 < argc && parse_precision(argv[i + 1], precision)) {
      options.precisions.push_back(precision);
      ++i;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--against-cpu-only] [--precision fp32|amp-fp16|amp-bf16]... [--case TEXT]... "
                   "[--list]\n",
                   argv[0]);
      return 2;
    }
  }
  if (options.precisions.empty()) options.precisions.push_back(st::Precision::fp32);
  const auto& cases = st::test::op_cases();
  if (options.list) {
    for (const auto& c : cases)
      if (selected(options, c.name)) std::printf("%s\n", c.name.c_str());
    return 0;
  }

  try {
    st::Context cpu(st::Device::cpu);
    std::unique_ptr<st::Context> device;
    std::string bf16_refused_why;  // non-empty: the GPU has no bf16 tensor cores
    if (options.against_cpu_only) {
      std::printf("backend ops: a second CPU Context against the CPU (--against-cpu-only)\n");
      device = std::make_unique<st::Context>(st::Device::cpu);
    } else {
      const st::GpuInventory inventory = st::list_visible_gpus();
      if (st::gpu_test::nothing_to_test(inventory)) return st::gpu_test::kSkipped;
      if (inventory.availability != st::GpuAvailability::visible) return st::gpu_test::fail_broken_gpu(inventory);
      std::printf("backend ops: GPU 0 (%s) against the CPU\n", inventory.gpus.at(0).name.c_str());
      device = std::make_unique<st::Context>(st::Device::cuda, 0, 0);
      bf16_refused_why = bf16_refusal(inventory.gpus.at(0));
    }

    const auto start = std::chrono::steady_clock::now();
    std::vector<std::string> failures;
    std::set<std::string> exercised;  // the ops of the cases run on the device
    int run = 0, skipped = 0;
    for (st::Precision p : options.precisions) {
      if (p == st::Precision::amp_bf16 && !bf16_refused_why.empty()) {
        std::printf("skip amp-bf16 | %s\n", bf16_refused_why.c_str());
        continue;
      }
      cpu.set_precision(p);
      device->set_precision(p);
      const std::string in = p == st::Precision::fp32 ? "" : std::string(" in ") + st::precision_name(p);
      if (p != st::Precision::fp32)
        std::printf("precision %s: both sides in it, inputs rounded to its format, %g units of it allowed more\n",
                    st::precision_name(p), st::test::kAmpBackendUnits);
      for (const auto& c : cases) {
        if (!selected(options, c.name)) continue;
        // A case whose ops lack a kernel on the device (the registry says so) has nothing to compare.
        std::vector<std::string> missing = st::ops::unsupported_ops(c.ops, device->device(), p);
        if (!missing.empty()) {
          std::printf("skip %s%s | no %s kernel%s for %s\n", c.name.c_str(), in.c_str(),
                      st::device_name(device->device()), in.c_str(), st::ops::op_list(missing).c_str());
          ++skipped;
          continue;
        }
        if (!c.cpu_only.empty() && device->device() != st::Device::cpu) {
          std::printf("skip %s%s | CPU only: %s\n", c.name.c_str(), in.c_str(), c.cpu_only.c_str());
          ++skipped;
          continue;
        }
        ++run;
        exercised.insert(c.ops.begin(), c.ops.end());
        for (std::string& f : run_case(c, *device, cpu)) failures.push_back(std::move(f));
      }
    }
    // Every kernel the device has is exercised by some case (not with --case filters).
    if (options.filters.empty())
      for (const st::ops::OpInfo& op : st::ops::registered_ops())
        if (op.kernel[st::ops::device_index(device->device())] && !exercised.count(op.name)) {
          std::printf("FAIL %s has a %s kernel that no case exercises\n", op.name.c_str(),
                      st::device_name(device->device()));
          failures.push_back(op.name + " (no case)");
        }
    if (skipped > 0)
      std::printf("%d case(s) skipped: their ops have no kernel on this device, or the case is CPU only\n", skipped);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (run == 0) {
      std::printf("FAILED: no case matches the --case filters\n");
      return 1;
    }
    for (const std::string& f : failures) std::printf("failed: %s\n", f.c_str());
    std::printf("%s: %d case(s) in %.1f s, %zu failure(s)\n", failures.empty() ? "PASSED" : "FAILED", run, seconds,
                failures.size());
    return failures.empty() ? 0 : 1;
  } catch (const std::exception& e) {
    std::printf("FAILED: %s\n", e.what());
    return 1;
  }
}
