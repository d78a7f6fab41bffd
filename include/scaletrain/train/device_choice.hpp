// --device auto|cpu|cuda: which device each rank computes on, decided by all ranks together so
// that a job never runs half on GPUs and half on CPUs, and a refusal reaches every rank alike.
// A rank on a GPU uses the GPU of its local rank among the ranks of its physical host (host
// name, not an emulated node of --ranks-per-node), modulo the GPUs visible to it, so the
// CUDA_VISIBLE_DEVICES that Slurm or the user sets is respected. More ranks than GPUs on a host is
// allowed with a warning: it is how the multi-rank path is tested on a one-GPU machine.
#pragma once

#include <string>
#include <vector>

#include "scaletrain/backend/device_info.hpp"
#include "scaletrain/comm/communicator.hpp"
#include "scaletrain/tensor/tensor.hpp"

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
  GpuInventory inventory;  // the GPUs this rank sees, as listed for the choice (not listed for --device cpu)
  // What rank 0 prints at start-up: the device, each host's GPUs and versions, and warnings.
  std::vector<std::string> log_lines;
};

// The GPU of local rank `local_rank` when `visible` GPUs are visible (visible > 0).
int gpu_for_local_rank(int local_rank, int visible);

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

}  // namespace scaletrain::train
