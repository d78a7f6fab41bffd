// Shared by the GPU test programs (plain mains, no Boost.Test, so that they run on a GPU machine
// with only the bundle's libraries): a check that prints "ok"/"FAIL" and counts, the message of
// the scaletrain::Error a call throws, and the frame every program runs its checks in: skip with
// exit 77 ("SKIP: no GPU visible (...)") where no GPU is visible, a CUDA Context on GPU 0, any
// exception a failure, "PASS"/"FAIL" and the exit code.
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

// Runs `checks` on a CUDA Context on GPU 0, or skips where no GPU is visible. Returns main's code.
inline int run_gpu_checks(const std::function<void(Context&, const GpuInventory&)>& checks) {
  const GpuInventory inventory = list_visible_gpus();
  if (inventory.availability != GpuAvailability::visible) {
    std::printf("SKIP: no GPU visible (%s: %s)\n", gpu_availability_name(inventory.availability),
                inventory.message.c_str());
    return kSkipped;
  }
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
