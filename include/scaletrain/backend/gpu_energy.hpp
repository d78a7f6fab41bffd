// The energy a GPU used over a stretch of the run, from NVML's total-energy counter (millijoules
// since the driver loaded; Volta and newer): computing centres account for energy, so a run
// reports its GPUs' joules beside its samples. NVML comes with the driver, so it is loaded at run
// time (dlopen of libnvidia-ml.so.1), never linked: the same binary runs where it is missing and
// says why. No CUDA header, and compiled in every build.
#pragma once

#include <memory>
#include <string>

namespace scaletrain {

class GpuEnergyMeter {
 public:
  // Reads the counter of the GPU at `pci_bus_id` (GpuInfo::pci_bus_id, "0000:3b:00.0") now, as
  // the start. `library` is NVML's file name (tests give another). Never throws: where NVML cannot
  // read the GPU, available() is false and reason() says why.
  explicit GpuEnergyMeter(const std::string& pci_bus_id, const std::string& library = "libnvidia-ml.so.1");
  ~GpuEnergyMeter();
  GpuEnergyMeter(const GpuEnergyMeter&) = delete;
  GpuEnergyMeter& operator=(const GpuEnergyMeter&) = delete;

  bool available() const { return reason_.empty(); }
  // Why not available, e.g. "libnvidia-ml.so.1 not found (...)", "not supported on this GPU";
  // "" when available.
  const std::string& reason() const { return reason_; }
  // Joules since construction, read now; -1 where not available (and after a failed read, which
  // sets reason()).
  double joules();

  struct Nvml;

 private:
  std::unique_ptr<Nvml> nvml_;
  std::string reason_;
  unsigned long long start_mj_ = 0;
};

}  // namespace scaletrain
