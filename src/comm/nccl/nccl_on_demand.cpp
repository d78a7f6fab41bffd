// NCCL loaded when it is first called, not when the program starts. libnccl.so.2 is over 200 MB:
// linking it would load it into every process, CPU runs and the test suite's thousands of
// processes included, and the GPU bundle could not carry it (tools/gpu-bundle.sh). So executables
// do not link libnccl; this file defines the NCCL functions the communicators call, under NCCL's
// own exported names and with nccl.h's signatures, and each forwards to the function of that name
// in libnccl.so.2, opened with dlopen on the first call: from the library search path (a
// module's LD_LIBRARY_PATH, PyTorch's nvidia-nccl wheel), else from the folder this build found
// NCCL in. As src/backend/cuda/cublas/cublas_on_demand.cpp does for cuBLAS.
#include <dlfcn.h>
#include <nccl.h>

#include <string>

#include "scaletrain/core/error.hpp"

namespace {

void* open_nccl() {
  const std::string soname = "libnccl.so.2";
  if (void* handle = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL)) return handle;
  const std::string first_error = dlerror();
  const std::string found = std::string(ST_NCCL_LIBRARY_DIR) + "/" + soname;
  if (void* handle = dlopen(found.c_str(), RTLD_NOW | RTLD_LOCAL)) return handle;
  ST_THROW("cannot load NCCL (--intra nccl / --inter nccl): " << first_error << "; nor " << found << ": " << dlerror()
                                                              << " (load the NCCL module, or set LD_LIBRARY_PATH to "
                                                                 "the folder of libnccl.so.2)");
}

// The function `name` of libnccl, as a pointer of type Fn.
template <typename Fn>
Fn nccl_function(const char* name) {
  static void* const library = open_nccl();
  void* symbol = dlsym(library, name);
  ST_CHECK(symbol != nullptr, "NCCL has no function " << name << " (NCCL 2.13 or newer is needed): " << dlerror());
  return reinterpret_cast<Fn>(symbol);
}

}  // namespace

// Each: the library's function, looked up once (a function-local static: thread-safe).
#define ST_FORWARD(name) static const auto real = nccl_function<decltype(&name)>(#name)

extern "C" {

ncclResult_t ncclGetVersion(int* version) {
  ST_FORWARD(ncclGetVersion);
  return real(version);
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* unique_id) {
  ST_FORWARD(ncclGetUniqueId);
  return real(unique_id);
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId comm_id, int rank) {
  ST_FORWARD(ncclCommInitRank);
  return real(comm, nranks, comm_id, rank);
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  ST_FORWARD(ncclCommDestroy);
  return real(comm);
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  ST_FORWARD(ncclCommAbort);
  return real(comm);
}

const char* ncclGetErrorString(ncclResult_t result) {
  ST_FORWARD(ncclGetErrorString);
  return real(result);
}

const char* ncclGetLastError(ncclComm_t comm) {
  ST_FORWARD(ncclGetLastError);
  return real(comm);
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* async_error) {
  ST_FORWARD(ncclCommGetAsyncError);
  return real(comm, async_error);
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  ST_FORWARD(ncclAllReduce);
  return real(sendbuff, recvbuff, count, datatype, op, comm, stream);
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  ST_FORWARD(ncclReduceScatter);
  return real(sendbuff, recvbuff, recvcount, datatype, op, comm, stream);
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream) {
  ST_FORWARD(ncclAllGather);
  return real(sendbuff, recvbuff, sendcount, datatype, comm, stream);
}

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  ST_FORWARD(ncclSend);
  return real(sendbuff, count, datatype, peer, comm, stream);
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  ST_FORWARD(ncclRecv);
  return real(recvbuff, count, datatype, peer, comm, stream);
}

ncclResult_t ncclGroupStart() {
  ST_FORWARD(ncclGroupStart);
  return real();
}

ncclResult_t ncclGroupEnd() {
  ST_FORWARD(ncclGroupEnd);
  return real();
}

}  // extern "C"
