// --device auto|cpu|cuda: which device each rank computes on, decided by all ranks together so
// that a job never runs half on GPUs and half on CPUs, and a refusal reaches every rank alike.
// On a GPU, the ranks of each physical host (host name, not an emulated node of --ranks-per-node)
// share out the GPUs they see by UUID, one each where there are enough (gpu_binding.hpp), so the
// CUDA_VISIBLE_DEVICES that Slurm or the user sets is respected whatever the task distribution.
// More ranks than GPUs on a host is allowed with a warning naming them: it is how the multi-rank
// path is tested on a one-GPU machine. Rank 0 prints a binding table (rank, GPU, NUMA, cores).
#pragma once

#include <string>
#include <vector>

#include "scaletrain/backend/context.hpp"
#include "scaletrain/backend/device_info.hpp"
#include "scaletrain/comm/communicator.hpp"
#include "scaletrain/tensor/tensor.hpp"
#include "scaletrain/train/gpu_binding.hpp"

namespace scaletrain::train {

enum class DeviceRequest { automatic, cpu, cuda };

// "auto", "cpu" or "cuda"; anything else is a UsageError naming the option and the choices.
DeviceRequest parse_device_request(const std::string& text);
const char* device_request_name(DeviceRequest request);

struct DeviceChoice {
  Device device = Device::cpu;
  int gpu_index = -1;  // the CUDA device ordinal on Device::cuda, else -1
  int local_rank = 0;  // among the ranks of this rank's host
  int ranks_on_host = 1;
  GpuInventory inventory;           // the GPUs this rank sees, as listed for the choice (not listed for --device cpu)
  std::vector<BindingRow> binding;  // on Device::cuda: every rank's GPU and cores (report.json device.binding)
  // What rank 0 prints at start-up: the device, each host's GPUs and versions, and warnings.
  std::vector<std::string> log_lines;
};

// "GPU 0: NVIDIA H100 80GB HBM3, 79.1 GiB, compute 9.0, 132 SMs (0000:3b:00.0)", one line per GPU,
// then "driver 13.0, runtime 13.0, cuDNN 9.19.0, NCCL 2.28.9" (the versions this binary carries).
std::vector<std::string> describe_gpus(const GpuInventory& inventory);

// Collective over comm. `command` ("train", "eval", "predict") names the caller in messages.
// --device cuda where some rank sees no GPU (or the binary has no CUDA backend) throws
// UsageError on every rank, naming the first such rank, its host and why; --device auto then
// chooses the CPU and says why in log_lines. `not_on_gpu`: "" where the command can run this
// model and these options on a GPU, else why not (e.g. "--optimizer lars runs on the CPU only");
// then cuda is refused with that reason and auto chooses the CPU, saying so.
DeviceChoice choose_device(const comm::Communicator& comm, DeviceRequest request, const std::string& command,
                           const std::string& not_on_gpu);
// The same choice from a given inventory of this rank's GPUs instead of the runtime's: the MPI
// tests pass made-up GPUs to check the exchange and the assignment on machines without any.
DeviceChoice choose_device_among(const comm::Communicator& comm, DeviceRequest request, const std::string& command,
                                 const std::string& not_on_gpu, const GpuInventory& inventory);

// --precision amp-bf16 needs bf16 tensor cores (compute 8.0 on, A100 and H100): on a GPU
// without them (V100, compute 7.0) every rank refuses it, naming the first such rank's GPU.
// Nothing for the CPU or another precision. Collective over comm.
void check_gpu_precision(const comm::Communicator& comm, const DeviceChoice& choice, Precision precision,
                         const std::string& command);

}  // namespace scaletrain::train
