// Private to src/comm (and the GPU tests): the NCCL communicators of the GPU gradient all-reduce
// (issue 27, section 1), built once at start-up from the Topology, only those the chosen
// algorithm needs:
//   node   the ranks of this node: NCCL inside the node (NVLink on a DGX-1); the unique id comes
//          from the node's local rank 0 over the node's MPI communicator;
//   world  every rank: flat --intra nccl, NCCL's own rings and trees over the whole job;
//   cross  the ranks of every node with this rank's local rank: --inter nccl.
// Destroyed in the reverse order (cross, world, node), at exit and on error; abort() tears them
// down without waiting for operations in flight (the stall watchdog's way out of a hang).
//
// NCCL refuses two ranks of one communicator on the same GPU ("Duplicate GPU detected") and may
// hang the others while it does. So before any communicator is initialised, each one's members are
// checked by the caller's `shared_gpus` (train::gpus_shared_within over the GPU binding), and
// every rank refuses together, naming the ranks, host and GPU.
//
// The header names no NCCL type: the communicators are opaque here, and a build without NCCL
// compiles the same callers (nccl_communicators_absent.cpp answers that NCCL is not built).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "scaletrain/comm/nccl_reducer.hpp"  // nccl_built, nccl_runtime_version, SharedGpuCheck
#include "scaletrain/comm/topology.hpp"

namespace scaletrain::comm {

struct NcclNeeds {
  bool node = false;
  bool world = false;
  bool cross = false;
};

// The communicators a reducer of this shape needs (nccl_reducer.hpp).
NcclNeeds nccl_needs(Algorithm shape, Transport inter, bool automatic = false);
// make_nccl_reducer's first step in every build: NcclCommunicators::refuse_shared_gpus for the
// communicators these options need.
void refuse_shared_gpus_for(const Topology& topo, const NcclReducerOptions& options);

class NcclCommunicators {
 public:
  // Given the world ranks of a communicator's members, "" or why they cannot form one (two on a
  // GPU).
  using SharedGpuCheck = comm::SharedGpuCheck;

  // Collective over topo.world(); every rank's GPU is current (its Context). Throws on every rank,
  // with the first failing rank's reason, when a communicator's members share a GPU; an NCCL
  // error names the call, ncclGetErrorString and ncclGetLastError.
  NcclCommunicators(const Topology& topo, NcclNeeds needs, const SharedGpuCheck& shared_gpus);
  ~NcclCommunicators();
  NcclCommunicators(const NcclCommunicators&) = delete;
  NcclCommunicators& operator=(const NcclCommunicators&) = delete;

  // The ncclComm_t of each (nullptr where not built), as void*: the .cpp files that include
  // nccl.h cast them back.
  void* node() const;
  void* world() const;
  void* cross() const;

  // "" while every communicator is well, else which one failed and NCCL's words
  // (ncclCommGetAsyncError): the stall watchdog polls it.
  std::string async_error() const;
  // Aborts every communicator at once, operations in flight included; afterwards they are gone.
  void abort() noexcept;

  // The world ranks of this rank's node and of its cross-node group, in rank order within each
  // communicator (collective over the node's and the cross-node MPI communicator).
  static std::vector<int> node_members(const Topology& topo);
  static std::vector<int> cross_members(const Topology& topo);
  // The check before NCCL is asked (the constructor's first step, in every build): each rank checks
  // the members of each communicator it would join with `shared_gpus`; collective over
  // topo.world(); throws on every rank with the first failing rank's reason.
  static void refuse_shared_gpus(const Topology& topo, NcclNeeds needs, const SharedGpuCheck& shared_gpus);
  // The same check without the throw: "" or the first failing rank's reason, on every rank.
  static std::string shared_gpus_reason(const Topology& topo, NcclNeeds needs, const SharedGpuCheck& shared_gpus);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace scaletrain::comm
