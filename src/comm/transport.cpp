// Transports of the gradient all-reduce (transport.hpp): the combinations, and whether the MPI is
// CUDA-aware.
#include "scaletrain/comm/transport.hpp"

#include <mpi.h>
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>  // Open MPI's extensions: MPIX_CUDA_AWARE_SUPPORT, MPIX_Query_cuda_support
#endif

#include <initializer_list>

#include "scaletrain/core/error.hpp"

namespace scaletrain::comm {
namespace {

bool one_of(const std::string& value, std::initializer_list<const char*> names) {
  for (const char* name : names)
    if (value == name) return true;
  return false;
}

void require(bool ok, const std::string& message) {
  if (!ok) throw UsageError(message);
}

}  // namespace

const char* transport_name(Transport t) { return t == Transport::nccl ? "nccl" : "mpi"; }

void check_transport_request(const std::string& algorithm, const TransportRequest& r) {
  require(one_of(r.intra, {"auto", "mpi", "nccl"}), "unknown --intra '" + r.intra + "' (known: auto, mpi, nccl)");
  require(one_of(r.inter, {"mpi", "nccl", "auto"}), "unknown --inter '" + r.inter + "' (known: mpi, nccl, auto)");
  require(!(r.inter == "auto" && algorithm != "auto"),
          "--inter auto leaves the transport across nodes to --allreduce auto's calibration; with --allreduce " +
              algorithm + " name it: --inter mpi or nccl");
  require(one_of(r.cuda_aware_mpi, {"auto", "on", "off"}),
          "unknown --cuda-aware-mpi '" + r.cuda_aware_mpi + "' (known: auto, on, off)");
  require(!(r.inter == "nccl" && algorithm == "flat"),
          "--allreduce flat --inter nccl: flat is one all-reduce over every rank, it has no inter-node level "
          "(for NCCL over the whole job use --allreduce flat --intra nccl; --inter applies to hierarchical)");
  require(!(r.inter == "nccl" && r.intra != "nccl"),
          "--inter nccl needs --intra nccl (got --intra " + r.intra +
              "): the gradients stay on the GPU through both levels; with --intra mpi they are in host memory "
              "already and cross nodes with MPI");
}

CudaAwareMpi query_cuda_aware_mpi() {
  CudaAwareMpi q;
#if defined(MPIX_CUDA_AWARE_SUPPORT)
  // Open MPI: the header says how the library was configured, the call what the library loaded
  // at run time can do (a site's build may differ from the headers this binary was built with).
  q.known = true;
  q.supported = MPIX_Query_cuda_support() == 1;
  q.detail = std::string("Open MPI: MPIX_Query_cuda_support() = ") + (q.supported ? "1" : "0") +
             (MPIX_CUDA_AWARE_SUPPORT ? "" : ", its headers say built without CUDA (MPIX_CUDA_AWARE_SUPPORT 0)");
#else
  char version[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
  int length = 0;
  MPI_Get_library_version(version, &length);
  std::string name(version, static_cast<std::size_t>(length));
  if (const auto cut = name.find('\n'); cut != std::string::npos) name.resize(cut);
  q.detail = name + ": no way to ask whether it is CUDA-aware (Open MPI's MPIX_Query_cuda_support is absent)";
#endif
  return q;
}

}  // namespace scaletrain::comm
