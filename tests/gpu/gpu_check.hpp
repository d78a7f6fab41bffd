// Shared by the GPU test programs (plain mains, no Boost.Test, so that they run on a GPU machine
// with only the bundle's libraries): a check that prints "ok"/"FAIL" and counts, the message of
// the scaletrain::Error a call throws, and the frame every program runs its checks in: skip with
// exit 77 ("SKIP: no GPU visible (...)") where no GPU is visible, fail where a driver is there but
// CUDA fails, a CUDA Context on GPU 0, any exception a failure, "PASS"/"FAIL" and the exit code.
#pragma once

#include <cstdio>
#include <exception>
#include <functional>
#include <string>

#include "scaletrain/backend/context.hpp"
#include "scaletrain/backend/device_info.hpp"
#include "scaletrain/core/error.hpp"

namespace scaletrain::gpu_test {

constexpr int kSkipped = 77;  // ctest's SKIP_RETURN_CODE for the gpu tests

inline int& failures() {
  static int count = 0;
  return count;
}

inline void check(bool ok, const std::string& what) {
  std::printf("%s: %s\n", ok ? "ok  " : "FAIL", what.c_str());
  if (!ok) ++failures();
}

// The message of the scaletrain::Error f throws, or "".
template <typename F>
std::string error_of(F f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

inline bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Whether a test has nothing to run on: no CUDA backend built, no driver, or no GPU visible. A
// driver whose CUDA fails otherwise (runtime_error: a driver older than the runtime, a broken
// device) is not a reason to skip: the machine has a GPU, and a test that skipped there would
// hide the failure. Prints the SKIP line where it returns true.
inline bool nothing_to_test(const GpuInventory& inventory) {
  switch (inventory.availability) {
    case GpuAvailability::visible:
    case GpuAvailability::runtime_error:
      return false;
    case GpuAvailability::not_built:
    case GpuAvailability::no_driver:
    case GpuAvailability::no_device:
      break;
  }
  std::printf("SKIP: no GPU visible (%s: %s)\n", gpu_availability_name(inventory.availability),
              inventory.message.c_str());
  return true;
}

// The FAIL line of a GPU that is there but does not work; main's code.
inline int fail_broken_gpu(const GpuInventory& inventory) {
  std::printf("FAIL: a driver is present but CUDA fails (%s): %s\n", gpu_availability_name(inventory.availability),
              inventory.message.c_str());
  return 1;
}

// Runs `checks` on a CUDA Context on GPU 0; skips where there is no GPU to test (nothing_to_test)
// and fails where one is there but CUDA fails. Returns main's code.
inline int run_gpu_checks(const std::function<void(Context&, const GpuInventory&)>& checks) {
  const GpuInventory inventory = list_visible_gpus();
  if (nothing_to_test(inventory)) return kSkipped;
  if (inventory.availability != GpuAvailability::visible) return fail_broken_gpu(inventory);
  try {
    Context ctx(Device::cuda, 0, 0);
    checks(ctx, inventory);
  } catch (const std::exception& e) {
    std::printf("FAIL: %s\n", e.what());
    ++failures();
  }
  std::printf("%s: %d failure(s)\n", failures() == 0 ? "PASS" : "FAIL", failures());
  return failures() == 0 ? 0 : 1;
}

}  // namespace scaletrain::gpu_test
