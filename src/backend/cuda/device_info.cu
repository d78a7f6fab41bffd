// The visible GPUs as the CUDA runtime reports them, and a probe kernel that shows whether this
// binary carries code for a GPU's architecture (device_info.hpp).
// Runtime API only, called on demand: the runtime loads the driver (libcuda.so.1) at its first
// call, so on a machine without one these functions get an error code back, and a binary that
// never asks never touches the driver. No exceptions: the caller decides what an absent GPU means.
// Written against the API common to CUDA 12 and 13 (cudaDeviceProp fields that 13 removed, such
// as clockRate, are not used).
#include <cuda_runtime.h>

#include <cstdio>
#include <string>

#include "scaletrain/backend/device_info.hpp"

namespace scaletrain {
namespace {

std::string runtime_message(const char* call, cudaError_t status) {
  return std::string(call) + ": " + cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")";
}

// A failed device count means no GPU for the caller, but only some failures are harmless: no
// driver at all (the runtime reports an insufficient driver, or a stub library, and the driver
// version reads 0) or no device. A driver that is present and still fails (older than the
// runtime, a broken installation) is an error to report on a GPU machine.
GpuAvailability classify_failure(cudaError_t status, int driver_version) {
  if (status == cudaErrorNoDevice) return GpuAvailability::no_device;
  if (status == cudaErrorStubLibrary || driver_version == 0) return GpuAvailability::no_driver;
  return GpuAvailability::runtime_error;
}

// "0000:3b:00.0", as the driver names the GPU's folder under /proc/driver/nvidia/gpus/.
std::string pci_bus_id(const cudaDeviceProp& prop) {
  char text[32];
  std::snprintf(text, sizeof text, "%04x:%02x:%02x.0", static_cast<unsigned>(prop.pciDomainID),
                static_cast<unsigned>(prop.pciBusID), static_cast<unsigned>(prop.pciDeviceID));
  return text;
}

// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" from the 16 bytes of cudaDeviceProp::uuid, as
// nvidia-smi -L writes a GPU's.
std::string uuid_text(const cudaUUID_t& uuid) {
  const auto* b = reinterpret_cast<const unsigned char*>(uuid.bytes);
  char text[48];
  std::snprintf(text, sizeof text, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
  return text;
}

GpuInfo describe_gpu(int index, const cudaDeviceProp& prop) {
  GpuInfo gpu;
  gpu.index = index;
  gpu.name = prop.name;
  gpu.compute_major = prop.major;
  gpu.compute_minor = prop.minor;
  gpu.memory_bytes = prop.totalGlobalMem;
  gpu.multiprocessors = prop.multiProcessorCount;
  gpu.pci_bus_id = pci_bus_id(prop);
  gpu.uuid = uuid_text(prop.uuid);
  return gpu;
}

// The probe's expected value at position i, computed alike on the host and the device.
__host__ __device__ int probe_value(int i) { return 7 * i + 3; }

__global__ void write_probe_pattern(int* out, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = probe_value(i);
}

// Makes `index` the current device for its lifetime and restores the caller's afterwards.
class CurrentDevice {
 public:
  explicit CurrentDevice(int index) {
    status_ = cudaGetDevice(&previous_);
    if (status_ == cudaSuccess) status_ = cudaSetDevice(index);
  }
  ~CurrentDevice() {
    if (status_ == cudaSuccess) cudaSetDevice(previous_);
  }
  CurrentDevice(const CurrentDevice&) = delete;
  CurrentDevice& operator=(const CurrentDevice&) = delete;
  cudaError_t status() const { return status_; }

 private:
  int previous_ = 0;
  cudaError_t status_ = cudaSuccess;
};

// Device memory for the probe's ints, freed on every path out.
class ProbeBuffer {
 public:
  explicit ProbeBuffer(int n) { status_ = cudaMalloc(&data_, sizeof(int) * static_cast<std::size_t>(n)); }
  ~ProbeBuffer() {
    if (data_ != nullptr) cudaFree(data_);
  }
  ProbeBuffer(const ProbeBuffer&) = delete;
  ProbeBuffer& operator=(const ProbeBuffer&) = delete;
  cudaError_t status() const { return status_; }
  int* data() { return data_; }

 private:
  int* data_ = nullptr;
  cudaError_t status_ = cudaSuccess;
};

}  // namespace

GpuInventory list_visible_gpus() {
  GpuInventory inventory;
  cudaRuntimeGetVersion(&inventory.runtime_version);  // needs no driver
  if (cudaDriverGetVersion(&inventory.driver_version) != cudaSuccess) inventory.driver_version = 0;

  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();  // leave no error behind for the caller's next CUDA call
    inventory.availability = classify_failure(status, inventory.driver_version);
    inventory.message = runtime_message("cudaGetDeviceCount", status);
    return inventory;
  }
  if (count == 0) {
    inventory.availability = GpuAvailability::no_device;
    inventory.message = "cudaGetDeviceCount: 0 devices";
    return inventory;
  }
  for (int index = 0; index < count; ++index) {
    cudaDeviceProp prop{};
    const cudaError_t prop_status = cudaGetDeviceProperties(&prop, index);
    if (prop_status != cudaSuccess) {
      cudaGetLastError();
      inventory.gpus.clear();
      inventory.availability = GpuAvailability::runtime_error;
      inventory.message =
          runtime_message(("cudaGetDeviceProperties(device " + std::to_string(index) + ")").c_str(), prop_status);
      return inventory;
    }
    inventory.gpus.push_back(describe_gpu(index, prop));
  }
  inventory.availability = GpuAvailability::visible;
  return inventory;
}

std::string run_probe_kernel(int index) {
  constexpr int kCount = 1000;  // not a multiple of the block size: the bounds check runs too
  constexpr int kBlock = 256;
  CurrentDevice device(index);
  if (device.status() != cudaSuccess) return runtime_message("cudaSetDevice", device.status());
  ProbeBuffer buffer(kCount);
  if (buffer.status() != cudaSuccess) return runtime_message("cudaMalloc", buffer.status());

  write_probe_pattern<<<(kCount + kBlock - 1) / kBlock, kBlock>>>(buffer.data(), kCount);
  cudaError_t status = cudaGetLastError();  // "no kernel image" shows at launch
  if (status != cudaSuccess) return runtime_message("probe kernel launch", status);
  int host[kCount];
  status = cudaMemcpy(host, buffer.data(), sizeof host, cudaMemcpyDeviceToHost);
  if (status != cudaSuccess) return runtime_message("cudaMemcpy after the probe kernel", status);

  for (int i = 0; i < kCount; ++i) {
    if (host[i] != probe_value(i)) {
      return "probe kernel wrote " + std::to_string(host[i]) + " at " + std::to_string(i) + ", expected " +
             std::to_string(probe_value(i));
    }
  }
  return "";
}

}  // namespace scaletrain
