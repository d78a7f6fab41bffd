// The members of the NCCL communicators (nccl/nccl_communicators.hpp): plain MPI, in every build,
// so that the checks before NCCL is asked are the same with and without it.
#include <string>
#include <vector>

#include "comm/nccl/nccl_communicators.hpp"
#include "scaletrain/core/error.hpp"

namespace scaletrain::comm {

namespace {

// The world ranks of `group`'s members, in their rank order there.
std::vector<int> world_ranks_of(const Topology& topo, const Communicator& group) {
  const std::vector<double> ranks = group.allgather(static_cast<double>(topo.world().rank()));
  return std::vector<int>(ranks.begin(), ranks.end());
}

}  // namespace

std::vector<int> NcclCommunicators::node_members(const Topology& topo) { return world_ranks_of(topo, topo.node()); }

std::vector<int> NcclCommunicators::cross_members(const Topology& topo) { return world_ranks_of(topo, topo.cross()); }

std::string NcclCommunicators::shared_gpus_reason(const Topology& topo, NcclNeeds needs,
                                                  const SharedGpuCheck& shared_gpus) {
  const Communicator& world = topo.world();
  ST_CHECK(!needs.cross || topo.uniform(),
           "NCCL across nodes (--inter nccl) needs nodes of equal size, got " << topo.describe());
  // Collectives first, on every rank alike; then the checks, which are local.
  const std::vector<int> node_ranks = needs.node ? node_members(topo) : std::vector<int>{};
  const std::vector<int> cross_ranks = needs.cross ? cross_members(topo) : std::vector<int>{};
  std::string why;
  if (needs.node) why = shared_gpus(node_ranks);
  if (needs.world && why.empty()) {
    std::vector<int> all(static_cast<std::size_t>(world.size()));
    for (int r = 0; r < world.size(); ++r) all[static_cast<std::size_t>(r)] = r;
    why = shared_gpus(all);
  }
  if (needs.cross && why.empty()) why = shared_gpus(cross_ranks);
  for (const std::string& reason : world.allgather(why))
    if (!reason.empty()) return reason;
  return "";
}

void NcclCommunicators::refuse_shared_gpus(const Topology& topo, NcclNeeds needs, const SharedGpuCheck& shared_gpus) {
  const std::string reason = shared_gpus_reason(topo, needs, shared_gpus);
  if (!reason.empty())
    ST_THROW("NCCL needs one GPU per rank in each of its communicators (it refuses two ranks on one GPU): " << reason);
}

NcclNeeds nccl_needs(Algorithm shape, Transport inter, bool automatic) {
  NcclNeeds needs;
  needs.world = automatic || shape == Algorithm::flat;
  needs.node = automatic || shape == Algorithm::hierarchical;
  needs.cross = needs.node && inter == Transport::nccl;
  return needs;
}

void refuse_shared_gpus_for(const Topology& topo, const NcclReducerOptions& options) {
  ST_CHECK(options.shared_gpus, "internal: the NCCL reducer needs a shared-GPU check");
  const Transport inter = options.automatic && options.inter_automatic ? Transport::nccl : options.inter;
  NcclCommunicators::refuse_shared_gpus(topo, nccl_needs(options.shape, inter, options.automatic), options.shared_gpus);
}

std::string nccl_shared_gpus(const Topology& topo, Algorithm shape, Transport inter, const SharedGpuCheck& check,
                             bool automatic) {
  return NcclCommunicators::shared_gpus_reason(topo, nccl_needs(shape, inter, automatic), check);
}

}  // namespace scaletrain::comm
