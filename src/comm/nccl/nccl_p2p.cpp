// The GPU x GPU bandwidth matrix of scaletrain-comm-bench --p2p --device cuda (nccl_reducer.hpp):
// NCCL's send and receive between each pair of ranks over the world's communicator (NVLink where
// the pair has one, else PCIe and the CPUs' interconnect, or the network across nodes), one pair
// at a time so that no other traffic shares the links.
#include <cuda_runtime.h>
#include <nccl.h>

#include <vector>

#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda/cuda_context.hpp"
#include "comm/nccl/nccl_check.hpp"
#include "comm/nccl/nccl_communicators.hpp"
#include "scaletrain/comm/nccl_reducer.hpp"
#include "scaletrain/core/timer.hpp"

namespace scaletrain::comm {
namespace {

// `iters` + 1 exchanges from `from` to `to` (this rank is one of them); the timed ones' seconds.
double exchange(ncclComm_t comm, cudaStream_t stream, void* buffer, int64_t bytes, int iters, int me, int from,
                int to) {
  Stopwatch clock;
  for (int i = 0; i <= iters; ++i) {
    if (i == 1) clock.reset();  // after the warm-up
    if (me == from)
      ST_CHECK_NCCL(ncclSend(buffer, static_cast<std::size_t>(bytes), ncclInt8, to, comm, stream), comm);
    else
      ST_CHECK_NCCL(ncclRecv(buffer, static_cast<std::size_t>(bytes), ncclInt8, from, comm, stream), comm);
    ST_CHECK_CUDA(cudaStreamSynchronize(stream));
  }
  return clock.elapsed();
}

}  // namespace

std::vector<double> nccl_p2p_gbps(Context& ctx, const Topology& topo, int64_t bytes, int iters,
                                  const SharedGpuCheck& shared_gpus) {
  NcclNeeds needs;
  needs.world = true;
  NcclCommunicators comms(topo, needs, shared_gpus);
  ncclComm_t comm = static_cast<ncclComm_t>(comms.world());
  const Communicator& world = topo.world();
  const int n = world.size(), me = world.rank();
  cudaStream_t stream = cuda::compute_stream(ctx);
  void* buffer = nullptr;
  ST_CHECK_CUDA(cudaMalloc(&buffer, static_cast<std::size_t>(bytes)));
  struct Free {
    void* p;
    ~Free() { cudaFree(p); }
  } free_buffer{buffer};
  ST_CHECK_CUDA(cudaMemsetAsync(buffer, 1, static_cast<std::size_t>(bytes), stream));
  std::vector<float> gbps(static_cast<std::size_t>(n) * n, 0.0f);
  for (int s = 0; s < n; ++s)
    for (int d = 0; d < n; ++d) {
      if (s == d) continue;
      world.barrier();
      if (me != s && me != d) continue;
      const double seconds = exchange(comm, stream, buffer, bytes, iters, me, s, d);
      if (me == d && seconds > 0)
        gbps[static_cast<std::size_t>(s) * n + d] = static_cast<float>(double(bytes) * iters / seconds / 1e9);
    }
  world.allreduce_sum(gbps.data(), static_cast<int64_t>(gbps.size()));  // each entry from its receiver alone
  return std::vector<double>(gbps.begin(), gbps.end());
}

}  // namespace scaletrain::comm
