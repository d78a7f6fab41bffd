// The gradient reducer on GPU memory (issue 27, sections 2 and 3): --intra nccl. The buckets of the
// flat gradients are all-reduced where backward wrote them, on a communication stream of the GPU:
//   flat          one ncclAllReduce over every rank (NCCL's own rings and trees);
//   hierarchical  ncclReduceScatter inside the node, the all-reduce of this rank's 1/L share across
//                 nodes (--inter mpi: MPI on a pinned host copy, or on the device pointer where the
//                 MPI is CUDA-aware; --inter nccl: NCCL on the cross-node communicator), then
//                 ncclAllGather inside the node. Any count: the n mod L elements that do not split
//                 evenly are all-reduced inside the node and then across nodes as a whole, by every
//                 cross-node group alike (with --inter mpi the same MPI sum, so the same bits on
//                 every rank; with --inter nccl each group's NCCL may order that sum differently
//                 on 3 or more nodes, so those few elements may differ in their last bit).
// With --grad-compression fp16/bf16 the bucket is cast to 16 bits on the GPU and every level moves
// and sums 16-bit values (NCCL's half and bfloat16 sums; across nodes MPI's 16-bit sum of
// allreduce.cpp), half the bytes; the sum is widened to fp32 and divided by the world size there.
// A bucket starts when backward has written it (a CUDA event on the compute stream; the host does
// not wait); the optimizer's work waits for the last bucket with a stream wait. One thread issues
// every NCCL and MPI call, bucket by bucket in bucket order, so every rank issues the same sequence
// on each communicator (NCCL's rule; communicators are not thread-safe).
// Every function here is in every build; without NCCL they say it is not built.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "scaletrain/backend/context.hpp"
#include "scaletrain/comm/allreduce.hpp"
#include "scaletrain/comm/gradient_reducer.hpp"
#include "scaletrain/comm/topology.hpp"
#include "scaletrain/comm/transport.hpp"
#include "scaletrain/tensor/flat_layout.hpp"

namespace scaletrain::comm {

// Whether this build has the NCCL transport (CUDA backend with NCCL found at configure time).
bool nccl_built();
// The version of the NCCL library loaded at run time, "2.28.9"; loads it. Throws where NCCL is not
// built or cannot be loaded, saying why.
std::string nccl_runtime_version();

// Given the world ranks of a would-be communicator's members: "" or why they cannot form one
// (two of them on one GPU; train::gpus_shared_within).
using SharedGpuCheck = std::function<std::string(const std::vector<int>& members)>;

// "" where every NCCL communicator that `shape` and `inter` need (flat: the world's; hierarchical:
// the node's, and the cross-node one for --inter nccl; `automatic`: both shapes') can be formed,
// else the first failing rank's reason. Collective over topo.world(); the same answer on every rank.
std::string nccl_shared_gpus(const Topology& topo, Algorithm shape, Transport inter, const SharedGpuCheck& check,
                             bool automatic = false);

struct NcclReducerOptions {
  Algorithm shape = Algorithm::hierarchical;
  // --allreduce auto: per bucket size, flat or hierarchical, whichever a start-up calibration on
  // GPU memory measured faster (4 KiB .. 64 MiB by 4x, as the host AllReducer's; rank 0 logs it).
  // Needs both shapes' communicators; on nodes of unequal size it is flat, saying so.
  bool automatic = false;
  // With `automatic` (--inter auto): hierarchical is timed with MPI and with NCCL across nodes as
  // well, and each size class takes the fastest of the three paths. Needs the cross-node
  // communicator too.
  bool inter_automatic = false;
  Transport inter = Transport::mpi;  // hierarchical's level across nodes
  bool cuda_aware_mpi = false;       // --inter mpi: MPI on device pointers, no host copy
  Compression compression = Compression::none;
  BucketOptions buckets;
  SharedGpuCheck shared_gpus;  // checked before NCCL is asked (it refuses two ranks on one GPU)
};

// The reducer on the flat gradients `gradients` (f32, on ctx's GPU; it, ctx and topo outlive the
// reducer). Collective over topo.world(): builds the NCCL communicators the options need, and
// throws on every rank where two of a communicator's members share a GPU.
std::unique_ptr<GradientReducer> make_nccl_reducer(Context& ctx, const Topology& topo, const FlatLayout& gradients,
                                                   const NcclReducerOptions& options);

// scaletrain-comm-bench --p2p --device cuda: the GPU x GPU bandwidth matrix in GB/s (1e9 B/s),
// row = sender, column = receiver, n x n for the n ranks of topo.world() (the diagonal left 0 for
// the caller). Each pair in turn, the others waiting: `iters` timed ncclSend/ncclRecv of `bytes`
// after one warm-up, timed on the receiver. Collective; the same matrix on every rank. Throws on
// every rank where two ranks share a GPU (NCCL's world communicator cannot form), or without NCCL.
std::vector<double> nccl_p2p_gbps(Context& ctx, const Topology& topo, int64_t bytes, int iters,
                                  const SharedGpuCheck& shared_gpus);

}  // namespace scaletrain::comm
