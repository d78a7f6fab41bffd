// GPU energy through NVML loaded at run time (gpu_energy.hpp). The few NVML functions used are
// declared here with NVML's own C signatures, so no NVML header or library is needed to build.
#include "scaletrain/backend/gpu_energy.hpp"

#include <dlfcn.h>

#include <type_traits>

namespace scaletrain {
namespace {
using NvmlReturn = int;  // nvmlReturn_t: 0 is NVML_SUCCESS
using NvmlDevice = struct NvmlDeviceOpaque*;
constexpr NvmlReturn kNvmlSuccess = 0;
constexpr NvmlReturn kNvmlNotSupported = 3;
}  // namespace

struct GpuEnergyMeter::Nvml {
  void* library = nullptr;
  bool initialised = false;
  NvmlDevice device = nullptr;
  NvmlReturn (*init)() = nullptr;
  NvmlReturn (*shutdown)() = nullptr;
  NvmlReturn (*handle_by_pci_bus_id)(const char*, NvmlDevice*) = nullptr;
  NvmlReturn (*total_energy)(NvmlDevice, unsigned long long*) = nullptr;
  const char* (*error_string)(NvmlReturn) = nullptr;

  ~Nvml() {
    if (initialised) shutdown();
    if (library != nullptr) dlclose(library);
  }
  std::string message(const char* call, NvmlReturn status) const {
    const char* text = error_string != nullptr ? error_string(status) : nullptr;
    return std::string(call) + " failed: " + (text != nullptr ? text : "error " + std::to_string(status));
  }
  // The energy counter, or the reason it cannot be read.
  std::string read(unsigned long long& millijoules) const {
    const NvmlReturn status = total_energy(device, &millijoules);
    if (status == kNvmlNotSupported) return "not supported on this GPU (NVML's energy counter needs Volta or newer)";
    return status == kNvmlSuccess ? "" : message("nvmlDeviceGetTotalEnergyConsumption", status);
  }
};

GpuEnergyMeter::GpuEnergyMeter(const std::string& pci_bus_id, const std::string& library) {
  if (pci_bus_id.empty()) {
    reason_ = "no GPU (this rank computes on the CPU)";
    return;
  }
  auto nvml = std::make_unique<Nvml>();
  nvml->library = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (nvml->library == nullptr) {
    reason_ = library + " not found (it comes with the NVIDIA driver)";
    return;
  }
  // dlsym gives a data pointer; POSIX guarantees it converts to the function's type.
  std::string missing;  // the first function the library lacks
  const auto symbol = [&](const char* name, auto& fn) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(nvml->library, name));
    if (fn == nullptr && missing.empty()) missing = name;
  };
  symbol("nvmlInit_v2", nvml->init);
  symbol("nvmlShutdown", nvml->shutdown);
  symbol("nvmlDeviceGetHandleByPciBusId_v2", nvml->handle_by_pci_bus_id);
  symbol("nvmlDeviceGetTotalEnergyConsumption", nvml->total_energy);
  symbol("nvmlErrorString", nvml->error_string);
  if (!missing.empty()) {
    reason_ = library + " has no " + missing + " (an NVML too old for this reading)";
    return;
  }
  NvmlReturn status = nvml->init();
  if (status != kNvmlSuccess) {
    reason_ = nvml->message("nvmlInit_v2", status);
    return;
  }
  nvml->initialised = true;
  status = nvml->handle_by_pci_bus_id(pci_bus_id.c_str(), &nvml->device);
  if (status != kNvmlSuccess) {
    reason_ = nvml->message("nvmlDeviceGetHandleByPciBusId_v2", status) + " for " + pci_bus_id;
    return;
  }
  reason_ = nvml->read(start_mj_);
  if (reason_.empty()) nvml_ = std::move(nvml);
}

GpuEnergyMeter::~GpuEnergyMeter() = default;

double GpuEnergyMeter::joules() {
  if (!nvml_) return -1.0;
  unsigned long long now_mj = 0;
  reason_ = nvml_->read(now_mj);
  if (!reason_.empty()) {
    nvml_.reset();
    return -1.0;
  }
  return static_cast<double>(now_mj - start_mj_) / 1e3;
}

}  // namespace scaletrain
