// Which transport carries each level of a run's gradient all-reduce (issue 27, section 2), chosen
// by every rank together once the device is known:
//   on the CPU         --intra mpi --inter mpi; nccl is refused on every rank (NCCL sums GPU memory).
//   on GPUs            --intra auto is nccl where NCCL loads on every rank and no two ranks share a
//                      GPU; otherwise mpi (the host-staged path) with a warning saying why.
//                      --intra nccl is refused where NCCL does not load, or where two members of a
//                      communicator it needs share a GPU (naming them); emulated nodes of one rank
//                      each may share one GPU (the tests on one GPU). --allreduce auto calibrates
//                      the NCCL shapes on GPU memory (both shapes' communicators are needed). One
//                      rank has nothing to reduce (auto: mpi).
//   --cuda-aware-mpi   on is refused where the MPI says it is not CUDA-aware; auto uses it where it
//                      says it is. Only --intra nccl --inter mpi hands MPI device pointers.
#pragma once

#include <string>
#include <vector>

#include "scaletrain/comm/topology.hpp"
#include "scaletrain/comm/transport.hpp"
#include "scaletrain/core/json.hpp"
#include "scaletrain/train/config.hpp"
#include "scaletrain/train/device_choice.hpp"

namespace scaletrain::train {

struct TransportChoice {
  comm::Transport intra = comm::Transport::mpi;
  comm::Transport inter = comm::Transport::mpi;
  bool inter_automatic = false;  // --inter auto: the NCCL reducer's calibration chooses per size
  bool cuda_aware_mpi = false;   // MPI across nodes on device pointers
  comm::CudaAwareMpi mpi;        // what the MPI said
  std::string nccl_version;      // the loaded library's, where NCCL is used
  // Rank 0's start-up lines: why a default fell back, settings without effect.
  std::vector<std::string> notes;

  // For report.json's allreduce_options: intra, inter, cuda_aware_mpi {requested, used, mpi}, nccl.
  Json to_json(const TrainConfig& config) const;
};

// Collective over comm (topo's world). Throws UsageError on every rank for a combination the run
// cannot have, naming the option and why.
TransportChoice choose_transports(const comm::Communicator& comm, const comm::Topology& topo, const TrainConfig& config,
                                  const DeviceChoice& device);

}  // namespace scaletrain::train
