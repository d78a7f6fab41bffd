// The transport of each level of the gradient all-reduce (issue 27): --intra inside a node,
// --inter across nodes, beside --allreduce's shape.
//   mpi   host memory: on a GPU the gradients are staged through a pinned host mirror
//         (DeviceStaging) and summed by the MPI all-reduces of allreduce.hpp;
//   nccl  device memory: NCCL on the GPU's buffers (NVLink inside a DGX-1), the gradients never
//         leave the GPU inside the node; across nodes `--inter mpi` then stages each rank's share
//         through pinned host memory, or hands MPI the device pointers where the MPI is CUDA-aware
//         (--cuda-aware-mpi), and `--inter nccl` uses NCCL's cross-node communicator.
// Which combinations exist, and the run-time question whether this MPI is CUDA-aware, are here;
// which transports a run uses (the device, the GPUs, NCCL's presence) is the trainer's choice
// (train/transport_choice.hpp).
#pragma once

#include <string>

namespace scaletrain::comm {

enum class Transport { mpi, nccl };
const char* transport_name(Transport t);

// The options as given (before the device is known).
struct TransportRequest {
  std::string intra = "auto";           // auto | mpi | nccl
  std::string inter = "mpi";            // mpi | nccl | auto (with --allreduce auto)
  std::string cuda_aware_mpi = "auto";  // auto | on | off
};

// Throws UsageError for an unknown name, or a combination that does not exist with --allreduce
// `algorithm` (flat | hierarchical | auto), naming it: --inter nccl with flat (one level, no
// inter-node one), --inter nccl without --intra nccl (the buffers would leave the GPU inside
// the node to come back for NCCL), and --inter auto without --allreduce auto (whose calibration
// chooses it).
// Needs no MPI: option parsing calls it.
void check_transport_request(const std::string& algorithm, const TransportRequest& request);

// What this MPI library says of CUDA-aware communication (device pointers in MPI calls), asked at
// run time where the library can be asked (Open MPI's MPIX_Query_cuda_support); MPI must be
// initialised.
struct CudaAwareMpi {
  bool supported = false;
  bool known = false;  // false: this MPI offers no way to ask (then treated as not CUDA-aware)
  std::string detail;  // e.g. "Open MPI: MPIX_Query_cuda_support() = 0 (built without CUDA)"
};
CudaAwareMpi query_cuda_aware_mpi();

}  // namespace scaletrain::comm
