// The NCCL communicators (nccl_communicators.hpp), with NCCL.
#include "comm/nccl/nccl_communicators.hpp"

#include <nccl.h>

#include <sstream>
#include <string>
#include <vector>

#include "comm/nccl/nccl_check.hpp"
#include "scaletrain/core/error.hpp"

namespace scaletrain::comm {

namespace {

// One communicator over `group` (its rank 0 makes the unique id, MPI carries it to the others).
ncclComm_t init_over(const Communicator& group) {
  ncclUniqueId id{};
  std::string bytes;
  if (group.rank() == 0) {
    ST_CHECK_NCCL(ncclGetUniqueId(&id), nullptr);
    bytes.assign(id.internal, sizeof id.internal);
  }
  group.broadcast(bytes, 0);
  ST_CHECK(bytes.size() == sizeof id.internal, "internal: an NCCL unique id of " << bytes.size() << " bytes");
  bytes.copy(id.internal, sizeof id.internal);
  ncclComm_t comm = nullptr;
  ST_CHECK_NCCL(ncclCommInitRank(&comm, group.size(), id, group.rank()), comm);
  return comm;
}

}  // namespace

bool nccl_built() { return true; }

std::string nccl_runtime_version() {
  int code = 0;
  ST_CHECK_NCCL(ncclGetVersion(&code), nullptr);
  // NCCL_VERSION_CODE since 2.9: major * 10000 + minor * 100 + patch.
  std::ostringstream os;
  os << code / 10000 << "." << (code / 100) % 100 << "." << code % 100;
  return os.str();
}

struct NcclCommunicators::Impl {
  ncclComm_t node = nullptr, world = nullptr, cross = nullptr;

  // Cross first: the reverse of their making.
  void destroy() noexcept {
    for (ncclComm_t* c : {&cross, &world, &node}) {
      if (*c != nullptr) ncclCommDestroy(*c);
      *c = nullptr;
    }
  }
};

NcclCommunicators::NcclCommunicators(const Topology& topo, NcclNeeds needs, const SharedGpuCheck& shared_gpus)
    : impl_(std::make_unique<Impl>()) {
  refuse_shared_gpus(topo, needs, shared_gpus);
  const Communicator& world = topo.world();
  try {
    if (needs.node) impl_->node = init_over(topo.node());
    if (needs.world) impl_->world = init_over(world);
    if (needs.cross) impl_->cross = init_over(topo.cross());
  } catch (...) {
    impl_->destroy();
    throw;
  }
}

NcclCommunicators::~NcclCommunicators() {
  if (impl_) impl_->destroy();
}

void* NcclCommunicators::node() const { return impl_->node; }
void* NcclCommunicators::world() const { return impl_->world; }
void* NcclCommunicators::cross() const { return impl_->cross; }

std::string NcclCommunicators::async_error() const {
  const std::pair<const char*, ncclComm_t> comms[] = {
      {"node", impl_->node}, {"world", impl_->world}, {"cross-node", impl_->cross}};
  for (const auto& [name, comm] : comms) {
    if (comm == nullptr) continue;
    ncclResult_t state = ncclSuccess;
    const ncclResult_t polled = ncclCommGetAsyncError(comm, &state);
    if (polled != ncclSuccess) state = polled;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 14, 0)
    if (state == ncclInProgress) continue;  // a non-blocking operation still running: not an error
#endif
    if (state != ncclSuccess)
      return std::string("the NCCL ") + name + " communicator failed: " + ncclGetErrorString(state) +
             detail::nccl_last_error(comm);
  }
  return "";
}

void NcclCommunicators::abort() noexcept {
  for (ncclComm_t* c : {&impl_->cross, &impl_->world, &impl_->node}) {
    if (*c != nullptr) ncclCommAbort(*c);
    *c = nullptr;
  }
}

}  // namespace scaletrain::comm
