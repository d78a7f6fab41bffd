// The GPUs this process can see, read through the CUDA runtime: what `--device auto`, the
// start-up lines and the GPU tests ask. No CUDA header here, so every subsystem includes it alike;
// where the CUDA backend is not built, or no driver or GPU is present, the list is empty and says
// why. Nothing here runs before it is called: a binary without a GPU never touches the driver.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace scaletrain {

struct GpuInfo {
  int index = 0;          // CUDA device ordinal (after CUDA_VISIBLE_DEVICES)
  std::string name;       // e.g. "Tesla V100-SXM2-32GB"
  int compute_major = 0;  // compute capability, e.g. 7.0 for V100, 9.0 for H100
  int compute_minor = 0;
  std::size_t memory_bytes = 0;  // total device memory
  int multiprocessors = 0;
  std::string pci_bus_id;  // "0000:3b:00.0": tells the GPUs of one node apart (not MIG instances)
  // "GPU-1c2a5f4e-...", the UUID the CUDA runtime reports: the same GPU whatever its ordinal in a
  // rank's CUDA_VISIBLE_DEVICES; a MIG instance has its own (its bus id is its GPU's).
  std::string uuid;
};

enum class GpuAvailability {
  visible,        // gpus holds at least one GPU
  not_built,      // this binary has no CUDA backend (configured with SCALETRAIN_CUDA=OFF or without CUDA)
  no_driver,      // no NVIDIA driver is loaded (a login node, a CPU-only machine)
  no_device,      // a driver, but no GPU visible (none installed, or CUDA_VISIBLE_DEVICES hides them)
  runtime_error,  // a driver, but CUDA failed otherwise (driver older than the runtime, ...): an error
};

struct GpuInventory {
  GpuAvailability availability = GpuAvailability::not_built;
  std::string message;  // why gpus is empty, in the runtime's words; "" when visible
  std::vector<GpuInfo> gpus;
  int runtime_version = 0;  // the CUDA runtime this binary carries, e.g. 13000 for 13.0; 0 if not built
  int driver_version = 0;   // the newest CUDA version the driver supports, e.g. 13000; 0 without a driver
};

// The visible GPUs; never throws, and needs no GPU.
GpuInventory list_visible_gpus();

// Runs a small kernel on GPU `index` and checks what it wrote: "" when this binary carries code
// the GPU can run, else the reason (e.g. "no kernel image is available for execution on the
// device" for a GPU architecture the build left out). Restores the caller's current device.
std::string run_probe_kernel(int index);

inline const char* gpu_availability_name(GpuAvailability availability) {
  switch (availability) {
    case GpuAvailability::visible:
      return "visible";
    case GpuAvailability::not_built:
      return "not built";
    case GpuAvailability::no_driver:
      return "no driver";
    case GpuAvailability::no_device:
      return "no device";
    case GpuAvailability::runtime_error:
      return "runtime error";
  }
  return "unknown";
}

// "13.0" from 13000 (the encoding of the CUDA runtime's and driver's versions); "none" for 0.
inline std::string cuda_version_string(int version) {
  if (version <= 0) return "none";
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

}  // namespace scaletrain
