// The NCCL communicators in a build without NCCL (no CUDA backend, or NCCL not found at configure
// time): every entry says so, so callers need no #if.
#include "comm/nccl/nccl_communicators.hpp"
#include "scaletrain/core/error.hpp"

namespace scaletrain::comm {

namespace {
[[noreturn]] void not_built() {
  ST_THROW(
      "this scaletrain has no NCCL transport: it was built without the CUDA backend or without NCCL "
      "(configure with NCCL_ROOT set to NCCL's prefix; the build's summary says what was found)");
}
}  // namespace

bool nccl_built() { return false; }
std::string nccl_runtime_version() { not_built(); }

struct NcclCommunicators::Impl {};

// The same refusal as with NCCL first, so that a shared GPU is named alike in every build.
NcclCommunicators::NcclCommunicators(const Topology& topo, NcclNeeds needs, const SharedGpuCheck& shared_gpus) {
  refuse_shared_gpus(topo, needs, shared_gpus);
  not_built();
}
NcclCommunicators::~NcclCommunicators() = default;
void* NcclCommunicators::node() const { return nullptr; }
void* NcclCommunicators::world() const { return nullptr; }
void* NcclCommunicators::cross() const { return nullptr; }
std::string NcclCommunicators::async_error() const { return ""; }
void NcclCommunicators::abort() noexcept {}

std::vector<double> nccl_p2p_gbps(Context&, const Topology& topo, int64_t, int, const SharedGpuCheck& shared_gpus) {
  NcclNeeds world;
  world.world = true;
  NcclCommunicators::refuse_shared_gpus(topo, world, shared_gpus);
  not_built();
}

// The same shared-GPU refusal first, then "not built".
std::unique_ptr<GradientReducer> make_nccl_reducer(Context&, const Topology& topo, const FlatLayout&,
                                                   const NcclReducerOptions& options) {
  refuse_shared_gpus_for(topo, options);
  not_built();
}

}  // namespace scaletrain::comm
